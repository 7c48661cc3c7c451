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

    card, continuation = fold(chat).segments[-2:]

    assert (card.entries[-1].kind, card.entries[-1].label) == ("decision", "Von dir abgelehnt: Behalten")
    assert [(e.kind, e.label, e.tool) for e in continuation.entries] == [("tool", "ausgeführt", "chat_set_progress")]


def test_before_the_amendment_behalten_showed_fehlgeschlagen():
    chat = Chat()
    seo_tour(chat, ["Behalten"])

    card, continuation = fold(chat, "2026-11-01").segments[-2:]

    assert card.entries[-1].label == "Von dir abgelehnt: Behalten"
    assert [e.label for e in continuation.entries] == ["fehlgeschlagen", "ausgeführt"]


def test_an_approved_call_no_longer_permitted_shows_its_reason_and_the_hint():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", None, [*model_round(1)], [call()])
    chat.decide(True, "Übernehmen")
    chat.segment("approval", "completed", "Ging nicht.", [refusal("update_page_metadata", 1), *model_round(2)])

    card, continuation = fold(chat).segments
    [decision] = card.entries
    [refused] = continuation.entries

    assert decision.label == "Von dir freigegeben: Übernehmen"
    assert refused.label == "nicht ausgeführt: nicht mehr freigegeben"
    assert "Administrator" in refused.hint


def test_an_answered_question_closes_its_own_segments_entries():
    chat = Chat()
    chat.user("Los", page=42)
    chat.segment("turn", "awaiting_input", "Welche?", [*model_round(1)], [call("ask_choice", table=None, fields=())])
    chat.answer("Alle")
    chat.segment("answer", "completed", "Gut.", [tool("ask_choice", 1, ms=0.4), *model_round(2)])

    question, continuation = fold(chat).segments
    assert [e.label for e in question.entries] == ["Von dir beantwortet"]
    assert [e.label for e in continuation.entries] == ["ausgeführt"]


def test_a_decision_shows_on_its_card_also_when_no_continuation_follows():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", None, [*model_round(1)], [call()])
    chat.decide(True, "Übernehmen")
    chat.user("Und?", page=42)

    [card] = fold(chat).segments
    assert [e.label for e in card.entries] == ["Von dir freigegeben: Übernehmen"]
