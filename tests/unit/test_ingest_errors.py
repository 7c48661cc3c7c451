"""Bad input lines: one-line errors naming file, line, field path and expectation; nothing of a
bad line is stored, and the lines before it are read first (docs/input-format.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.ingest import parse_line, read_file, read_lines
from adapters.service.line_commands import fold_events, read_events
from domain.errors import InvalidInput, NoCardWaiting
from domain.events import (
    ConversationStarted,
    SegmentReturned,
    SkillLoaded,
    UserMessagePosted,
)

DATA = Path(__file__).resolve().parents[1] / "data"
AT = "2026-10-28T09:00:00Z"


def jl(**fields: Any) -> str:
    return orjson.dumps({"conversation": "c", "at": AT, **fields}).decode()


def segment(**more: Any) -> str:
    fields = {
        "type": "segment_returned",
        "segment": "r/1",
        "run": "r",
        "trigger": "turn",
        "outcome": "completed",
        "answer": None,
        "steps": [],
        **more,
    }
    return jl(**fields)


def write(table: Any = "pages", uid: Any = 42) -> dict:
    return {
        "kind": "tool_write",
        "round": 1,
        "durationMs": 0.0,
        "toolName": "t",
        "writeTargetTable": table,
        "writeTargetUid": uid,
    }


LLM = {"kind": "llm", "round": 1, "durationMs": 1.0, "content": "geheim"}

BAD_LINES = {
    "a table name with a space": (
        segment(steps=[LLM, LLM, LLM, write(table="tt content")]),
        'demo.jsonl: line 12, steps[3].writeTargetTable: "tt content" is not a table name; use 1–64 of A-Za-z0-9_',
    ),
    "a table name of 65 characters": (
        segment(steps=[write(table="t" * 65)]),
        f'demo.jsonl: line 12, steps[0].writeTargetTable: "{"t" * 39}… is not a table name; use 1–64 of A-Za-z0-9_',
    ),
    "a write step with uid 0": (
        segment(steps=[write(uid=0)]),
        "demo.jsonl: line 12, steps[0].writeTargetUid: 0 is not a uid; use a whole number >= 1",
    ),
    "a write step that names no record": (
        segment(steps=[{"kind": "tool_write", "round": 1, "durationMs": 0.0, "toolName": "t", "writeCompleteness": "complete"}]),
        "demo.jsonl: line 12, steps[0]: a tool_write step names the record it wrote (writeTargetTable and "
        "writeTargetUid); nr-llm adds one only when the tool result names a target",
    ),
    "a waiting call with uid 0": (
        segment(pending=[{"toolName": "t", "table": "pages", "uid": 0}]),
        "demo.jsonl: line 12, pending[0].uid: 0 is not a uid; use a whole number >= 1",
    ),
    "a waiting call with a bad table": (
        segment(pending=[{"toolName": "t", "table": "pages;drop", "uid": 3}]),
        'demo.jsonl: line 12, pending[0].table: "pages;drop" is not a table name; use 1–64 of A-Za-z0-9_',
    ),
    "a write table without uid": (
        segment(steps=[{**write(), "writeTargetUid": None}]),
        'demo.jsonl: line 12, steps[0].writeTargetUid: is missing; writeTargetTable "pages" needs a writeTargetUid beside it',
    ),
    "a uid given as a string": (
        segment(steps=[write(uid="42")]),
        "demo.jsonl: line 12, steps[0].writeTargetUid: expected a whole number, got a string",
    ),
    "a message number given as a string": (
        jl(type="user_message", message="1", text="x", page=0),
        "demo.jsonl: line 12, message: expected a whole number, got a string",
    ),
    "an error flag given as 1": (
        segment(steps=[{"kind": "tool", "round": 1, "durationMs": 1.0, "toolIsError": 1}]),
        "demo.jsonl: line 12, steps[0].toolIsError: expected true or false, got the number 1",
    ),
    "steps given as an object": (
        segment(steps={"kind": "tool"}),
        "demo.jsonl: line 12, steps: expected a list, got an object",
    ),
    "a step without its round": (
        segment(steps=[{"kind": "tool", "durationMs": 1.0}]),
        "demo.jsonl: line 12, steps[0].round: is missing; every entry of steps needs it",
    ),
    "invalid JSON": (
        '{"type": "tour_ended", "conversation": "c", "at": ',
        "demo.jsonl: line 12, (line): not valid JSON (unexpected end of data at column 51); each line is one JSON object",
    ),
    "a JSON list instead of an object": (
        "[1, 2]",
        "demo.jsonl: line 12, (line): expected a JSON object, got a list",
    ),
    "a missing type": (
        '{"conversation": "c", "at": "2026-10-28T09:00:00Z"}',
        "demo.jsonl: line 12, type: is missing; use one of conversation_started, user_message, segment_returned, "
        "card_decided, question_answered, turn_retried, tour_ended, message_edited, transcript_replaced, legacy_row",
    ),
    "an unknown type": (
        jl(type="segment_started"),
        'demo.jsonl: line 12, type: "segment_started" is not a line type; use one of conversation_started, '
        "user_message, segment_returned, card_decided, question_answered, turn_retried, tour_ended, "
        "message_edited, transcript_replaced, legacy_row",
    ),
    "a missing conversation": (
        '{"type": "tour_ended", "at": "2026-10-28T09:00:00Z"}',
        "demo.jsonl: line 12, conversation: is missing; a tour_ended line needs it",
    ),
    "a missing segment": (
        jl(type="card_decided", approved=True, answer="Übernehmen"),
        "demo.jsonl: line 12, segment: is missing; a card_decided line needs it",
    ),
    "a time that is not ISO-8601": (
        jl(type="tour_ended", at="gestern"),
        'demo.jsonl: line 12, at: "gestern" is not a time; use ISO-8601 UTC like 2026-10-28T09:00:00Z',
    ),
    "an unknown card answer": (
        jl(type="card_decided", segment="r/1", approved=False, answer="Vielleicht"),
        'demo.jsonl: line 12, answer: "Vielleicht" is not a card answer; use one of Übernehmen, Behalten, '
        "Überspringen, Andere Variante, abgelehnt",
    ),
    "an approval with a declining answer": (
        jl(type="card_decided", segment="r/1", approved=True, answer="Behalten"),
        'demo.jsonl: line 12, answer: "Behalten" does not go with approved true; approved is true exactly for Übernehmen',
    ),
    "an unknown trigger": (
        segment(trigger="cron"),
        "demo.jsonl: line 12, trigger: \"cron\" is not allowed; use 'turn', 'approval', 'answer' or 'retry'",
    ),
    "a tool name with no identifier character": (
        segment(steps=[{"kind": "tool", "round": 1, "durationMs": 1.0, "toolName": " ()\n"}]),
        'demo.jsonl: line 12, steps[0].toolName: " ()\\n" is not a tool name; it needs at least one of '
        "A-Za-z0-9_.:- (other characters are left out, and a tool name longer than 128 is shortened)",
    ),
    "a legacy create with a uid": (
        jl(
            type="legacy_row", messages=[], card_outcomes=[{"outcome": "applied", "after": 1, "tool": "t", "table": "", "uid": 5}]
        ),
        "demo.jsonl: line 12, card_outcomes[0].uid: needs a table beside it; a create has table '' and uid 0",
    ),
}


@pytest.mark.parametrize(("line", "message"), BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_bad_line_names_file_line_field_and_expectation(line: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_line(line, 12, "demo.jsonl")

    assert str(caught.value) == message
    assert (caught.value.source, caught.value.line) == ("demo.jsonl", 12)
    assert "validation error" not in message and "pydantic" not in message and "\n" not in message


def test_an_error_repeats_no_private_text() -> None:
    line = segment(steps=[{"kind": "tool", "round": "eins", "durationMs": 1.0, "toolResult": "geheim"}], answer=["geheim"])
    with pytest.raises(InvalidInput) as caught:
        parse_line(line, 3, "demo.jsonl")

    assert "geheim" not in str(caught.value)
    assert str(caught.value) == "demo.jsonl: line 3, answer: expected a string, got a list"


def test_a_bad_line_mid_file_stops_reading_after_the_lines_before_it() -> None:
    lines = read_file(DATA / "bad_table_mid_file.jsonl")
    read = []
    with pytest.raises(InvalidInput) as caught:
        for line in lines:
            read.append(line)

    assert [line.line for line in read] == [1, 2, 3]
    assert (caught.value.line, caught.value.field) == (4, "steps[3].writeTargetTable")
    assert str(caught.value).startswith('bad_table_mid_file.jsonl: line 4, steps[3].writeTargetTable: "tt content"')
    assert "geheim" not in str(caught.value)


def test_the_events_of_the_lines_before_a_bad_line_are_yielded_first() -> None:
    stored = []
    with pytest.raises(InvalidInput) as caught:
        for event in fold_events(read_file(DATA / "bad_table_mid_file.jsonl")):
            stored.append(event)

    assert [type(e) for e in stored] == [ConversationStarted, SkillLoaded, UserMessagePosted, SegmentReturned]
    assert caught.value.line == 4


def test_read_events_raises_at_invalid_json_mid_file() -> None:
    with pytest.raises(InvalidInput) as caught:
        read_events(DATA / "bad_json_mid_file.jsonl")

    assert str(caught.value).startswith("bad_json_mid_file.jsonl: line 6, (line): not valid JSON")


def test_a_generator_of_lines_yields_each_good_line_before_the_bad_one() -> None:
    def chat() -> Iterator[str]:
        yield jl(type="conversation_started", kind="chat", owner=7)
        yield jl(type="user_message", message=1, text="Hallo", page=0)
        yield segment(steps=[write(uid=0)])
        raise AssertionError("read past the bad line")

    lines = read_lines(chat(), "stream")
    assert next(lines).line == 1
    assert next(lines).line == 2
    with pytest.raises(InvalidInput, match=r"^stream: line 3, steps\[0\]\.writeTargetUid: 0 is not a uid"):
        next(lines)


def test_a_domain_refusal_names_the_line_and_the_field_that_caused_it() -> None:
    lines = [
        jl(type="conversation_started", kind="chat", owner=7),
        jl(type="user_message", message=1, text="Hallo", page=0),
        jl(type="card_decided", segment="r/9", approved=True, answer="Übernehmen"),
    ]
    with pytest.raises(
        NoCardWaiting,
        match=r"^t\.jsonl: line 3, segment: segment r/9 is unknown: this conversation recorded no segment of that id yet; "
        r"the card's decision waits for it \(nothing of it was stored; deliver it again after the segment\)$",
    ):
        list(fold_events(read_lines(lines, "t.jsonl")))


def test_bytes_that_are_not_utf8_are_a_bad_line() -> None:
    with pytest.raises(InvalidInput, match=r"^b\.jsonl: line 2, \(line\): not UTF-8 text"):
        list(read_lines([jl(type="tour_ended").encode(), b'{"type": "\xff"}'], "b.jsonl"))


USER = '{"type":"user_message","conversation":"c","at":"2026-10-28T09:00:00Z","message":1,"text":"x","page":0'


@pytest.mark.parametrize(
    "raw, error",
    [
        (USER + ',"message":2}', "demo.jsonl: line 3, message: field message appears twice; give each key of an object once"),
        (
            USER.replace('"type":"user_message",', '"type":"user_message","type":"tour_ended",') + "}",
            "demo.jsonl: line 3, type: field type appears twice; give each key of an object once",
        ),
        (USER + ' , "page" : 0}', "demo.jsonl: line 3, page: field page appears twice; give each key of an object once"),
        (
            segment(steps=[LLM]).replace('"round":1', '"round":1,"round":2'),
            "demo.jsonl: line 3, steps[0].round: field round appears twice; give each key of an object once",
        ),
        (
            USER + ',"future":{"a\\nb":1,"a\\nb":2}}',
            "demo.jsonl: line 3, (a dropped key): holds a key twice; give each key of an object once",
        ),
    ],
)
def test_a_key_that_appears_twice_refuses_the_line_naming_it(raw: str, error: str) -> None:
    for text in (raw, raw.encode()):
        with pytest.raises(InvalidInput) as refused:
            parse_line(text, 3, "demo.jsonl")
        assert str(refused.value) == error


@pytest.mark.parametrize(
    "text",
    [
        "10:00: a: b",
        'x\\": \\"y\\": z',
        "\\u003a",
        "a\\u003Ab",
        "\\\\u003a",
        '\\" : \\"',
        "ü\\u00fc:",
    ],
)
def test_colons_and_escapes_in_texts_are_no_duplicate(text: str) -> None:
    raw = USER.replace('"text":"x"', f'"text":"{text}"') + ',"more":{"k:1":"v:2","k:2":["\\u003a:"]}}'
    assert parse_line(raw, 1, "x").text == orjson.loads(raw)["text"]  # type: ignore[union-attr]
    assert parse_line(raw.encode(), 1, "x").text == orjson.loads(raw)["text"]  # type: ignore[union-attr]
