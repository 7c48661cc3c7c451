"""The run record: one entry per segment, newest 200, as the spec's Decision lists."""

from __future__ import annotations

from factories import SKILL, Chat, call, model_round, refusal, seo_tour, tool, write

from projections import run_record
from projections.rules import get_rule_set
from projections.run_record import RunRecord

RULES = get_rule_set("2026-11-02")


def fold(chat: Chat, rules=RULES) -> RunRecord:
    state = run_record.initial()
    for event in chat.events:
        state = run_record.apply(state, event, rules)
    return state


def test_an_entry_states_ending_tools_records_and_waiting_calls():
    chat = Chat()
    chat.user("Bild setzen", page=42)
    steps = [
        *model_round(1),
        tool("get_page", 1),
        tool("get_page", 1, error=True),
        tool("set_page_social_image", 1, ms=41.0),
        write("set_page_social_image", "sys_file_reference", 913, 1, None),
        tool("update_page_metadata", 1, ms=40.0),
        write("update_page_metadata", "pages", 42, 1, "partial"),
    ]
    chat.segment("turn", "awaiting_approval", "Und noch der Titel?", steps, [call(fields=("title", "seo_title"))])

    [entry] = fold(chat).entries

    assert entry.to_json() == {
        "segment": "run/1",
        "trigger": "turn",
        "ending": "awaiting_approval",
        "tools": [
            {"name": "get_page", "calls": 2, "failed": 1},
            {"name": "set_page_social_image", "calls": 1, "failed": 0},
            {"name": "update_page_metadata", "calls": 1, "failed": 0},
        ],
        "written": [
            {"record": "sys_file_reference:913", "completeness": "unconfirmed"},
            {"record": "pages:42", "completeness": "partial"},
        ],
        "waiting": [{"tool": "update_page_metadata", "record": "pages:42", "fields": ["title", "seo_title"]}],
        "decision": None,
        "undecided": None,
        "card_outcomes_before": 0,
    }


def test_display_only_and_question_tools_are_left_out():
    chat = Chat()
    chat.user("Los", page=42)
    steps = [*model_round(1), tool("chat_set_progress", 1), tool("chat_highlight_element", 1), tool("get_page", 1)]
    chat.segment("turn", "awaiting_input", "Welche?", steps, [call("ask_choice", table=None, fields=())])
    chat.answer("Alle")
    chat.segment("answer", "completed", "Gut.", [tool("ask_choice", 1, ms=0.4), *model_round(2)])

    assert [[t.name for t in e.tools] for e in fold(chat).entries] == [["get_page"], []]


def test_a_decided_card_no_longer_waits():
    chat = Chat()
    seo_tour(chat, ["Übernehmen"])

    first, second = fold(chat).entries

    assert (first.still_waiting, first.to_json()["waiting"], first.resolved) == ((), [], "decided")
    assert [(w.tool, w.record, w.fields) for w in first.waiting] == [("update_page_metadata", "pages:42", ("title",))]
    assert [w.record for w in second.written] == ["pages:42"]


def test_an_ordinary_cards_decision_is_recorded_where_no_card_outcome_says_it():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", None, [*model_round(1)], [call()])
    chat.decide(False, "abgelehnt")
    chat.segment("approval", "completed", "Nichts geändert.", [refusal("update_page_metadata", 1), *model_round(2)])

    assert [e.decision for e in fold(chat).entries] == ["abgelehnt", None]  # on the card's own entry


def test_an_approved_ordinary_card_is_recorded_even_when_no_continuation_returns():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", None, [*model_round(1)], [call()])
    chat.decide(True, "Übernehmen")
    chat.user("Und?")

    [entry] = fold(chat).entries
    assert (entry.decision, entry.to_json()["waiting"]) == ("Übernehmen", [])


def test_a_plain_denial_on_a_guided_card_is_recorded_in_the_run_record():
    chat = Chat()
    seo_tour(chat, ["abgelehnt"])

    assert [e.decision for e in fold(chat).entries][0] == "abgelehnt"


def test_a_guided_cards_decision_is_said_by_its_card_outcome_not_the_record():
    chat = Chat()
    seo_tour(chat, ["Behalten", "Übernehmen"])

    assert [e.decision for e in fold(chat).entries] == [None, None, None]


def test_a_card_left_undecided_by_a_new_message_records_why_and_that_ai_tasks_may_decide_it():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", "Neuer Titel?", [*model_round(1)], [call()])
    chat.user("Lieber doch nicht", page=42)

    [entry] = fold(chat).entries

    assert (entry.undecided, entry.decidable_elsewhere) == ("new_message", True)
    assert [w.tool for w in entry.waiting] == ["update_page_metadata"]


def test_a_card_left_undecided_by_ending_the_tour_cannot_be_decided_elsewhere():
    chat = Chat()
    chat.user("SEO optimieren", page=42, skill="3:seo-optimieren")
    chat.segment("turn", "awaiting_approval", "Titel?", [*model_round(1)], [call()])
    chat.end_tour()

    [entry] = fold(chat).entries

    assert (entry.undecided, entry.decidable_elsewhere) == ("tour_ended", False)


def test_each_entry_counts_the_card_outcomes_before_it():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten", "Übernehmen"])

    assert [e.card_outcomes_before for e in fold(chat).entries] == [0, 1, 2, 3]


def test_the_record_keeps_the_newest_200_entries():
    chat = Chat()
    chat.user("Los", page=42)
    for _ in range(203):
        chat.segment("turn", "completed", "ok", [*model_round(1), tool("get_page", 1)])

    state = fold(chat)

    assert len(state.entries) == 200
    assert (state.entries[0].segment, state.entries[-1].segment, state.dropped) == ("run/4", "run/203", 3)


def test_the_record_survives_a_json_round_trip():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten"])
    state = fold(chat)

    assert RunRecord.model_validate(state.model_dump(mode="json")) == state


def test_an_approved_guided_card_whose_run_never_continues_keeps_its_decision_in_the_record():
    chat = Chat()
    chat.user("SEO", page=42, skill=SKILL)
    chat.segment("turn", "awaiting_approval", "Titel?", [*model_round(1)], [call()], run="r1")
    chat.decide(True, "Übernehmen")
    assert [e.decision for e in fold(chat).entries] == [None]  # its outcome may still come
    chat.user("Und jetzt?", page=42)

    assert [e.decision for e in fold(chat).entries] == ["Übernehmen"]  # it will not: no outcome says it
