"""After an edit, the cut turns' run records and card outcomes are gone from every read model
and from every later turn's notes."""

from __future__ import annotations

from factories import SKILL, Chat, call, model_round, tool, write

from projections import activity, card_outcomes, run_record
from projections.rules import get_rule_set
from projections.turn import build_turn_input, replay_turns

RULES = get_rule_set("2026-11-02")


def edited_chat() -> Chat:
    chat = Chat()
    chat.user("Hallo", page=42)
    chat.segment("turn", "completed", "Hallo!", [*model_round(1), tool("get_page", 1)], run="r1")
    chat.user("SEO optimieren", page=42, skill=SKILL)
    chat.segment("turn", "awaiting_approval", "Titel?", [*model_round(1)], [call()], run="r2")
    chat.decide(True, "Übernehmen")
    chat.segment(
        "approval",
        "completed",
        "Gespeichert.",
        [tool("update_page_metadata", 1, ms=40.0), write("update_page_metadata", "pages", 42, 1), *model_round(2)],
        run="r2",
    )
    chat.user("danke", page=0)
    chat.edit(2, "Nur prüfen, nichts ändern")
    return chat


def fold(module, chat: Chat):
    state = module.initial()
    for event in chat.events:
        state = module.apply(state, event, RULES)
    return state


def test_an_edit_takes_its_turns_run_records_and_card_outcomes_with_it():
    chat = edited_chat()

    assert [e.segment for e in fold(run_record, chat).entries] == ["r1/1"]
    assert fold(card_outcomes, chat).outcomes == ()
    assert [s.segment for s in fold(activity, chat).segments] == ["r1/1"]


def test_the_edited_message_runs_again_with_only_the_kept_turns_notes():
    chat = edited_chat()

    turn = replay_turns(chat.events)[-1]

    assert turn.message == 2
    assert [m["content"] for m in turn.model_messages()[1:]][-1] == "Nur prüfen, nichts ändern"
    assert len(turn.notes) == 1 and "get_page" in turn.notes[0]
    assert turn.card_outcomes == ()


def test_a_later_turn_never_reads_the_cut_turns_notes():
    chat = edited_chat()
    chat.segment("turn", "completed", "Geprüft.", [*model_round(1), tool("get_page", 1)], run="r3")
    chat.user("und jetzt?", page=0)

    turn = build_turn_input(chat.events)

    assert not any("pages:42" in n or "Card" in n for n in turn.notes)
    assert [e.segment for e in turn.record] == ["r1/1", "r3/4"]
    assert [m["content"] for m in turn.model_messages()[1:] if m["role"] == "user"][-2:] == [
        "Nur prüfen, nichts ändern",
        "und jetzt?",
    ]
