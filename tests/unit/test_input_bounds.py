"""Every number and time a line carries is bounded at the edge (issue 8, item 1): a value no
store or view can hold is refused with line and field, never a TypeError or OverflowError."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.ingest import parse_line
from domain.errors import InvalidInput, MessageTooEarly

AT = "2026-10-28T09:00:00Z"
STEP = {"kind": "llm", "round": 1, "durationMs": 1.5}


def line(**fields: Any) -> dict[str, Any]:
    return {"conversation": "c", "at": AT, **fields}


def message(**more: Any) -> dict[str, Any]:
    return line(type="user_message", message=1, text="x", page=0, **more)


def segment(**more: Any) -> dict[str, Any]:
    return line(type="segment_returned", segment="r/1", run="r", trigger="turn", outcome="completed", **more)


REFUSED = {
    "a message number of 2^63": (
        {**message(), "message": 2**63},
        "api: line 1, message: expected a whole number <= 2147483647, got the number 9223372036854775808",
    ),
    "a message number of 2^31 (PostgreSQL's integer ends one below)": (
        {**message(), "message": 2**31},
        "api: line 1, message: expected a whole number <= 2147483647, got the number 2147483648",
    ),
    "a page beyond 64 bits": (
        {**message(), "page": 2**70},
        "api: line 1, page: expected a whole number, got a number of more than 64 bits (about 1e+21)",
    ),
    "a round beyond 64 bits": (
        segment(steps=[{**STEP, "round": 2**70}]),
        "api: line 1, steps[0].round: expected a whole number, got a number of more than 64 bits (about 1e+21)",
    ),
    "a huge durationMs": (
        segment(steps=[{**STEP, "durationMs": 1e300}]),
        "api: line 1, steps[0].durationMs: expected a number <= 1e+10, got the number 1e+300",
    ),
    "a negative durationMs": (
        segment(steps=[{**STEP, "durationMs": -1.0}]),
        "api: line 1, steps[0].durationMs: expected a number >= 0, got the number -1.0",
    ),
    "a negative whole durationMs": (  # a fraction is allowed: not "a whole number" (a fresh user's -5)
        segment(steps=[{**STEP, "durationMs": -5}]),
        "api: line 1, steps[0].durationMs: expected a number >= 0, got the number -5",
    ),
    "a write uid of 2^31": (
        segment(steps=[{**STEP, "kind": "tool_write", "toolName": "t", "writeTargetTable": "pages", "writeTargetUid": 2**31}]),
        "api: line 1, steps[0].writeTargetUid: 2147483648 is not a uid; use a whole number <= 2147483647, "
        "the largest a store keeps",
    ),
    "a waiting call's uid of 2^40": (
        segment(pending=[{"toolName": "t", "table": "pages", "uid": 2**40}]),
        "api: line 1, pending[0].uid: 1099511627776 is not a uid; use a whole number <= 2147483647, the largest a store keeps",
    ),
    "an owner of 2^31": (
        line(type="conversation_started", kind="chat", owner=2**31),
        "api: line 1, owner: expected a whole number <= 2147483647, got the number 2147483648",
    ),
    "a legacy card outcome after 2^31": (
        line(type="legacy_row", messages=[], card_outcomes=[{"outcome": "applied", "after": 2**31, "tool": "t"}]),
        "api: line 1, card_outcomes[0].after: expected a whole number <= 2147483647, got the number 2147483648",
    ),
    "a time that leaves year 9999 when made UTC": (
        {**message(), "at": "9999-12-31T23:59:59-01:00"},
        'api: line 1, at: "9999-12-31T23:59:59-01:00" is outside years 2000–9998 (UTC); '
        "use ISO-8601 UTC like 2026-10-28T09:00:00Z",
    ),
    "a time before year 1 when made UTC": (
        {**message(), "at": "0001-01-01T00:00:00+01:00"},
        'api: line 1, at: "0001-01-01T00:00:00+01:00" is outside years 2000–9998 (UTC); '
        "use ISO-8601 UTC like 2026-10-28T09:00:00Z",
    ),
    "a page of NaN (JSON would write it as null)": (
        {**message(), "page": float("nan")},
        "api: line 1, page: expected a whole number, got the number NaN",
    ),
    "an infinite durationMs": (
        segment(steps=[{**STEP, "durationMs": float("inf")}]),
        "api: line 1, steps[0].durationMs: expected a finite number, got the number Infinity",
    ),
    "a date without a time of day": (
        {**message(), "at": "2026-11-02"},
        'api: line 1, at: "2026-11-02" is a date without a time of day; expected ISO-8601 date and time in UTC '
        "like 2026-10-28T09:00:00Z",
    ),
    "a date with an offset but no time of day (Python reads it as 01:00)": (
        {**message(), "at": "2026-11-02+01:00"},
        'api: line 1, at: "2026-11-02+01:00" is a date without a time of day; expected ISO-8601 date and time in UTC '
        "like 2026-10-28T09:00:00Z",
    ),
    "a week date": (
        {**message(), "at": "2026-W44-1"},
        'api: line 1, at: "2026-W44-1" is a date without a time of day; expected ISO-8601 date and time in UTC '
        "like 2026-10-28T09:00:00Z",
    ),
    "a message number of NaN": (
        {**message(), "message": float("nan")},
        "api: line 1, message: expected a whole number, got the number NaN",
    ),
    "a text of infinity": (
        {**message(), "text": float("-inf")},
        "api: line 1, text: expected a string, got the number -Infinity",
    ),
    "a NaN under a key no line type reads": (
        {**message(), "future": [float("nan")]},
        "api: line 1, (a dropped key): expected a finite number, got nan",
    ),
    "a text with a lone surrogate": (
        {**message(), "text": "a\ud800b"},
        "api: line 1, text: expected text, got a lone surrogate at character 2",
    ),
    "a time in year 9999": (
        {**message(), "at": "9999-06-01T00:00:00Z"},
        'api: line 1, at: "9999-06-01T00:00:00Z" is outside years 2000–9998 (UTC); use ISO-8601 UTC like 2026-10-28T09:00:00Z',
    ),
}


@pytest.mark.parametrize("data, expected", REFUSED.values(), ids=REFUSED.keys())
def test_a_value_no_store_holds_is_refused_with_line_and_field(data: dict[str, Any], expected: str) -> None:
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.record(line(type="conversation_started", kind="chat", owner=7))
    with pytest.raises(InvalidInput) as refused:
        chatrecord.record(data)
    assert str(refused.value) == expected.replace("api: line 1", "api: line 2")
    assert len(chatrecord.store.events("c")) == 1


def test_the_largest_numbers_and_times_are_stored_and_read_back() -> None:
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.record(line(type="conversation_started", kind="chat", owner=2**31 - 1))
    with pytest.raises(MessageTooEarly) as early:  # the largest number is read; it waits for the one before it
        chatrecord.record({**message(), "message": 2**31 - 1})
    assert early.value.waits_for == "message 2147483646"
    chatrecord.record({**message(), "message": 1, "page": 2**31 - 1, "at": "9998-12-31T23:59:59Z"})
    chatrecord.record(
        segment(
            steps=[
                {
                    **STEP,
                    "round": 2**31 - 1,
                    "durationMs": 1e10,
                    "kind": "tool_write",
                    "toolName": "t",
                    "writeTargetTable": "pages",
                    "writeTargetUid": 2**31 - 1,
                }
            ]
        )
    )
    turn = chatrecord.turn_input("c")
    assert (turn.message, turn.view_context.page_id) == (1, 2**31 - 1)
    assert turn.at.isoformat() == "9998-12-31T23:59:59+00:00"


@pytest.mark.parametrize(
    "at, utc",
    [
        ("2026-11-02T10:00:00Z", "2026-11-02T10:00:00+00:00"),
        ("2026-11-02 10:00:00", "2026-11-02T10:00:00+00:00"),
        ("2026-11-02t11:30+01:00", "2026-11-02T10:30:00+00:00"),
        ("20261102T100000Z", "2026-11-02T10:00:00+00:00"),
    ],
)
def test_a_date_with_a_time_of_day_is_a_time(at: str, utc: str) -> None:
    parsed = parse_line(orjson.dumps({**message(), "at": at}), 1, "t")
    assert parsed.at.isoformat() == utc  # type: ignore[union-attr]


def test_an_offset_time_is_converted_to_utc() -> None:
    parsed = parse_line(orjson.dumps({**message(), "at": "2026-10-28T10:00:00+01:00"}), 1, "t")
    assert parsed.at.isoformat() == "2026-10-28T09:00:00+00:00"  # type: ignore[union-attr]


def test_a_number_of_more_than_64_bits_in_a_text_line_is_named_so() -> None:
    # the JSON reader gives such a number as a float: the message must not read "the number 1e+35"
    text = (
        b'{"type": "conversation_started", "at": "2026-10-28T09:00:00Z", "kind": "chat", "conversation": "c", '
        b'"owner": 100000000000000000000000000000000000}'
    )
    with pytest.raises(InvalidInput) as refused:
        parse_line(text, 3, "huge.jsonl")
    assert str(refused.value) == (
        "huge.jsonl: line 3, owner: expected a whole number, got a number of more than 64 bits (about 1e+35)"
    )


@pytest.mark.parametrize(
    "field, value", [("message", 2**70), ("page", -(2**70)), ("owner", 2**64), ("text", 2**70), ("message", 10**400)]
)
def test_a_number_beyond_64_bits_is_worded_alike_in_a_dict_and_in_json_text(field: str, value: int) -> None:
    import json

    data = line(type="conversation_started", kind="chat", owner=7) if field == "owner" else message()
    data[field] = value
    refusals = []
    for sent in (data, json.dumps(data)):
        chatrecord = Chatrecord(open_store(memory=True))
        with pytest.raises(InvalidInput) as refused:
            chatrecord.record(sent)
        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1]
    assert refusals[0].startswith(f"api: line 1, {field}: ") or refusals[0] == (
        "api: line 1, (line): not valid JSON (a number too large to read at column "
        f"{json.dumps(data).index(str(value)) + 1}; no field takes a number of more than 64 bits); "
        "each line is one JSON object"
    )


def test_a_number_beyond_64_bits_under_a_key_no_line_type_reads_is_ignored_as_in_json_text() -> None:
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.record(line(type="conversation_started", kind="chat", owner=7, future=2**70))
    assert len(chatrecord.store.events("c")) == 1


TEXT_REFUSED = {
    "a line cut short": (b'{"type": "conversation_started",', "not valid JSON (unexpected end of data at column 33)"),
    "two objects on two lines of one body": (
        b'{"a": 1}\n{"b": 2}',
        "not valid JSON (unexpected content after document at line 2 column 1)",
    ),
    "Latin-1 bytes": ('{"text": "Gr\u00fc\u00dfe"}'.encode("latin-1"), "not UTF-8 text (invalid start byte at byte 13)"),
    "a lone surrogate in a text": ('{"text": "a\ud800"}', "not valid text (a lone surrogate at character 12)"),
}


@pytest.mark.parametrize("text, expected", TEXT_REFUSED.values(), ids=TEXT_REFUSED.keys())
def test_a_line_that_is_not_json_text_says_where(text: str | bytes, expected: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_line(text, 4, "t.jsonl")
    assert str(refused.value) == f"t.jsonl: line 4, (line): {expected}; each line is one JSON object"
