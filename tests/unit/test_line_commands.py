"""The line → command dispatch of the service layer (`adapters.service.line_commands`): every line
type the input format reads has its domain command, and a line's `follows` is checked there."""

from __future__ import annotations

import orjson
import pytest

from adapters.ingest import LINE_TYPES, parse_line
from adapters.service.line_commands import COMMANDS, decide
from domain.conversation import MemoryHistory, project_conversation
from domain.errors import LineOutOfOrder


def line(n: int, **fields: object) -> bytes:
    return orjson.dumps({"conversation": "c", "at": f"2026-11-02T10:00:0{n}Z", **fields})


STARTED = line(0, type="conversation_started", kind="chat", owner=7)
MESSAGE = line(1, type="user_message", message=1, text="hallo", page=42)


def test_every_line_type_has_its_command_and_no_other() -> None:
    assert list(COMMANDS) == list(LINE_TYPES)


def test_a_line_is_decided_at_the_version_it_follows_and_refused_elsewhere() -> None:
    history = MemoryHistory()
    started = decide(parse_line(STARTED, 1, "t"), None, history)
    history.record(None, started)
    state = project_conversation(None, started)
    early = parse_line(MESSAGE[:-1] + b',"follows":2}', 2, "t")
    on_time = parse_line(MESSAGE[:-1] + b',"follows":1}', 2, "t")

    with pytest.raises(LineOutOfOrder, match="waits for the lines before it") as refused:
        decide(early, state, history)
    assert (refused.value.follows, refused.value.actual) == (2, 1)
    assert [type(e).__name__ for e in decide(on_time, state, history)] == ["UserMessagePosted"]
