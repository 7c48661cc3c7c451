"""Fuzz (issue 8): mutated lines of every type through the API and the CLI. Only the documented
error family (`ChatrecordError`) comes out, a refused line stores nothing, and every stored
conversation is still readable afterwards. Bounded for CI (200 examples); the longer run and its
figures: `scripts/fuzz_input.py`, docs/reliability.md."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from fuzz_lines import TEMPLATES, FuzzRun, mutated_lines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.conftest import cli_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("CHATRECORD_FUZZ_EXAMPLES", "200"))


@cache
def shared_run() -> FuzzRun:
    import tempfile

    return FuzzRun(Path(tempfile.mkdtemp(prefix="chatrecord-fuzz-")) / "fuzz.sqlite")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_lines())
def test_a_mutated_line_is_stored_or_refused_with_a_chatrecord_error_and_nothing_breaks(line: Any) -> None:
    shared_run().feed(line)


def test_the_cli_ingests_a_file_of_bad_lines_with_skip_bad_and_exits_cleanly(tmp_path: Path) -> None:
    lines = [
        b'{"type": "conversation_started", "conversation": "f", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 1}',
        orjson.dumps(
            {"type": "user_message", "conversation": "f", "at": "2026-10-28T09:00:01Z", "message": 2**63, "text": "x", "page": 0}
        ),
        b'{"type": "user_message", "conversation": "f", "at": "9999-12-31T23:59:59-01:00", "message": 1, "text": "x", "page": 0}',
        b'{"type": "segment_returned", "conversation": "f", "at": "2026-10-28T09:00:02Z", "segment": "s", "run": "r",'
        b' "trigger": "turn", "outcome": "completed", "steps": [{"kind": "llm", "round": 1, "durationMs": 1e300}]}',
        b"\xff\xfe not utf-8",
        b'{"type": "user_message", "conversation": "f", "at": "2026-10-28T09:00:03Z", "message": 1, "text": "ok", "page": 0}',
    ]
    (tmp_path / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    env = cli_env(CHATRECORD_DB=str(tmp_path / "s.sqlite"))  # no progress line among the rejections
    run = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "ingest", "--skip-bad", "bad.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "bad.jsonl: 2 events appended, 0 lines already recorded, 4 lines rejected\n"
    assert [line.split(",")[0] for line in run.stderr.splitlines()] == [
        "rejected: bad.jsonl: line 2",
        "rejected: bad.jsonl: line 3",
        "rejected: bad.jsonl: line 4",
        "rejected: bad.jsonl: line 5",
    ]
    assert "Traceback" not in run.stderr
    replay = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "replay", "--conversation", "f", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert replay.returncode == 0, replay.stderr


def as_bytes(line: Any) -> bytes:
    if isinstance(line, dict):
        try:
            return orjson.dumps(line)
        except (TypeError, orjson.JSONEncodeError):
            return b"{"
    return line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line


@settings(
    max_examples=1, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.lists(mutated_lines(), min_size=40, max_size=40))
def test_the_cli_ingests_mutated_lines_with_skip_bad_and_every_conversation_stays_readable(lines: list[Any]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        good = b"\n".join(orjson.dumps(line) for line in TEMPLATES)
        (tmp / "mutated.jsonl").write_bytes(good + b"\n" + b"\n".join(as_bytes(line) for line in lines) + b"\n")
        env = cli_env(CHATRECORD_DB=str(tmp / "s.sqlite"))

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "adapters.cli", *args],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=300,
            )

        ingested = cli("ingest", "--skip-bad", "mutated.jsonl")
        assert ingested.returncode == 0 and "Traceback" not in ingested.stderr, ingested.stderr
        for args in (["audit", "conv-demo-seo", "--json"], ["replay", "--conversation", "conv-behalten"]):
            result = cli(*args)
            assert result.returncode == 0, (args, result.stderr)
        assert cli("rebuild").returncode == 0
