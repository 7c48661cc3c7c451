"""The chat's Python API as a story: record the demo line by line, then ask for the turn."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.store.settings import open_store
from domain.errors import InvalidInput, NoCardWaiting, UnknownConversation
from projections.turn_notes import apply_notes

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


def test_the_chat_reads_the_next_turns_notes_and_puts_them_into_its_transcript(tmp_path) -> None:

    # the chat records the demo tour line by line
    record = Chatrecord(open_store(memory=True))
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        record.record(line)

    # it asks for the notes of the next turn, hiding page 13
    notes = record.turn_notes("conv-demo-seo", can_see_page=lambda page: page != 13)
    turn = record.turn_input("conv-demo-seo", can_see_page=lambda page: page != 13)

    # they are the turn's notes, and put into the transcript they give the model's messages
    assert notes.to_json()["version"] == len(record.store.events("conv-demo-seo"))
    assert [n["text"] for n in notes.to_json()["notes"]] == list(turn.notes)
    transcript = record.read_models.state("conv-demo-seo").transcript.messages
    assert apply_notes(transcript, notes.notes) == turn.messages
    assert notes.page_line == turn.system
