"""The chat's Python API as a story: record the demo line by line, then ask for the turn."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.settings import open_store
from domain.errors import InvalidInput, NoCardWaiting, UnknownConversation

DEMO = Path(__file__).parents[1] / "data" / "demo_seo_tour.jsonl"


@pytest.fixture
def chatrecord() -> Chatrecord:
    return Chatrecord(open_store(memory=True))


def test_the_chat_records_the_tour_and_the_later_turn_reads_what_ran(chatrecord: Chatrecord) -> None:
    for raw in DEMO.read_bytes().splitlines():
        chatrecord.record(orjson.loads(raw))

    turn = chatrecord.turn_input("conv-demo-seo")

    assert turn.message == 3
    assert turn.view_context.to_json() == {"pageId": 0, "lastPageId": 42}
    assert len(turn.notes) == 14
    assert any("sys_file_reference:913 (complete)" in note for note in turn.notes)


def test_a_line_delivered_twice_returns_the_first_result(chatrecord: Chatrecord) -> None:
    started = {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}
    first = chatrecord.record(started)
    again = chatrecord.record(orjson.dumps(started).decode())
    assert (len(first.appended), again.repeated, again.events) == (1, True, first.events)


def test_a_bad_line_names_the_call_and_the_field_and_stores_nothing(chatrecord: Chatrecord) -> None:
    with pytest.raises(InvalidInput, match=r"^api: line 1, owner: "):
        chatrecord.record({"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": "x"})
    assert chatrecord.store.events("c") == []
    chatrecord.record({"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7})
    with pytest.raises(NoCardWaiting):
        chatrecord.record({"type": "card_decided", "conversation": "c", "at": "2026-10-28T09:00:01Z", "segment": "s", "approved": True, "answer": "Übernehmen"})
    assert len(chatrecord.store.events("c")) == 1


def test_asking_for_a_conversation_the_store_does_not_hold_is_an_error(chatrecord: Chatrecord) -> None:
    with pytest.raises(UnknownConversation):
        chatrecord.turn_input("nope")


def test_the_activity_list_shows_the_editor_a_behalten_as_the_decision_not_a_failed_call(chatrecord: Chatrecord) -> None:
    for raw in (DEMO.parent / "behalten_tour.jsonl").read_bytes().splitlines():
        chatrecord.record(orjson.loads(raw))

    shown = chatrecord.activity("conv-behalten")
    before = chatrecord.activity("conv-behalten", rules="2026-11-01")

    assert [[e.label for e in s.entries if e.tool != "chat_set_progress"] for s in shown] == [
        ["Von dir abgelehnt: Behalten"], ["Von dir abgelehnt: Behalten"], ["Von dir abgelehnt: Behalten"], []
    ]
    assert [e.label for e in before[1].entries][:2] == ["fehlgeschlagen", "ausgeführt"]
