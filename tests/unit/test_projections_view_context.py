"""The view context: pageId, and lastPageId kept across turns sent with page 0."""

from __future__ import annotations

from factories import Chat

from projections import view_context
from projections.rules import get_rule_set
from projections.view_context import ViewContext


def fold(chat: Chat, rules_id: str = "2026-11-02") -> ViewContext:
    state = view_context.initial()
    for event in chat.events:
        state = view_context.apply(state, event, get_rule_set(rules_id))
    return state


def test_a_turn_sent_with_page_0_keeps_the_last_page_apart_from_the_selection():
    chat = Chat()
    chat.user("eins", page=42)
    chat.user("zwei", page=0)
    chat.user("drei", page=0)

    assert fold(chat).to_json() == {"pageId": 0, "lastPageId": 42}


def test_a_turn_with_a_page_makes_it_the_last_page():
    chat = Chat()
    chat.user("eins", page=42)
    chat.user("zwei", page=0)
    chat.user("drei", page=7)

    assert fold(chat).to_json() == {"pageId": 7, "lastPageId": 7}


def test_transcript_only_keeps_no_last_page():
    chat = Chat()
    chat.user("eins", page=42)
    chat.user("zwei", page=0)

    assert fold(chat, "transcript-only").to_json() == {"pageId": 0, "lastPageId": 0}


def test_an_edit_goes_back_to_the_pages_of_the_messages_it_keeps():
    chat = Chat()
    chat.user("eins", page=42)
    chat.user("zwei", page=0)
    chat.user("drei", page=7)
    chat.edit(2, "zwei, neu")

    assert fold(chat).to_json() == {"pageId": 0, "lastPageId": 42}
