"""One conversation's bad data never stops another's: a rebuild whose fold of one conversation
raises (here an OverflowError, as a usage sum past 64 bits raised before the row fold read it as
unknown) names that conversation with its error, rebuilds every other one, and `chatrecord
rebuild` exits 1 at the end. On every backend; the command line on SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

import projections.row_fold
from adapters.cli import app
from tests.application import test_conversations
from tests.application.test_conversations import Opener, line

stores = test_conversations.stores
"""The fixture: a new, empty store of each backend (memory, SQLite, PostgreSQL) per call."""


def _conversation(conversation: str) -> list[bytes]:
    lines = [
        line("conversation_started", conversation, "2026-11-02T10:00:00Z", kind="chat", owner=7),
        line("user_message", conversation, "2026-11-02T10:01:00Z", message=1, text="x", page=1),
        line(
            "segment_returned",
            conversation,
            "2026-11-02T10:01:30Z",
            segment="r1/1",
            run="r1",
            trigger="turn",
            outcome="completed",
            answer="a",
            steps=[{"kind": "llm", "round": 1, "durationMs": 1.0, "promptTokens": 3}],
        ),
    ]
    return [orjson.dumps(d) for d in lines]


def _failing_for(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    """Makes the row fold raise on `bad`'s segment, as it did on a usage sum past 64 bits."""
    usage_row = projections.row_fold.usage_row

    def failing(event: Any, reading: Any, at: int, conversation: str, owner: int | None) -> Any:
        if conversation == bad:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        return usage_row(event, reading, at, conversation, owner)

    monkeypatch.setattr(projections.row_fold, "usage_row", failing)


def test_a_rebuild_names_the_conversation_whose_fold_failed_and_rebuilds_the_others(
    stores: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = stores()
    for name in ("a", "bad", "c"):
        chat.ingest(_conversation(name), f"{name}.jsonl")
    _failing_for(monkeypatch, "bad")

    report = chat.rebuild("2026-11-01")
    usage = [(g.key, g.input_tokens) for g in chat.usage().groups]

    assert [chat.conversation_id(key) for key in report.unreadable] == ["bad"]
    assert report.reasons == ("OverflowError: Python int too large to convert to SQLite INTEGER",)
    assert (report.rules, report.conversations) == ("2026-11-01", 3)
    assert usage == [("a", 3), ("c", 3)]  # bad's rows stop before its segment

    monkeypatch.undo()
    again = chat.rebuild("2026-11-02")
    assert (again.unreadable, again.reasons) == ((), ())
    assert [(g.key, g.input_tokens) for g in chat.usage().groups] == [("a", 3), ("bad", 3), ("c", 3)]


def test_chatrecord_rebuild_reports_each_failed_conversation_with_its_error_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATRECORD_DB", str(tmp_path / "s.sqlite"))
    monkeypatch.delenv("CHATRECORD_DATABASE_URL", raising=False)
    runner = CliRunner()
    for name in ("a", "bad"):
        source = tmp_path / f"{name}.jsonl"
        source.write_bytes(b"\n".join(_conversation(name)) + b"\n")
        assert runner.invoke(app, ["ingest", str(source)]).exit_code == 0
    _failing_for(monkeypatch, "bad")

    text = runner.invoke(app, ["rebuild", "--rules", "2026-11-01"])
    as_json = runner.invoke(app, ["rebuild", "--json"])

    assert text.exit_code == 1
    assert text.stdout.startswith("rebuilt under 2026-11-01 (was 2026-11-02): 2 conversations, 6 events")
    assert text.stderr.splitlines()[-1] == "bad: OverflowError: Python int too large to convert to SQLite INTEGER"
    assert "could not be read to the end" in text.stderr and "every other conversation was rebuilt" in text.stderr
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert report["errors"] == [
        {"conversation": "bad", "error": "OverflowError: Python int too large to convert to SQLite INTEGER"}
    ]
    assert (report["conversations"], report["events"], len(report["unreadable"])) == (2, 6, 1)
