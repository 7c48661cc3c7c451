"""The PHP chat's calls, made by PHP: tests/clients/chat_client.php (php-cli with curl) posts the
demo tour line by line to a live `chatrecord serve`, each line with the bearer token, the ETag it
follows as If-Match and an Idempotency-Key of its own, retries the last line, reads the turn and
meets a stale If-Match and an unknown conversation (issue 23, item 3). `.ci/run` installs
Debian's php-cli and php-curl; without them the test fails in CI and is skipped elsewhere."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import _in_ci
from tests.e2e.conftest import ROOT
from tests.http.conftest import TOKEN, Server, server, unique  # noqa: F401 - the fixture, per backend

SCRIPT = ROOT / "tests" / "clients" / "chat_client.php"
DEMO = ROOT / "tests" / "data" / "demo_seo_tour.jsonl"
DEMO_TYPES = [
    "conversation_started",
    "user_message",
    "segment_returned",
    "question_answered",
    *["segment_returned", "card_decided"] * 6,
    "segment_returned",
    "tour_ended",
    "user_message",
]


@pytest.fixture(scope="module")
def php() -> str:
    """Returns the path of a php-cli that has curl; fails in CI, skips elsewhere, without one."""
    path = shutil.which("php")
    has_curl = (
        path is not None
        and subprocess.run([path, "-r", "exit(function_exists('curl_init') ? 0 : 1);"], check=False).returncode == 0
    )
    if not has_curl:
        message = "php-cli with curl is not installed (apt-get install php-cli php-curl; .ci/run does)"
        if _in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    assert path is not None
    return path


def test_the_php_chat_posts_the_demo_tour_and_reads_the_turn(php: str, server: Server) -> None:  # noqa: F811
    conversation = unique("conv-php")
    done = subprocess.run(
        [php, str(SCRIPT), server.url, str(DEMO), conversation],
        env={**os.environ, "CHATRECORD_API_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    out = done.stdout.splitlines()

    recorded = [re.fullmatch(r"line (\d+) (\w+): 200, version (\d+), appended (\d+)", line) for line in out[:19]]
    assert all(recorded), out[:19]
    assert [int(m[1]) for m in recorded if m] == list(range(1, 20))
    assert [m[2] for m in recorded if m] == DEMO_TYPES
    versions = [int(m[3]) for m in recorded if m]
    appended = [int(m[4]) for m in recorded if m]
    # each line followed the version the one before it left: the versions add up with no gap
    assert versions == [sum(appended[: i + 1]) for i in range(19)]
    version = versions[-1]
    assert version == 20
    # the store holds the 19 lines: the export gives them back (without what is never stored)
    exported = server.client.get(f"/v1/conversations/{conversation}/export")
    assert exported.status_code == 200, exported.text
    stored = [json.loads(line) for line in exported.text.splitlines()]
    sent = [json.loads(line) for line in DEMO.read_text("utf-8").splitlines()]
    assert [(s["conversation"], s["type"], s["at"]) for s in stored] == [(conversation, s["type"], s["at"]) for s in sent]

    assert out[19] == f"retry of line 19: 200, version {version}, Idempotent-Replayed: true"

    turn = server.client.get(f"/v1/conversations/{conversation}/turn").json()
    assert len(turn["notes"]) == 14
    assert out[20] == f'turn: 200, version {version}, ETag "{version}", rules 2026-11-02, 14 notes'
    placed = [f" at {n['at']} (byte {n['at_byte']})" if n.get("at") is not None else "" for n in turn["notes"]]
    assert any(n["at"] != n["at_byte"] for n in turn["notes"])  # the demo's answers hold umlauts before a note
    assert out[21:35] == [
        f"  note into {n['into']} {n['index']}{at}: {n['text']}" for n, at in zip(turn["notes"], placed, strict=True)
    ]

    assert out[35:] == [
        f'stale If-Match "{version - 1}": 412 urn:chatrecord:problem:version-mismatch, actual {version}',
        "too early: 409 urn:chatrecord:problem:refused-line, waits for message 1, Retry-After 1",
        "sent again: 200, version 4",  # started, then message 1 with its skill, then message 2
        "unknown conversation: 404 urn:chatrecord:problem:unknown-conversation",
    ]
    # neither the retry nor the stale edit stored anything
    assert server.client.get(f"/v1/conversations/{conversation}/turn").json()["version"] == version
