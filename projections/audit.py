"""The audit: a conversation's whole history as rows, in order, each with its time.

It folds the full log, unlike the run record's newest 200 entries. Rows cover segments with their
calls as read, writes, waiting calls, decisions, card outcomes, undecided cards, edits and cuts.
Each segment carries its usage (`projections.usage`). Calls and card outcomes are read as the run
record reads them, under the given rule set. Facts only: no tool arguments or results, no model or
user text.

Example:
    rows = audit(store.events("conv-demo-seo"), "2026-11-02")
    [row.to_json() for row in rows]"""

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
from projections.usage import segment_usage


@dataclass(frozen=True)
class AuditRow:
    """One fact of the history. `version` and `at` are its event's. `kind` is one of `started`,
    `message`, `skill`, `segment`, `decision`, `card_outcome`, `answer`, `undecided`, `retry`,
    `tour_ended`, `edit`, `cut`, `transcript_replaced`, `legacy_row`. `cut` is True once a later
    edit cut it. `outcome` is a `card_outcome` row's card outcome (its `seq`)."""

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


@dataclass
class _Fold:
    """The audit while events are folded; its rows list grows in place."""

    rows: list[AuditRow]
    follow: LastDecision | None
    outcomes: CardOutcomes


def initial() -> AuditState:
    """Returns the audit of a conversation before its first event."""
    return AuditState()


def apply(state: AuditState, event: ConversationEvent, rules: RuleSet | str) -> AuditState:
    """Returns the audit after `event`: its own rows, then the card outcomes it recorded. It copies
    `state`'s rows once; use `fold` for many events."""
    return fold(state, (event,), rules)


def fold(state: AuditState, events: Iterable[ConversationEvent], rules: RuleSet | str, *, outcomes: bool = True) -> AuditState:
    """Returns the audit after `events`, as repeated `apply` would, in time linear in the rows. `state`
    is not changed. `outcomes=False` leaves out the `card_outcome` rows; the rest, and which rows
    are cut, is the same."""
    rules = resolve(rules)
    acc = _Fold(list(state.rows), state.follow, state.outcomes)
    for event in events:
        if outcomes:
            _step(acc, event, rules)
        else:
            _apply(event, acc, rules)
    return AuditState(tuple(acc.rows), acc.follow, acc.outcomes)


def audit(events: Iterable[ConversationEvent], rules: RuleSet | str) -> list[AuditRow]:
    """Returns the audit rows of a conversation's full event log, in order, read under `rules`."""
    rules = resolve(rules)
    acc = _Fold([], None, CardOutcomes())
    for event in events:
        _step(acc, event, rules)
    return acc.rows


def _step(acc: _Fold, event: ConversationEvent, rules: RuleSet) -> None:
    """Folds `event` into `acc` in place: its own rows, then the card outcomes it recorded."""
    before = acc.outcomes.count
    _apply(event, acc, rules)
    outcomes = card_outcomes.apply(acc.outcomes, event, rules)
    if isinstance(event, TurnsTruncated):  # cut exactly the outcomes the fold let go, legacy ones too
        live = {o.seq for o in outcomes.outcomes}
        acc.rows[:] = [replace(r, cut=True) if r.outcome is not None and r.outcome not in live else r for r in acc.rows]
        before = outcomes.count  # a cut only removes
    acc.rows.extend(_outcome_row(event, o) for o in outcomes.since(before))  # a fold appends
    acc.outcomes = outcomes


# ---------------------------------------------------------------- one branch per event


def _row(acc: _Fold, event: ConversationEvent, kind: str, **facts: Any) -> None:
    acc.rows.append(AuditRow(version=event.originator_version, at=event.timestamp, kind=kind, facts=facts))


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
def _apply(event: ConversationEvent, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, type(event).__name__)


@_apply.register
def _(event: ConversationStarted, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "started", conversation=event.conversation, conversation_kind=event.kind, owner=event.owner)


@_apply.register
def _(event: UserMessagePosted, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "message", message=event.message, page=event.page, skill=event.skill)


@_apply.register
def _(event: SkillLoaded, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "skill", skill=event.skill)


@_apply.register
def _(event: SegmentReturned, acc: _Fold, rules: RuleSet) -> None:
    follows = decision_kind(event.trigger, acc.follow)
    reading = read_segment(event.steps, event.trigger, follows, rules, outcome=event.outcome)
    counts: dict[tuple[str, str], int] = {}
    for call in reading.calls:
        counts[(call.tool, call.reading)] = counts.get((call.tool, call.reading), 0) + 1
    _row(
        acc,
        event,
        "segment",
        segment=event.segment,
        run=event.run,
        trigger=event.trigger,
        follows=follows,
        outcome=event.outcome,
        message=event.message,
        calls=[{"tool": tool, "reading": reading, "count": n} for (tool, reading), n in counts.items()],
        written=[{"record": w.record, "completeness": w.completeness, "hook_failed": w.hook_failed} for w in reading.writes],
        waiting=[
            {"tool": w.tool_name, "record": str(w.target) if w.target else None, "fields": list(w.fields)} for w in event.waiting
        ],
        flagged=event.nothing_saved,
        usage=segment_usage(event, reading).model_dump(),
    )
    acc.follow = decision_after(acc.follow, event)


@_apply.register
def _(event: CardDecided, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "decision", segment=event.segment, approved=event.approved, answer=event.answer)
    acc.follow = decision_after(acc.follow, event)


@_apply.register
def _(event: QuestionAnswered, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "answer", segment=event.segment, message=event.message)
    acc.follow = decision_after(acc.follow, event)


@_apply.register
def _(event: CardLeftUndecided, acc: _Fold, rules: RuleSet) -> None:
    _row(
        acc,
        event,
        "undecided",
        segment=event.segment,
        waiting=event.waiting_kind,
        reason=event.reason,
        decidable_elsewhere=event.decidable_elsewhere,
    )


@_apply.register
def _(event: TurnRetried, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "retry", message=event.message)


@_apply.register
def _(event: TourEnded, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "tour_ended")


@_apply.register
def _(event: MessageEdited, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "edit", message=event.message)


@_apply.register
def _(event: TurnsTruncated, acc: _Fold, rules: RuleSet) -> None:
    segments, cards, messages = set(event.cut_segments), set(event.cut_cards), set(event.cut_messages)
    acc.rows[:] = [replace(row, cut=True) if _is_cut(row, segments, cards, messages) else row for row in acc.rows]
    acc.follow = decision_after(acc.follow, event)
    _row(
        acc,
        event,
        "cut",
        after_message=event.after_message,
        messages=list(event.cut_messages),
        segments=list(event.cut_segments),
        cards=list(event.cut_cards),
    )


def _is_cut(row: AuditRow, segments: set[str], cards: set[str], messages: set[int]) -> bool:
    if row.kind in ("segment", "undecided", "answer"):
        return row.facts["segment"] in segments
    if row.kind == "decision":
        return row.facts["segment"] in cards or row.facts["segment"] in segments
    if row.kind in ("message", "retry"):
        return row.facts["message"] in messages
    return row.cut


@_apply.register
def _(event: TranscriptReplaced, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "transcript_replaced", messages=len(event.messages))


@_apply.register
def _(event: ConversationErased, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "erased")


@_apply.register
def _(event: LegacyRowImported, acc: _Fold, rules: RuleSet) -> None:
    _row(acc, event, "legacy_row", messages=len(event.messages), card_outcomes=len(event.card_outcomes))
