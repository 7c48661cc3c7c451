"""`chatrecord traces push` against a real OTLP receiver: Arize Phoenix, read back through its
own REST API (`/v1/projects/{project}/spans` and `/sessions`).

In CI, `.ci/run` installs Phoenix in a virtual environment of its own, starts it on a loopback
port and exports its address as CHATRECORD_PHOENIX_URL; elsewhere this module starts the
`phoenix` found there (on PATH, or in ${TMPDIR:-/tmp}/chatrecord-phoenix-venv, which `.ci/run`
makes) on free loopback ports. Marker `phoenix` (deselected by default, selected by `.ci/run`):
    python3 -m pytest tests/traces/test_phoenix.py -m phoenix -n 0
The spans go to the project `chatrecord-test` (OTEL_RESOURCE_ATTRIBUTES
`openinference.project.name`). Phoenix keeps a span id once, in the project it first came to:
a Phoenix given by CHATRECORD_PHOENIX_URL starts empty (as `.ci/run`'s does).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import DEMO, runner
from tests.traces.lines import BEHALTEN, BEHALTEN_TOUR, PLANTED, PLANTED_CONVERSATION, planted_lines

pytestmark = pytest.mark.phoenix

VENV_PHOENIX = Path(os.environ.get("TMPDIR", "/tmp")) / "chatrecord-phoenix-venv" / "bin" / "phoenix"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Yields the base URL of a Phoenix: CHATRECORD_PHOENIX_URL's, else one of this module's own."""
    given = os.environ.get("CHATRECORD_PHOENIX_URL")
    if given:
        assert answers(given), f"CHATRECORD_PHOENIX_URL={given} does not answer /healthz"
        yield given.rstrip("/")
        return
    command = shutil.which("phoenix") or (str(VENV_PHOENIX) if VENV_PHOENIX.exists() else None)
    if command is None:
        pytest.fail(f"Phoenix is not installed: .ci/run installs it in {VENV_PHOENIX.parent.parent}", pytrace=False)
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "phoenix.log").open("w")
    server = subprocess.Popen([command, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(360):
            if answers(url):
                break
            assert server.poll() is None, (work / "phoenix.log").read_text()
            time.sleep(0.5)
        else:
            pytest.fail("Phoenix did not answer within 180 s", pytrace=False)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def spans_in(url: str, project: str, expected: int) -> list[dict[str, Any]]:
    """Returns the spans of `project`, once it holds `expected` (Phoenix ingests in the background)."""
    spans: list[dict[str, Any]] = []
    for _ in range(120):
        try:
            spans = get(f"{url}/v1/projects/{project}/spans?limit=1000")["data"]
        except OSError:
            spans = []  # the project is made by the first span it receives
        if len(spans) >= expected:
            break
        time.sleep(0.5)
    return spans


def test_phoenix_shows_a_session_per_conversation_a_trace_per_turn_and_the_marks(phoenix: str, tmp_path: Path) -> None:
    project = "chatrecord-test"
    env = {"CHATRECORD_DB": str(tmp_path / "store.sqlite"), "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}"}
    run = runner(tmp_path, **env)
    planted = tmp_path / "planted.jsonl"
    planted.write_text("\n".join(planted_lines()) + "\n", encoding="utf-8")
    assert all(run("ingest", path).returncode == 0 for path in (DEMO, planted, BEHALTEN_TOUR))
    conversations = ["conv-demo-seo", PLANTED_CONVERSATION, BEHALTEN]

    pushed = run("traces", "push", *conversations, "--endpoint", phoenix, "--with-texts")
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.splitlines() == [
        f"conv-demo-seo: 43 spans in 2 traces sent to {phoenix}",
        f"{PLANTED_CONVERSATION}: 44 spans in 2 traces sent to {phoenix}",
        f"{BEHALTEN}: 20 spans in 2 traces sent to {phoenix}",
    ]
    first = spans_in(phoenix, project, 107)
    again = run("traces", "push", *conversations, "--endpoint", phoenix, "--with-texts")
    assert again.returncode == 0, again.stderr
    time.sleep(2)  # what a duplicate would need to land; the count below must not grow
    spans = spans_in(phoenix, project, 107)

    ids = sorted((s["context"]["trace_id"], s["context"]["span_id"]) for s in first)
    assert len(ids) == 107 and sorted((s["context"]["trace_id"], s["context"]["span_id"]) for s in spans) == ids

    demo = [s for s in spans if s["attributes"]["gen_ai.conversation.id"] == "conv-demo-seo"]
    assert {s["attributes"]["session.id"] for s in demo} == {"conv-demo-seo"}
    roots = sorted((s for s in demo if s["parent_id"] is None), key=lambda s: s["start_time"])
    assert [(r["name"], r["span_kind"]) for r in roots] == [("turn 1 (completed)", "CHAIN"), ("turn 3 (no_answer)", "CHAIN")]
    assert roots[0]["attributes"]["input.value"] == "SEO optimieren"
    assert roots[0]["attributes"]["output.value"] == "Fertig: alle sechs Punkte sind erledigt."
    assert len({s["context"]["trace_id"] for s in demo}) == 2
    kinds = Counter((s["span_kind"], s["name"].split(" (")[0]) for s in demo if s["parent_id"] is not None)
    assert kinds == Counter(
        {
            ("AGENT", "invoke_agent nr-llm"): 8,
            ("LLM", "chat unknown"): 10,
            ("TOOL", "execute_tool chat_set_progress"): 8,
            ("TOOL", "execute_tool update_page_metadata"): 5,
            ("TOOL", "execute_tool get_page"): 1,
            ("TOOL", "execute_tool ask_choice"): 1,
            ("TOOL", "execute_tool set_page_social_image"): 1,
            ("CHAIN", "card approved"): 6,
            ("CHAIN", "question answered"): 1,
        }
    )

    chats = [s for s in demo if s["span_kind"] == "LLM"]
    assert sum(s["attributes"]["llm.token_count.prompt"] for s in chats) == 10 * 1800  # as the demo's lines say
    assert sum(s["attributes"]["llm.token_count.completion"] for s in chats) == 10 * 120
    assert sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in chats) == 10 * 1800
    assert round(sum(s["attributes"]["llm.cost.total"] for s in chats), 6) == 0.041
    tool_ids = [s["attributes"].get("gen_ai.tool.call.id") for s in demo if s["span_kind"] == "TOOL"]
    assert len(tool_ids) == 16 and len(set(tool_ids) - {None}) == 15

    marked = sorted(
        (s["name"], s["attributes"]["chatrecord.tool.refused"], s["attributes"].get("error.type"), s["status_code"])
        for s in spans
        if s["attributes"].get("chatrecord.tool.reading") not in (None, "ran")
    )
    assert marked == [
        ("execute_tool get_page (failed)", False, "tool_error", "ERROR"),
        ("execute_tool update_page_metadata (declined)", True, None, "UNSET"),
        ("execute_tool update_page_metadata (declined)", True, None, "UNSET"),
        ("execute_tool update_page_metadata (declined)", True, None, "UNSET"),
        ("execute_tool update_page_metadata (held)", True, None, "UNSET"),
    ]
    assert PLANTED not in repr(spans)

    sessions = {s["session_id"]: s for s in get(f"{phoenix}/v1/projects/{project}/sessions")["data"]}
    assert sorted(sessions) == sorted(conversations)
    assert [t["trace_id"] for t in sessions["conv-demo-seo"]["traces"]] == [r["context"]["trace_id"] for r in roots]
    assert {name: len(s["traces"]) for name, s in sessions.items()} == dict.fromkeys(conversations, 2)
