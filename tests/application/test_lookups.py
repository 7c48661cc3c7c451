"""Lookups and errors a user trips on (issue 8, item 6): an id is found as the chat names it, and
each refusal says what happened, quoting at most a short excerpt of a rejected value."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.api import Chatrecord
from adapters.store.settings import open_store
from domain.errors import CardAlreadyDecided, InvalidInput, NoCardWaiting

AT = "2026-10-28T09:00:00Z"


@pytest.fixture
def chat() -> Chatrecord:
    return Chatrecord(open_store(memory=True))


def line(line_type: str, conversation: str = "c", **fields: Any) -> dict[str, Any]:
    return {"type": line_type, "conversation": conversation, "at": AT, **fields}


def test_an_id_outside_the_key_characters_is_found_under_the_id_the_chat_uses(chat: Chatrecord) -> None:
    chat.record(line("conversation_started", "chat 17", kind="chat", owner=7))
    chat.record(line("user_message", "chat 17", message=1, text="Hallo", page=0))
    chat.record(line("segment_returned", "chat 17", segment="r/1", run="r", trigger="turn", outcome="completed",
                     answer="Hallo!"))
    assert chat.turn_input("chat 17").message == 1
    assert [a.segment for a in chat.activity("chat 17")] == ["r/1"]


def test_an_id_that_looks_like_a_reduced_one_is_another_conversation(chat: Chatrecord) -> None:
    chat.record(line("conversation_started", "chat 17", kind="chat", owner=7))
    chat.record(line("user_message", "chat 17", message=1, text="erste", page=0))
    other = chat.record(line("conversation_started", "chat17:h9a90eaf363ff759f", kind="chat", owner=8))
    chat.record(line("user_message", "chat17:h9a90eaf363ff759f", message=1, text="zweite", page=0))

    assert other.conversation == "chat17:h9a90eaf363ff759f:hcc09425c04d37e82"
    assert [e.owner for e in chat.events("chat 17")[:1]] == [7]
    assert [e.owner for e in chat.events("chat17:h9a90eaf363ff759f")[:1]] == [8]
    assert chat.turn_input("chat 17").messages[-1].text == "erste"
    assert chat.turn_input("chat17:h9a90eaf363ff759f").messages[-1].text == "zweite"


def test_a_decision_for_a_segment_that_does_not_exist_says_the_segment_is_unknown(chat: Chatrecord) -> None:
    chat.record(line("conversation_started", kind="chat", owner=7))
    chat.record(line("user_message", message=1, text="x", page=0))
    with pytest.raises(NoCardWaiting) as refused:
        chat.record(line("card_decided", segment="r/9", approved=True, answer="Übernehmen"))
    assert str(refused.value) == "api: line 3, segment: segment r/9 is unknown: this conversation recorded no segment of that id"


@pytest.mark.parametrize("how, reason", [
    (line("user_message", message=2, text="anders", page=0), "a new user message"),
    (line("tour_ended"), "the end of the tour"),
])
def test_a_card_left_undecided_and_then_decided_says_it_was_left_undecided(
    chat: Chatrecord, how: dict[str, Any], reason: str
) -> None:
    chat.record(line("conversation_started", kind="chat", owner=7))
    chat.record(line("user_message", message=1, text="SEO", page=42, skill="3:seo"))
    chat.record(line("segment_returned", segment="r/1", run="r", trigger="turn", outcome="awaiting_approval",
                     answer="Titel?", pending=[{"toolName": "update_page_metadata"}]))
    chat.record(how)
    with pytest.raises(CardAlreadyDecided) as refused:
        chat.record(line("card_decided", segment="r/1", approved=True, answer="Übernehmen"))
    assert str(refused.value) == (
        f"api: line 5, segment: the card of segment r/1 was left undecided by {reason}; a later decision is not recorded"
    )


def test_a_tour_ended_again_at_another_time_stores_nothing(chat: Chatrecord) -> None:
    chat.record(line("conversation_started", kind="chat", owner=7))
    chat.record(line("user_message", message=1, text="SEO", page=42, skill="3:seo"))
    first = chat.record(line("tour_ended"))
    again = chat.record({**line("tour_ended"), "at": "2026-10-28T10:00:00Z"})
    assert ([type(e).__name__ for e in first.appended], again.repeated) == (["TourEnded"], True)
    assert len(chat.store.events("c")) == 4


def test_a_rejected_value_is_quoted_as_a_short_escaped_excerpt(chat: Chatrecord) -> None:
    chat.record(line("conversation_started", kind="chat", owner=7))
    with pytest.raises(InvalidInput) as refused:
        chat.record(line("segment_returned", segment="r/1", run="r", trigger="\x1b[2J" + "geheim " * 200,
                         outcome="completed"))
    assert str(refused.value) == (
        'api: line 2, trigger: "\\x1b[2Jgeheim geheim geheim geheim gehe… is not allowed; '
        "use 'turn', 'approval', 'answer' or 'retry'"
    )


def test_a_line_with_a_key_twice_is_refused_and_nothing_of_the_batch_is_stored(chat: Chatrecord) -> None:
    start = f'{{"type": "conversation_started", "conversation": "c", "at": "{AT}", "kind": "chat", "owner": 7}}'
    twice = f'{{"type": "user_message", "conversation": "c", "at": "{AT}", "message": 1, "message": 2, "text": "x", "page": 0}}'
    with pytest.raises(InvalidInput) as refused:
        chat.record_lines([start, twice], "request")
    assert str(refused.value) == "request: line 2, message: field message appears twice; give each key of an object once"
    assert (refused.value.field, refused.value.line) == ("message", 2)
    assert chat.store.events("c") == []
    report = chat.ingest([start, twice], "stdin")
    assert (report.appended, report.stopped_at, str(report.stopped)) == (
        1, 2, "stdin: line 2, message: field message appears twice; give each key of an object once")
