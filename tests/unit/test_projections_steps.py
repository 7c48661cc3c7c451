"""The step reading (RefusedCalls): the seven rows of the amendment's table, each built from
nr-llm-shaped steps, read once for both the activity list and the run record."""

from __future__ import annotations

import pytest
from factories import Chat, call, facts, model_round, refusal, tool, write

from projections import activity, run_record
from projections.rules import get_rule_set
from projections.steps import read_segment

NEW = get_rule_set("2026-11-02")
OLD = get_rule_set("2026-11-01")

# (follows, trigger, outcome, steps, tool read, reading, label or None, record tools)
ROWS = [
    pytest.param(
        "declined",
        "approval",
        "completed",
        [refusal("update_page_metadata", 3), refusal("load_skill", 3), *model_round(4)],
        "update_page_metadata",
        "declined",
        None,
        (),
        id="1-declined-card-calls-and-load_skill-read-as-the-decision-without-tool-entry",
    ),
    pytest.param(
        "approved",
        "approval",
        "completed",
        [refusal("update_page_metadata", 3), *model_round(4)],
        "update_page_metadata",
        "not_permitted",
        "nicht ausgeführt: nicht mehr freigegeben",
        (("update_page_metadata", 1, 1),),
        id="2-approved-call-no-longer-offered-is-a-failure-not-permitted",
    ),
    pytest.param(
        "approved",
        "approval",
        "completed",
        [
            tool("update_page_metadata", 3, ms=38.0),
            write("update_page_metadata", "pages", 42, 3),
            refusal("ask_choice", 3),
            *model_round(4),
        ],
        "ask_choice",
        "held",
        "noch nicht ausgeführt",
        (("update_page_metadata", 1, 0),),
        id="3-after-an-approval-a-question-of-the-same-turn-is-held",
    ),
    pytest.param(
        "answered",
        "answer",
        "completed",
        [refusal("ask_choice", 2), *model_round(3)],
        "ask_choice",
        "not_permitted",
        "nicht ausgeführt: nicht mehr freigegeben",
        (),
        id="4-after-an-answer-the-question-tool-no-longer-offered-is-a-failure-left-out-of-the-record",
    ),
    pytest.param(
        "answered",
        "answer",
        "completed",
        [tool("ask_choice", 2, ms=0.4), refusal("update_page_metadata", 2), *model_round(3)],
        "update_page_metadata",
        "held",
        "noch nicht ausgeführt",
        (),
        id="5-after-an-answer-another-call-is-held",
    ),
    pytest.param(
        None,
        "turn",
        "awaiting_approval",
        [*model_round(1), tool("chat_set_progress", 1, ms=2.0), refusal("update_page_metadata", 1)],
        "update_page_metadata",
        "held",
        "noch nicht ausgeführt",
        (),
        id="6-beside-a-proposal-a-second-write-is-held",
    ),
    pytest.param(
        None,
        "turn",
        "completed",
        [*model_round(1), tool("delete_record", 1, ms=1.3, error=True)],
        "delete_record",
        "failed",
        "fehlgeschlagen",
        (("delete_record", 1, 1),),
        id="7-a-call-the-invocation-policy-refuses-is-timed-and-failed",
    ),
]


@pytest.mark.parametrize(("follows", "trigger", "outcome", "steps", "name", "reading", "label", "tools"), ROWS)
def test_refused_calls_read_as_the_amendments_table_says(follows, trigger, outcome, steps, name, reading, label, tools):
    result = read_segment(facts(steps), trigger, follows, NEW, outcome=outcome)

    [read] = [c for c in result.calls if c.tool == name]
    assert read.reading == reading
    assert read.label == label
    assert tuple((t.name, t.calls, t.failed) for t in run_record.record_tools(result, NEW)) == tools


def test_a_call_nr_llm_no_longer_permits_asks_for_an_administrator():
    result = read_segment(
        facts([refusal("update_page_metadata", 3), *model_round(4)]), "approval", "approved", NEW, outcome="completed"
    )

    assert "Administrator" in result.calls[0].hint


@pytest.mark.parametrize(
    ("follows", "trigger", "outcome", "steps"),
    [row.values[:4] for row in ROWS],
    ids=[row.id for row in ROWS],
)
def test_before_the_amendment_every_tool_step_in_error_is_a_failed_call(follows, trigger, outcome, steps):
    result = read_segment(facts(steps), trigger, follows, OLD, outcome=outcome)

    errors = [s for s in facts(steps) if s.kind == "tool" and s.tool_is_error]
    assert [c.reading for c in result.calls if c.reading != "ran"] == ["failed"] * len(errors)


def test_a_refusal_recorded_with_a_measured_duration_reads_as_failed_again():
    steps = [tool("update_page_metadata", 3, ms=0.01, error=True), *model_round(4)]

    assert read_segment(facts(steps), "approval", "declined", NEW, outcome="completed").calls[0].reading == "failed"


def test_a_refusal_in_a_segment_that_did_not_pause_is_not_held_but_failed():
    steps = [*model_round(1), refusal("update_page_metadata", 1)]

    assert read_segment(facts(steps), "turn", None, NEW, outcome="completed").calls[0].reading == "failed"
    assert read_segment(facts(steps), "turn", None, NEW, outcome="awaiting_input").calls[0].reading == "held"


def test_a_continuations_opening_ends_at_its_first_model_round():
    steps = [tool("update_page_metadata", 3, ms=40.0), *model_round(4), refusal("update_page_metadata", 4)]

    result = read_segment(facts(steps), "approval", "approved", NEW, outcome="awaiting_approval")

    assert [(c.opening, c.reading) for c in result.calls] == [(True, "ran"), (False, "held")]


def test_a_write_step_belongs_to_the_call_before_it():
    steps = [tool("set_page_social_image", 3, ms=41.0), write("set_page_social_image", "sys_file_reference", 913, 3, None)]

    result = read_segment(facts(steps), "approval", "approved", NEW, outcome="completed")

    assert result.calls[0].write.record == "sys_file_reference:913"
    assert result.calls[0].write.completeness == "unconfirmed"


def _declined_chat(rules_id: str):
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", "Neuer Titel?", [*model_round(1)], [call()])
    chat.decide(False, "abgelehnt")
    chat.segment("approval", "completed", "Gut, nichts geändert.", [refusal("update_page_metadata", 1), *model_round(2)])
    rules = get_rule_set(rules_id)
    record, shown = run_record.initial(), activity.initial()
    for event in chat.events:
        record = run_record.apply(record, event, rules)
        shown = activity.apply(shown, event, rules)
    return record.entries, [[(e.kind, e.label) for e in s.entries] for s in shown.segments]


def test_the_activity_list_and_the_run_record_read_a_declined_card_alike():
    (card, continuation), shown = _declined_chat("2026-11-02")

    assert continuation.tools == ()
    assert card.decision == "abgelehnt"
    assert shown == [[("decision", "Von dir abgelehnt: abgelehnt")], []]  # the declined call: no entry


def test_before_the_amendment_a_declined_cards_call_shows_failed_under_von_dir_abgelehnt():
    (_, continuation), shown = _declined_chat("2026-11-01")

    assert [(t.name, t.calls, t.failed) for t in continuation.tools] == [("update_page_metadata", 1, 1)]
    assert shown == [[("decision", "Von dir abgelehnt: abgelehnt")], [("tool", "fehlgeschlagen")]]
