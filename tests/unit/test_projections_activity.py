"""The activity list: what the chat shows the editor, per segment."""

from __future__ import annotations

from factories import Chat, call, model_round, refusal, seo_tour, tool

from projections import activity
from projections.activity import Activity
from projections.rules import get_rule_set


def fold(chat: Chat, rules_id: str = "2026-11-02") -> Activity:
    state = activity.initial()
    for event in chat.events:
        state = activity.apply(state, event, get_rule_set(rules_id))
    return state


def test_after_behalten_the_list_names_the_answer_and_shows_no_failed_call():
    chat = Chat()
    seo_tour(chat, ["Behalten"])

    continuation = fold(chat).segments[-1]

    assert [(e.kind, e.label) for e in continuation.entries] == [
        ("decision", "Von dir abgelehnt: Behalten"),
        ("tool", "ausgeführt"),
    ]
    assert continuation.entries[1].tool == "chat_set_progress"


def test_before_the_amendment_behalten_showed_fehlgeschlagen():
    chat = Chat()
    seo_tour(chat, ["Behalten"])

    labels = [e.label for e in fold(chat, "2026-11-01").segments[-1].entries]

    assert labels == ["Von dir abgelehnt: Behalten", "fehlgeschlagen", "ausgeführt"]


def test_an_approved_call_no_longer_permitted_shows_its_reason_and_the_hint():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", None, [*model_round(1)], [call()])
    chat.decide(True, "Übernehmen")
    chat.segment("approval", "completed", "Ging nicht.", [refusal("update_page_metadata", 1), *model_round(2)])

    decision, refused = fold(chat).segments[-1].entries

    assert decision.label == "Von dir freigegeben: Übernehmen"
    assert refused.label == "nicht ausgeführt: nicht mehr freigegeben"
    assert "Administrator" in refused.hint


def test_an_answered_question_opens_its_continuations_entries():
    chat = Chat()
    chat.user("Los", page=42)
    chat.segment("turn", "awaiting_input", "Welche?", [*model_round(1)], [call("ask_choice", table=None, fields=())])
    chat.answer("Alle")
    chat.segment("answer", "completed", "Gut.", [tool("ask_choice", 1, ms=0.4), *model_round(2)])

    assert [e.label for e in fold(chat).segments[-1].entries] == ["Von dir beantwortet", "ausgeführt"]
