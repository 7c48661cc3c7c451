"""Card outcomes are derived from the decision and the continuation that follows it."""

from __future__ import annotations

import pytest
from factories import SKILL, Chat, call, model_round, refusal, seo_tour, tool, write

from domain.values import LegacyCardOutcome, RecordRef
from projections import card_outcomes
from projections.card_outcomes import CardOutcomes
from projections.rules import get_rule_set
from projections.turn import build_turn_input

RULES = get_rule_set("2026-11-02")


def fold(chat: Chat, rules=RULES) -> CardOutcomes:
    state = card_outcomes.initial()
    for event in chat.events:
        state = card_outcomes.apply(state, event, rules)
    return state


def approved(opening, outcome: str = "completed") -> list[str]:
    chat = Chat()
    chat.user("SEO optimieren", page=42, skill=SKILL)
    chat.segment("turn", "awaiting_approval", "Titel?", [*model_round(1)], [call()])
    chat.decide(True, "Übernehmen")
    chat.segment("approval", outcome, None, [*opening, *model_round(2)])
    return [o.outcome for o in fold(chat).outcomes]


@pytest.mark.parametrize(
    ("opening", "ending", "expected"),
    [
        pytest.param([tool("update_page_metadata", 1, error=True)], "completed", "not_applied", id="tool-step-in-error"),
        pytest.param([tool("update_page_metadata", 1)], "completed", "not_applied", id="no-write-step"),
        pytest.param([tool("update_page_metadata", 1)], "lease_lost", "check", id="no-write-step-lease-lost"),
        pytest.param([], "cancelled", "check", id="no-step-run-cancelled"),
        pytest.param(
            [tool("update_page_metadata", 1), write("update_page_metadata", "pages", 42, 1, "complete", True)],
            "completed",
            "check",
            id="hook-failed-after-write",
        ),
        pytest.param(
            [tool("update_page_metadata", 1), write("update_page_metadata", "pages", 42, 1, "complete")],
            "completed",
            "applied",
            id="complete",
        ),
        pytest.param(
            [tool("update_page_metadata", 1), write("update_page_metadata", "pages", 42, 1, "partial")],
            "completed",
            "not_applied",
            id="partial",
        ),
        pytest.param(
            [tool("update_page_metadata", 1), write("update_page_metadata", "pages", 42, 1, None)],
            "completed",
            "check",
            id="unstated-completeness",
        ),
        pytest.param([refusal("update_page_metadata", 1)], "completed", "not_applied", id="no-longer-permitted"),
    ],
)
def test_an_approved_card_is_read_as_the_chat_reads_an_approved_call(opening, ending, expected):
    assert approved(opening, ending) == [expected]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("Behalten", "kept"), ("Überspringen", "skipped"), ("Andere Variante", "variant")],
)
def test_a_decline_records_its_answer(answer, expected):
    chat = Chat()
    seo_tour(chat, [answer])

    [outcome] = fold(chat).outcomes

    assert (outcome.outcome, outcome.answer, outcome.tool, outcome.record, outcome.fields) == (
        expected,
        answer,
        "update_page_metadata",
        "pages:42",
        ("title",),
    )


def test_a_plain_denial_records_no_card_outcome():
    chat = Chat()
    seo_tour(chat, ["abgelehnt"])

    assert fold(chat).outcomes == ()


def test_a_skip_sits_after_the_readers_answer_message():
    chat = Chat()
    seo_tour(chat, ["Überspringen"])

    # transcript: user "SEO optimieren", assistant proposal, user "Überspringen"
    assert fold(chat).outcomes[0].after == 3


def test_an_approved_outcome_sits_before_the_continuations_answer():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Übernehmen"])

    assert [(o.fields, o.after) for o in fold(chat).outcomes] == [(("title",), 2), (("og_image",), 2)]


def test_an_ordinary_cards_decision_has_no_card_outcome():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", None, [*model_round(1)], [call()])
    chat.decide(True, "Übernehmen")
    chat.segment(
        "approval",
        "completed",
        "Erledigt.",
        [tool("update_page_metadata", 1), write("update_page_metadata", "pages", 42, 1), *model_round(2)],
    )

    assert fold(chat).outcomes == ()


def test_a_legacy_rows_card_outcomes_are_kept_with_their_positions():
    chat = Chat()
    chat.legacy(
        [("user", "SEO"), ("assistant", "Titel?"), ("assistant", "Gespeichert.")],
        [
            LegacyCardOutcome(
                outcome="applied", after=2, tool="update_page_metadata", target=RecordRef(table="pages", uid=7), fields=("title",)
            )
        ],
    )

    assert [o.to_json() for o in fold(chat).outcomes] == [
        {"outcome": "applied", "tool": "update_page_metadata", "record": "pages:7", "fields": ["title"], "after": 2}
    ]


def test_outcomes_survive_a_json_round_trip():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten"])
    state = fold(chat)

    assert CardOutcomes.model_validate(state.model_dump(mode="json")) == state


def _approved_then_abandoned(chat: Chat) -> None:
    """A guided card approved whose run never continues; the tour ends, another card's run
    (outside the tour) is approved and its continuation writes."""
    chat.user("SEO", page=42, skill=SKILL)
    chat.segment("turn", "awaiting_approval", "Titel?", [*model_round(1)], [call(fields=("title",))], run="r1")
    chat.decide(True, "Übernehmen")
    chat.end_tour()
    chat.user("Beschreibung", page=42, skill=SKILL)
    chat.segment("turn", "awaiting_approval", "Beschreibung?", [*model_round(1)], [call(fields=("description",))], run="r2")
    chat.decide(True, "Übernehmen")
    chat.segment(
        "approval",
        "completed",
        "Gespeichert.",
        [tool("update_page_metadata", 1, ms=40.0), write("update_page_metadata", "pages", 42, 1), *model_round(2)],
        run="r2",
    )


def test_an_approvals_outcome_comes_only_from_its_own_runs_continuation():
    chat = Chat()
    _approved_then_abandoned(chat)

    assert [(o.fields, o.outcome) for o in fold(chat).outcomes] == [(("description",), "applied")]


def test_card_outcomes_before_counts_exactly_the_card_outcomes_that_came_first():
    chat = Chat()
    _approved_then_abandoned(chat)
    chat.user("Und?", page=42)
    turn = build_turn_input(chat.events)

    assert [e.card_outcomes_before for e in turn.record] == [0, 0, 1]
    assert len(turn.card_outcomes) == 1


def test_a_fold_appends_its_outcomes_to_one_list_each_state_reading_its_own() -> None:
    """The outcomes are held as the fold appends them: each state reads the outcomes it had
    then (`outcomes`, `count`, `since`), and the states of one fold share one list."""
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten", "Überspringen"])
    states, state = [], card_outcomes.initial()
    for event in chat.events:
        state = card_outcomes.apply(state, event, RULES)
        states.append(state)

    counts = [s.count for s in states]
    grew = [i for i in range(1, len(states)) if counts[i] > counts[i - 1]]

    assert [s.count for s in states] == [len(s.outcomes) for s in states]
    assert counts[-1] == 3 and [states[i].since(counts[i - 1]) for i in grew] == [(o,) for o in states[-1].outcomes]
    assert [o.outcome for o in states[-1].outcomes] == ["applied", "kept", "skipped"]
    assert states[grew[0]].outcomes == states[-1].outcomes[:1]  # unchanged by the appends after it
    assert states[grew[0]]._list is states[-1]._list
    # a branch from an earlier state copies its own prefix; the later states keep theirs
    branch = card_outcomes.apply(states[grew[1] - 1], chat.events[grew[1]], RULES)
    assert branch == states[grew[1]] and branch._list is not states[-1]._list
    assert [o.outcome for o in states[-1].outcomes] == ["applied", "kept", "skipped"]
