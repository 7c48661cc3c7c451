"""Lookups and errors a user trips on (issue 8, item 6): an id is found as the chat names it, and
each refusal says what happened, quoting at most a short excerpt of a rejected value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.ingest.names import earlier_stored_id, reduce_id
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
    chat.record(line("segment_returned", "chat 17", segment="r/1", run="r", trigger="turn", outcome="completed", answer="Hallo!"))
    assert chat.turn_input("chat 17").message == 1
    assert [a.segment for a in chat.activity("chat 17")] == ["r/1"]


def test_a_stored_form_names_the_conversation_it_is_the_stored_form_of(chat: Chatrecord) -> None:
    """Reducing a stored form gives it back (an export ingested again keeps its key)."""
    first = chat.record(line("conversation_started", "chat 17", kind="chat", owner=7))
    again = chat.record(line("user_message", "chat17:h9a90eaf363ff759f", message=1, text="erste", page=0))

    assert first.conversation == again.conversation == "chat17:h9a90eaf363ff759f"
    assert [type(e).__name__ for e in chat.events("chat 17")] == ["ConversationStarted", "UserMessagePosted"]
    assert reduce_id(reduce_id("chat 17")) == reduce_id("chat 17") == "chat17:h9a90eaf363ff759f"
    assert reduce_id("r 1/2", "segment id") == "r1/2:h4bf402225025510a"


def test_a_made_up_stored_form_that_is_the_hash_of_no_id_is_a_conversation_of_its_own(chat: Chatrecord) -> None:
    """`chat17:h0000000000000000` looks like a stored form, but 0000… is not the hash of an id
    whose kept characters are `chat17`: it shares nothing with `chat 17`, nor with `chat17`."""
    chat.record(line("conversation_started", "chat 17", kind="chat", owner=7))
    chat.record(line("user_message", "chat 17", message=1, text="erste", page=0))
    chat.record(line("conversation_started", "chat17", kind="chat", owner=8))
    forged = chat.record(line("conversation_started", "chat17:h0000000000000000", kind="chat", owner=9))
    chat.record(line("user_message", "chat17:h0000000000000000", message=1, text="dritte", page=0))

    assert forged.conversation == "chat17:h0000000000000000"
    assert [e.owner for e in chat.events("chat 17")[:1]] == [7]
    assert [e.owner for e in chat.events("chat17")[:1]] == [8]
    assert [e.owner for e in chat.events("chat17:h0000000000000000")[:1]] == [9]
    assert chat.turn_input("chat 17").messages[-1].text == "erste"
    assert chat.turn_input("chat17:h0000000000000000").messages[-1].text == "dritte"
    assert len(chat.conversations().conversations) == 3


def test_a_conversation_an_earlier_store_reduced_once_more_is_found_by_the_chats_id(chat: Chatrecord) -> None:
    """Before stored forms were kept, the chat's own `chat17:h9a90eaf363ff759f` was stored as
    `chat17:h9a90eaf363ff759f:hcc09425c04d37e82`; a lookup by the chat's id still finds it."""
    chat.record(line("conversation_started", "chat17:h9a90eaf363ff759f:hcc09425c04d37e82", kind="chat", owner=8))
    assert earlier_stored_id("chat17:h9a90eaf363ff759f") == "chat17:h9a90eaf363ff759f:hcc09425c04d37e82"
    assert earlier_stored_id("chat17") is None
    assert chat._stored_id("chat17:h9a90eaf363ff759f") == "chat17:h9a90eaf363ff759f:hcc09425c04d37e82"
    assert [e.owner for e in chat.events("chat17:h9a90eaf363ff759f")[:1]] == [8]


@settings(max_examples=300, deadline=None)
@given(a=st.text(min_size=1, max_size=140), b=st.text(min_size=1, max_size=140))
def test_reducing_is_idempotent_and_two_ids_share_a_key_only_through_a_stored_form(a: str, b: str) -> None:
    if not any(c.isascii() and (c.isalnum() or c in "_.:/-") for c in a + b):
        return
    try:
        ka, kb = reduce_id(a), reduce_id(b)
    except ValueError:
        return
    assert reduce_id(ka) == ka and reduce_id(kb) == kb
    if a != b and ka == kb:
        assert a == ka or b == kb  # one of them is the other's stored form


def test_the_stored_form_of_a_long_id_is_kept_and_a_longer_one_reduced(chat: Chatrecord) -> None:
    long = "x" * 200
    key = reduce_id(long)
    assert (len(key), key[:110], key[110:112]) == (128, "x" * 110, ":h")
    assert reduce_id(key) == key
    assert reduce_id("y" * 129) != reduce_id("y" * 130)


def test_a_decision_for_a_segment_that_does_not_exist_says_the_segment_is_unknown(chat: Chatrecord) -> None:
    chat.record(line("conversation_started", kind="chat", owner=7))
    chat.record(line("user_message", message=1, text="x", page=0))
    with pytest.raises(NoCardWaiting) as refused:
        chat.record(line("card_decided", segment="r/9", approved=True, answer="Übernehmen"))
    assert str(refused.value) == (
        "api: line 3, segment: segment r/9 is unknown: this conversation recorded no segment of that id yet; "
        "the card's decision waits for it (nothing of it was stored; deliver it again after the segment)"
    )


@pytest.mark.parametrize(
    "how, reason",
    [
        (line("user_message", message=2, text="anders", page=0), "a new user message"),
        (line("tour_ended"), "the end of the tour"),
    ],
)
def test_a_card_left_undecided_and_then_decided_says_it_was_left_undecided(
    chat: Chatrecord, how: dict[str, Any], reason: str
) -> None:
    chat.record(line("conversation_started", kind="chat", owner=7))
    chat.record(line("user_message", message=1, text="SEO", page=42, skill="3:seo"))
    chat.record(
        line(
            "segment_returned",
            segment="r/1",
            run="r",
            trigger="turn",
            outcome="awaiting_approval",
            answer="Titel?",
            pending=[{"toolName": "update_page_metadata"}],
        )
    )
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
        chat.record(line("segment_returned", segment="r/1", run="r", trigger="\x1b[2J" + "geheim " * 200, outcome="completed"))
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
        1,
        2,
        "stdin: line 2, message: field message appears twice; give each key of an object once",
    )
