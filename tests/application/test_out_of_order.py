"""Lines that arrive out of order (issue 8, item 5): a line that names the conversation version it
`follows` is stored only at that version, or is a repeat; a line that comes too early is refused
with what it waits for and stores nothing, so delivering again in order gives the same store."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from domain.errors import LineOutOfOrder
from tests.line_sources import versions_by_line

DEMO = Path(__file__).parents[1] / "data" / "demo_seo_tour.jsonl"


def demo_with_follows() -> list[dict[str, Any]]:
    """Returns the demo's lines, each with the version of its conversation it follows."""
    chat = Chatrecord(open_store(memory=True))
    lines = []
    version = 0
    for raw in DEMO.read_bytes().splitlines():
        data = {**orjson.loads(raw), "follows": version}
        version = chat.record(data).state.version  # type: ignore[union-attr]
        lines.append(data)
    return lines


def stored(chat: Chatrecord) -> list[tuple[int, str, Any]]:
    return versions_by_line(chat.store.events("conv-demo-seo"))


def test_a_line_that_comes_too_early_is_refused_with_what_it_waits_for_and_stores_nothing() -> None:
    lines = demo_with_follows()
    chat = Chatrecord(open_store(memory=True))
    chat.record(lines[0])
    with pytest.raises(LineOutOfOrder) as refused:
        chat.record(lines[2])
    assert str(refused.value) == (
        "api: line 2, follows: the line follows version 3 of conversation 'conv-demo-seo', which is at version 1; "
        "it waits for the lines before it (nothing of it was stored)"
    )
    assert refused.value.field == "follows"
    assert len(chat.store.events("conv-demo-seo")) == 1


def test_a_line_written_for_an_earlier_state_is_refused_but_a_repeat_is_not() -> None:
    lines = demo_with_follows()
    chat = Chatrecord(open_store(memory=True))
    for data in lines[:3]:
        chat.record(data)
    assert chat.record(lines[1]).repeated  # delivered again: the same line, nothing new
    other = {**lines[1], "message": 9, "text": "anders"}
    with pytest.raises(LineOutOfOrder) as refused:
        chat.record(other)
    assert str(refused.value) == (
        "api: line 5, follows: the line follows version 1 of conversation 'conv-demo-seo', which is at version 4 already; "
        "it was written for an earlier state (nothing of it was stored)"
    )
    assert len(chat.store.events("conv-demo-seo")) == 4


def test_shuffled_and_repeated_delivery_ends_in_the_store_of_the_lines_in_order() -> None:
    lines = demo_with_follows()
    in_order = Chatrecord(open_store(memory=True))
    for data in lines:
        in_order.record(data)

    shuffled = Chatrecord(open_store(memory=True))
    rng = random.Random(8)
    delivery = [data for _ in range(3) for data in lines]
    for start in range(0, len(delivery), 4):  # shuffled within a window of 4
        window = delivery[start : start + 4]
        rng.shuffle(window)
        delivery[start : start + 4] = window
    waiting = list(delivery)
    refused = 0
    while waiting:  # the chat delivers a refused line again later
        again = []
        for data in waiting:
            before = len(shuffled.store.events("conv-demo-seo"))
            try:
                shuffled.record(data)
            except LineOutOfOrder:
                refused += 1
                assert len(shuffled.store.events("conv-demo-seo")) == before
                again.append(data)
        assert len(again) < len(waiting)
        waiting = again

    assert refused > 0
    assert stored(shuffled) == stored(in_order)
    assert shuffled.turn_input("conv-demo-seo").to_json() == in_order.turn_input("conv-demo-seo").to_json()
    for data in lines:  # the original file in order, once more: every line is a repeat
        assert shuffled.record(data).repeated


def test_a_tour_ended_that_comes_before_the_card_it_ends_waits_and_is_not_taken_as_a_repeat() -> None:
    """Before its card waits there is no tour to end, and a `tour_ended` then stores nothing; so
    one that comes early was read as a repeat and lost, and the conversation never reached the
    version its later lines follow. It waits for the version it follows, as every line does."""

    def at(n: int) -> str:
        return f"2026-10-28T09:00:{n:02d}Z"

    lines = [
        {"type": "conversation_started", "conversation": "t", "at": at(1), "kind": "chat", "owner": 7, "follows": 0},
        {"type": "user_message", "conversation": "t", "at": at(2), "message": 1, "text": "SEO", "page": 42, "follows": 1},
        {
            "type": "segment_returned",
            "conversation": "t",
            "at": at(3),
            "segment": "r/1",
            "run": "r",
            "trigger": "turn",
            "outcome": "awaiting_approval",
            "answer": "Titel?",
            "pending": [{"toolName": "update_page_metadata"}],
            "follows": 2,
        },
        {"type": "tour_ended", "conversation": "t", "at": at(4), "follows": 3},
    ]
    chat = Chatrecord(open_store(memory=True))
    chat.record(lines[0])
    chat.record(lines[1])
    with pytest.raises(LineOutOfOrder) as refused:
        chat.record(lines[3])
    assert refused.value.follows == 3 and refused.value.actual == 2
    chat.record(lines[2])
    ended = chat.record(lines[3])
    assert [type(e).__name__ for e in ended.appended] == ["CardLeftUndecided", "TourEnded"]
    assert chat.record(lines[3]).repeated
