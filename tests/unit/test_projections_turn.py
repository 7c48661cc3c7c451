"""The turn input on the demo: the question asked three days after the SEO tour."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import Chat, proposal, seo_tour, tool

from adapters.service.line_commands import read_events
from projections.notes import OPEN
from projections.turn import NoTurnYet, build_turn_input, replay_json, replay_turns

DEMO = Path(__file__).parents[1] / "data" / "demo_seo_tour.jsonl"
SIX_FIELDS = ("title", "og_image", "og_title", "og_description", "twitter_title", "twitter_description")


@pytest.fixture(scope="module")
def demo_events():
    return read_events(DEMO)


def test_the_demos_final_turn_is_the_question_sent_with_page_0(demo_events):
    turn = build_turn_input(demo_events)

    assert (turn.message, turn.to_json()["at"]) == (3, "2026-10-31T14:05:00Z")
    assert turn.to_json()["view_context"] == {"pageId": 0, "lastPageId": 42}


def test_the_demos_notes_name_the_records_written(demo_events):
    notes = build_turn_input(demo_events).notes

    assert any("Records written: pages:42 (complete)" in n for n in notes)
    assert any("Records written: sys_file_reference:913 (complete)" in n for n in notes)


@pytest.mark.parametrize("field", SIX_FIELDS)
def test_the_demos_notes_report_each_field_as_approved_and_applied(demo_events, field):
    notes = build_turn_input(demo_events).notes

    [note] = [n for n in notes if n.startswith(f"{OPEN}Card ") and f"(field {field})" in n]
    assert "approved (Übernehmen) and applied; the write is complete" in note


def test_the_demos_notes_report_no_failed_call(demo_events):
    assert not any("failed" in n for n in build_turn_input(demo_events).notes)


def test_the_demos_notes_add_about_2500_characters(demo_events):
    notes = build_turn_input(demo_events).notes

    assert len(notes) == 14  # eight segments and six cards
    assert 1500 <= sum(len(n) for n in notes) <= 4000


def test_the_demos_question_is_sent_as_six_messages_with_the_notes_in_the_tours_answers(demo_events):
    messages = build_turn_input(demo_events).model_messages()

    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[-1]["content"] == "was ist hier passiert?"
    assert messages[2]["content"].count(OPEN) == 1
    assert messages[4]["content"].count(OPEN) == 13


def test_each_note_stands_beside_its_own_segments_answer_in_the_joined_tour_text(demo_events):
    tour_text = build_turn_input(demo_events).model_messages()[4]["content"]
    og_title = tour_text.index("OpenGraph-Titel")
    image_written = tour_text.index("Records written: sys_file_reference:913 (complete)")
    og_description = tour_text.index("OpenGraph-Beschreibung")
    assert og_title < image_written < og_description
    assert tour_text.startswith("Ich schlage als Seitentitel")
    assert tour_text.index("(field title): approved") < tour_text.index("Gespeichert. Ich schlage als OpenGraph-Bild")
    assert tour_text.endswith("Records written: pages:42 (complete).]")


def test_the_demos_page_line_names_the_last_page_and_asks_before_new_work(demo_events):
    system = build_turn_input(demo_events).system

    assert system == (
        "No page is selected now. The page last selected in this conversation is page 42. "
        "The transcript and the chat records say which pages earlier steps worked on. "
        "Ask before starting new work on a page the user does not refer to."
    )


def test_notes_at_one_place_keep_the_order_in_which_they_happened(demo_events):
    notes = build_turn_input(demo_events).notes

    starts = [n[len(OPEN) :].split(" on ")[0].split(" paused")[0].split(" completed")[0] for n in notes]
    assert starts[:5] == [
        "The run of a user message",
        "The continuation after an answer to a question",
        "Card update_page_metadata",
        "The continuation after a card decision",
        "Card set_page_social_image",
    ]
    assert "sys_file_reference:913" in notes[5]


def test_under_transcript_only_the_demo_gets_no_notes_at_all(demo_events):
    turn = build_turn_input(demo_events, rules="transcript-only")

    assert turn.notes == ()
    assert not any("Chat record" in m["content"] for m in turn.model_messages())
    assert turn.system == "No page is selected."


def _behalten_tour() -> list:
    chat = Chat()
    seo_tour(chat, ["Behalten", "Behalten", "Behalten"])
    chat.user("was ist hier passiert?", page=0)
    return chat.events


def test_after_three_behalten_no_note_reports_a_failed_call_and_each_names_the_answer():
    notes = build_turn_input(_behalten_tour(), rules="2026-11-02").notes

    cards = [n for n in notes if "Card " in n]
    assert not any("failed" in n for n in notes)
    assert len(cards) == 3
    assert all("declined with Behalten: the current value was kept, nothing was saved" in n for n in cards)


def test_before_the_amendment_the_refused_calls_after_behalten_read_as_failed():
    notes = build_turn_input(_behalten_tour(), rules="2026-11-01").notes

    failed = [n for n in notes if "(1 call, 1 failed)" in n]
    assert len(failed) == 3
    assert sum("set_page_social_image (1 call, 1 failed)" in n for n in failed) == 1


def test_replay_gives_one_turn_per_model_call_a_user_message_started(demo_events):
    turns = replay_turns(demo_events)

    assert [t.message for t in turns] == [1, 3]
    assert turns[0].notes == ()
    assert turns[0].system == "The selected page is page 42."
    assert turns[0].to_json()["view_context"] == {"pageId": 42, "lastPageId": 42}
    assert turns[-1].to_json() == build_turn_input(demo_events).to_json()


def test_each_replayed_turn_sees_the_log_as_it_was_then():
    chat = Chat()
    seo_tour(chat, ["Übernehmen"])
    chat.user("und jetzt?", page=0)
    chat.user("noch etwas?", page=0)

    first, second, third = replay_turns(chat.events)

    assert (len(first.record), len(first.card_outcomes)) == (0, 0)
    assert (len(second.record), len(second.card_outcomes)) == (2, 1)
    assert len(third.notes) == len(second.notes) == 3


def test_the_replay_json_has_the_contracts_shape(demo_events):
    out = replay_json("conv-demo-seo", "2026-11-02", replay_turns(demo_events))

    assert list(out) == ["conversation", "rules", "turns"]
    assert (out["conversation"], out["rules"]) == ("conv-demo-seo", "2026-11-02")
    turn = out["turns"][-1]
    assert list(turn) == ["message", "at", "view_context", "messages", "notes", "record", "card_outcomes"]
    assert turn["record"][2] == {
        "segment": "3f6c2a9e-5b1d-4c1e-9a51-0c7d2e4b8a10/3",
        "trigger": "approval",
        "ending": "awaiting_approval",
        "tools": [{"name": "update_page_metadata", "calls": 1, "failed": 0}],
        "written": [{"record": "pages:42", "completeness": "complete"}],
        "waiting": [],
        "decision": None,
        "undecided": None,
        "card_outcomes_before": 1,
    }
    assert turn["card_outcomes"][1] == {
        "outcome": "applied",
        "tool": "set_page_social_image",
        "record": "pages:42",
        "fields": ["og_image"],
        "after": 4,
    }


def test_events_without_a_user_message_have_no_turn_to_build():
    with pytest.raises(NoTurnYet):
        build_turn_input(Chat().events)


def test_turns_of_a_message_skim_only_entries_no_turn_of_it_reads() -> None:
    """`turns_of` builds the run record entries that fall out of the record (the newest 200)
    before the message's first turn without reading their steps (`falls_out_before`); every
    turn it returns is the one the full fold returns: past 200 segments, with cards decided,
    an edit's cut, a retry, and decisions on entries that fell out."""
    from projections.rules import resolve
    from projections.turn import falls_out_before, turns_of

    chat = Chat()
    for _ in range(55):
        seo_tour(chat, ["Übernehmen", "Behalten", "Überspringen"])  # 4 segments each, run "run"
    chat.edit(chat.state.last_message - 3, "SEO noch einmal")  # cuts the last tours: run "run" ends
    chat.segment("turn", "completed", "Neu.", run="after-edit")
    chat.retry(chat.state.last_message)
    chat.segment("turn", "completed", "Noch einmal.", run="after-retry")
    for n in range(20):
        chat.user(f"Frage {n}", page=42)
        chat.segment("turn", "awaiting_approval", "Titel?", [tool("get_page", 1)], [proposal("title")], run=f"later-{n}")
        chat.decide(n % 2 == 0, "Übernehmen" if n % 2 == 0 else "Behalten")
    rules = resolve("2026-11-02")
    full = replay_turns(chat.events, rules)
    messages = sorted({t.message for t in full})

    skimmed = {m: len(falls_out_before(chat.events, m, rules)) for m in messages}
    for m in messages:
        picked, _, _ = turns_of(chat.events, m, rules)
        assert [t.to_json() for t in picked] == [t.to_json() for t in full if t.message == m], m

    assert sum(len(t.record) == 200 for t in full) > 10  # turns whose record is full: entries fell out
    assert skimmed[messages[0]] == 0 and max(skimmed.values()) > 0
