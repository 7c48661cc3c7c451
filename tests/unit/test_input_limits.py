"""Size limits (issue 8, item 7): a line, a segment's steps and a text have documented limits
(`domain.limits`, README "Input limits"), refused with line and field; below them the work on
a line and on its rendering is linear (figures: docs/reliability.md)."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest
from rich.console import Console
from rich.text import Text

from adapters.cli.render import CHUNK, text_block
from adapters.ingest import bounded_lines, read_lines
from domain.errors import InvalidInput
from domain.limits import (
    COST_MAX,
    LINE_BYTES_MAX,
    LIST_MAX,
    SEGMENT_COST_MAX,
    SEGMENT_DURATION_MS_MAX,
    SEGMENT_TOKENS_MAX,
    STEPS_MAX,
    STORED_INT_MAX,
    TEXT_MAX,
)

AT = "2026-10-28T09:00:00Z"
STEP = {"kind": "llm", "round": 1, "durationMs": 1.0}


def jl(**fields: Any) -> bytes:
    return orjson.dumps({"conversation": "c", "at": AT, **fields}) + b"\n"


def refusal(raw: bytes) -> str:
    with pytest.raises(InvalidInput) as refused:
        list(read_lines([raw], "big.jsonl"))
    return str(refused.value)


def test_the_limits_are_the_documented_ones() -> None:
    assert (LINE_BYTES_MAX, STEPS_MAX, TEXT_MAX, LIST_MAX) == (8 * 1024 * 1024, 50_000, 1_000_000, 20_000)
    assert (COST_MAX, SEGMENT_COST_MAX, SEGMENT_TOKENS_MAX, SEGMENT_DURATION_MS_MAX) == (1e6, 1e6, 10**12, 1e10)


def test_a_usage_row_at_the_segment_limits_leaves_room_for_the_audits_sums() -> None:
    """At each bound a usage row's count (cost in billionths, time in microseconds) fits 64 bits
    9,000 times over or more: the audit sums that many segments at the bound in one BIGINT."""
    assert STORED_INT_MAX // round(SEGMENT_COST_MAX * 10**9) == 9_223
    assert STORED_INT_MAX // SEGMENT_TOKENS_MAX == 9_223_372
    assert STORED_INT_MAX // round(SEGMENT_DURATION_MS_MAX * 1000) == 922_337


def test_a_line_longer_than_8_mib_is_refused_before_it_is_parsed() -> None:
    raw = b'{"type": "user_message", "text": "' + b"x" * LINE_BYTES_MAX + b'"}'
    assert refusal(raw) == (
        'big.jsonl: line 1, (line): is longer than 8,388,608 bytes, the most a line may be (README, "Input limits")'
    )


def test_a_text_of_more_than_a_million_characters_is_refused_at_its_field() -> None:
    raw = jl(type="user_message", message=1, text="x" * (TEXT_MAX + 1), page=0)
    assert refusal(raw) == 'big.jsonl: line 1, text: is 1,000,001 characters long; the most is 1,000,000 (README, "Input limits")'


def test_a_segment_of_more_than_50000_steps_is_refused_at_its_field() -> None:
    raw = jl(type="segment_returned", segment="r/1", run="r", trigger="turn", outcome="completed", steps=[STEP] * (STEPS_MAX + 1))
    assert refusal(raw) == 'big.jsonl: line 1, steps: has 50,001 entries; the most is 50,000 (README, "Input limits")'


def test_a_line_at_the_limits_is_read() -> None:
    raw = jl(
        type="segment_returned",
        segment="r/1",
        run="r",
        trigger="turn",
        outcome="completed",
        answer="x" * TEXT_MAX,
        steps=[STEP] * STEPS_MAX,
    )
    [line] = read_lines([raw], "big.jsonl")
    assert (len(line.steps), len(line.answer)) == (STEPS_MAX, TEXT_MAX)  # type: ignore[union-attr]


def test_an_overlong_line_costs_at_most_the_limit_and_the_next_line_keeps_its_number() -> None:
    stream = io.BytesIO(b"x" * (3 * LINE_BYTES_MAX) + b"\n" + jl(type="tour_ended"))
    raws = list(bounded_lines(stream))
    assert [len(raw) for raw in raws] == [LINE_BYTES_MAX + 1, len(jl(type="tour_ended"))]
    with pytest.raises(InvalidInput, match=r"^big\.jsonl: line 1, \(line\): is longer than"):
        list(read_lines(raws, "big.jsonl"))
    assert [line.line for line in read_lines(raws[1:], "big.jsonl")] == [1]


def rendered(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=60, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_long_text_made_of_lines_renders_as_one_text_would() -> None:
    text = "\n".join(f"Zeile {n}" for n in range(3 * CHUNK // 8))
    assert len(text) > 2 * CHUNK
    assert rendered(text_block(text)) == rendered(Text(text))


def test_a_short_text_is_one_text_and_a_long_paragraph_keeps_every_word() -> None:
    assert isinstance(text_block("kurz"), Text)
    words = [f"w{n}" for n in range(3 * CHUNK // 4)]
    shown = rendered(text_block(" ".join(words)))
    assert shown.split() == words


def test_a_line_nested_deeper_than_64_levels_is_refused_at_its_field() -> None:
    # issue 20, item 3: 255 levels made the JSON encoder raise TypeError ("Recursion limit reached")
    deep = b'{"x": ' * 254 + b"1" + b"}" * 254  # orjson reads it, but cannot write it back
    raw = jl(type="user_message", message=1, text="x", page=0, extra="@").replace(b'"@"', deep)
    assert refusal(raw) == (
        'big.jsonl: line 1, (a dropped key): is nested more than 64 levels deep, the most a line may be (README, "Input limits")'
    )
    lists = (
        b'{"type": "user_message", "conversation": "c", "at": "' + AT.encode() + b'", "steps": ' + b"[" * 70 + b"]" * 70 + b"}"
    )
    assert refusal(lists) == (
        'big.jsonl: line 1, steps: is nested more than 64 levels deep, the most a line may be (README, "Input limits")'
    )


@pytest.mark.parametrize("levels", [600, 100_000])
def test_a_line_too_deep_for_the_json_reader_is_refused_as_one_nested_past_64_levels(levels: int) -> None:
    """Found by a fresh user: 600 levels said "nested more than 64 levels", 100,000 said "not valid JSON (depth
    limit exceeded at column 1134)" (orjson reads no more than 1,024 levels)."""
    nested = b"[" * levels + b"]" * levels
    unknown = jl(type="user_message", message=1, text="x", page=0, zz="@").replace(b'"@"', nested)
    steps = b'{"steps": ' + nested + b', "type": "segment_returned", "conversation": "c"}'  # its type after
    arguments = (
        b'{"type": "segment_returned", "steps": [{"kind": "tool_call", "toolArguments": {"a\\"b": '
        + b'{"k": ' * levels
        + b"1"
        + b"}" * levels
        + b"}}]}"
    )
    said = 'is nested more than 64 levels deep, the most a line may be (README, "Input limits")'

    assert refusal(unknown) == f"big.jsonl: line 1, (a dropped key): {said}"
    assert refusal(unknown.decode()) == f"big.jsonl: line 1, (a dropped key): {said}"  # type: ignore[arg-type]
    assert refusal(steps) == f"big.jsonl: line 1, steps[0].(a dropped key): {said}"
    assert refusal(arguments) == f"big.jsonl: line 1, steps[0].toolArguments: {said}"


def test_a_line_64_levels_deep_is_read() -> None:
    nested: Any = 1
    for _ in range(63):  # the line's object is level 1, the innermost dict level 64
        nested = {"x": nested}
    [line] = read_lines([jl(type="user_message", message=1, text="x", page=0, extra=nested)], "big.jsonl")
    assert line.text == "x"  # type: ignore[union-attr]  # the unknown field is dropped, as any is
