"""The audit: a conversation's whole history as rows, in order, each with its time.

Unlike the run record (the newest 200 entries), the audit folds the full event log: every
segment with its trigger, outcome and tool calls as read (ran, failed, held, declined, not
permitted), the records written with their completeness, the calls left waiting, every
decision with its answer, the card outcomes read from them, every card or question left
undecided, every edit and what it cut. Calls are read by `projections.steps.read_segment` and
card outcomes by `projections.card_outcomes`, under the rule set given, so audit, run record
and activity list cannot disagree. Facts only: no tool arguments or results (the events have
none), no model or user text.

Example:
    rows = audit(store.events("conv-demo-seo"), "2026-11-02")
    [row.to_json() for row in rows]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import singledispatch
from typing import Any

from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationErased,
    ConversationEvent,
    ConversationStarted,
    LegacyRowImported,
    MessageEdited,
    QuestionAnswered,
    SegmentReturned,
    SkillLoaded,
    TourEnded,
    TranscriptReplaced,
    TurnRetried,
    TurnsTruncated,
    UserMessagePosted,
)
from projections import card_outcomes
from projections.card_outcomes import CardOutcome, CardOutcomes
from projections.rules import RuleSet, resolve
from projections.steps import LastDecision, decision_after, decision_kind, read_segment
from projections.turn import iso


@dataclass(frozen=True)
class AuditRow:
    """One fact of the history: the `version` and time `at` of the event it comes from, its
    `kind` (`started`, `message`, `skill`, `segment`, `decision`, `card_outcome`, `answer`,
    `undecided`, `retry`, `tour_ended`, `edit`, `cut`, `transcript_replaced`, `legacy_row`),
    its `facts`, and `cut`: True once a later edit cut it away. `outcome` is the card
    outcome a `card_outcome` row shows (its `seq`), so a cut is read from the card outcomes fold."""

    version: int
    at: datetime
    kind: str
    facts: dict[str, Any] = field(default_factory=dict)
    cut: bool = False
    outcome: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """Returns `{"version", "at", "kind", …facts, "cut"}`, JSON-ready."""
        return {"version": self.version, "at": iso(self.at), "kind": self.kind, **self.facts, "cut": self.cut}


@dataclass(frozen=True)
class AuditState:
    """The rows so far, what the next continuation follows, and the card outcomes fold."""

    rows: tuple[AuditRow, ...] = ()
    follow: LastDecision | None = None
    outcomes: CardOutcomes = CardOutcomes()


def initial() -> AuditState:
    """Returns the audit of a conversation before its first event."""
    return AuditState()


def apply(state: AuditState, event: ConversationEvent, rules: RuleSet | str) -> AuditState:
    """Returns the audit after `event`: its own rows, then the card outcomes it recorded."""
    rules = resolve(rules)
    state = _apply(event, state, rules)
    outcomes = card_outcomes.apply(state.outcomes, event, rules)
    rows = state.rows
    if isinstance(event, TurnsTruncated):  # cut exactly the outcomes the fold let go, legacy ones too
        live = {o.seq for o in outcomes.outcomes}
        rows = tuple(replace(r, cut=True) if r.outcome is not None and r.outcome not in live else r for r in rows)
    added = outcomes.outcomes[len(state.outcomes.outcomes):]  # a fold appends; only a cut removes
    new = tuple(_outcome_row(event, o) for o in added)
    return replace(state, rows=rows + new, outcomes=outcomes)


def audit(events: Iterable[ConversationEvent], rules: RuleSet | str) -> list[AuditRow]:
    """Returns the audit rows of a conversation's full event log, in order, read under `rules`."""
    rules = resolve(rules)
    state = initial()
    for event in events:
        state = apply(state, event, rules)
    return list(state.rows)


# ---------------------------------------------------------------- one branch per event


def _row(state: AuditState, event: ConversationEvent, kind: str, **facts: Any) -> AuditState:
    row = AuditRow(version=event.originator_version, at=event.timestamp, kind=kind, facts=facts)
    return replace(state, rows=(*state.rows, row))


def _outcome_row(event: ConversationEvent, outcome: CardOutcome) -> AuditRow:
    return AuditRow(
        version=event.originator_version,
        at=event.timestamp,
        kind="card_outcome",
        facts={
            "card": outcome.card,
            "outcome": outcome.outcome,
            "tool": outcome.tool,
            "record": outcome.record,
            "fields": list(outcome.fields),
            "answer": outcome.answer,
        },
        outcome=outcome.seq,
    )


@singledispatch
def _apply(event: ConversationEvent, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, type(event).__name__)


@_apply.register
def _(event: ConversationStarted, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "started", conversation=event.conversation, conversation_kind=event.kind,
                owner=event.owner)


@_apply.register
def _(event: UserMessagePosted, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "message", message=event.message, page=event.page, skill=event.skill)


@_apply.register
def _(event: SkillLoaded, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "skill", skill=event.skill)


@_apply.register
def _(event: SegmentReturned, state: AuditState, rules: RuleSet) -> AuditState:
    follows = decision_kind(event.trigger, state.follow)
    reading = read_segment(event.steps, event.trigger, follows, rules, outcome=event.outcome)
    counts: dict[tuple[str, str], int] = {}
    for call in reading.calls:
        counts[(call.tool, call.reading)] = counts.get((call.tool, call.reading), 0) + 1
    state = _row(
        state,
        event,
        "segment",
        segment=event.segment,
        run=event.run,
        trigger=event.trigger,
        follows=follows,
        outcome=event.outcome,
        message=event.message,
        calls=[{"tool": tool, "reading": reading, "count": n} for (tool, reading), n in counts.items()],
        written=[
            {"record": w.record, "completeness": w.completeness, "hook_failed": w.hook_failed}
            for w in reading.writes
        ],
        waiting=[
            {"tool": w.tool_name, "record": str(w.target) if w.target else None, "fields": list(w.fields)}
            for w in event.waiting
        ],
        flagged=event.nothing_saved,
    )
    return replace(state, follow=decision_after(state.follow, event))


@_apply.register
def _(event: CardDecided, state: AuditState, rules: RuleSet) -> AuditState:
    state = _row(state, event, "decision", segment=event.segment, approved=event.approved, answer=event.answer)
    return replace(state, follow=decision_after(state.follow, event))


@_apply.register
def _(event: QuestionAnswered, state: AuditState, rules: RuleSet) -> AuditState:
    state = _row(state, event, "answer", segment=event.segment, message=event.message)
    return replace(state, follow=decision_after(state.follow, event))


@_apply.register
def _(event: CardLeftUndecided, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "undecided", segment=event.segment, waiting=event.waiting_kind,
                reason=event.reason, decidable_elsewhere=event.decidable_elsewhere)


@_apply.register
def _(event: TurnRetried, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "retry", message=event.message)


@_apply.register
def _(event: TourEnded, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "tour_ended")


@_apply.register
def _(event: MessageEdited, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "edit", message=event.message)


@_apply.register
def _(event: TurnsTruncated, state: AuditState, rules: RuleSet) -> AuditState:
    segments, cards, messages = set(event.cut_segments), set(event.cut_cards), set(event.cut_messages)
    rows = tuple(replace(row, cut=True) if _is_cut(row, segments, cards, messages) else row for row in state.rows)
    follow = decision_after(state.follow, event)
    state = replace(state, rows=rows, follow=follow)
    return _row(state, event, "cut", after_message=event.after_message, messages=list(event.cut_messages),
                segments=list(event.cut_segments), cards=list(event.cut_cards))


def _is_cut(row: AuditRow, segments: set[str], cards: set[str], messages: set[int]) -> bool:
    if row.kind in ("segment", "undecided", "answer"):
        return row.facts["segment"] in segments
    if row.kind == "decision":
        return row.facts["segment"] in cards or row.facts["segment"] in segments
    if row.kind in ("message", "retry"):
        return row.facts["message"] in messages
    return row.cut


@_apply.register
def _(event: TranscriptReplaced, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "transcript_replaced", messages=len(event.messages))


@_apply.register
def _(event: ConversationErased, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "erased")


@_apply.register
def _(event: LegacyRowImported, state: AuditState, rules: RuleSet) -> AuditState:
    return _row(state, event, "legacy_row", messages=len(event.messages), card_outcomes=len(event.card_outcomes))
