"""The run record read model: one entry per run segment, the newest 200 kept (spec S2–S16).

An entry holds how the segment ended and the tools that ran, with calls and failed calls.
Display-only and question tools, a declined card's calls and held calls are left out. It holds the
records written (`table:uid`, complete, partial or unconfirmed) and the calls waiting. It holds the
decision where no card outcome says it, on the decided card's segment's entry. It holds the
undecided reason and the number of card outcomes before it. Built from
`projections.steps.read_segment` only."""

from __future__ import annotations

from functools import singledispatch
from typing import Any, Literal

from domain.cards import continues_run, is_guided, records_outcome, starts_model_call
from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationEvent,
    QuestionAnswered,
    SegmentReturned,
    TurnRetried,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.values import Completeness, Immutable, trusted
from projections.dispatch import by_class
from projections.rules import RuleSet, resolve
from projections.steps import (
    LastDecision,
    SegmentReading,
    decision_after,
    decision_kind,
    read_segment,
)

Resolution = Literal["decided", "answered"]


class ToolCount(Immutable):
    """A tool that ran in a segment: `calls` and `failed` calls."""

    name: str
    """The tool's name."""
    calls: int
    """How often it was called."""
    failed: int = 0
    """How many of those calls failed."""


class Written(Immutable):
    """A record written: `table:uid` and how complete nr-llm reports the write."""

    record: str
    """The record written, `table:uid`."""
    completeness: Completeness
    """How complete nr-llm reports the write (`complete`, `partial`, `unconfirmed`)."""


class Waiting(Immutable):
    """A call left waiting for a decision: tool, record `table:uid` or None, field names."""

    tool: str
    """The call's tool."""
    record: str | None = None
    """The record it names, `table:uid`; None for a create."""
    fields: tuple[str, ...] = ()
    """The field names it names."""


class Entry(Immutable):
    """One run segment's entry in the run record."""

    segment: str
    """The segment's id."""
    trigger: str
    """What started it: `turn`, `approval`, `answer` or `retry`."""
    ending: str
    """How it ended, as nr-llm names it (`completed`, `awaiting_approval`, …, or `unknown`)."""
    tools: tuple[ToolCount, ...] = ()
    """The tools that ran, with calls and failed calls."""
    written: tuple[Written, ...] = ()
    """The records written, with their completeness."""
    waiting: tuple[Waiting, ...] = ()
    """The calls its card or question named."""
    decision: str | None = None
    """The editor's answer, where no card outcome says it."""
    undecided: str | None = None
    """Why its card or question was left undecided (`new_message`, `tour_ended`)."""
    decidable_elsewhere: bool = False
    """Whether the run may still be decided in AI Tasks (an ordinary chat's card)."""
    card_outcomes_before: int = 0
    """How many card outcomes existed before it (orders notes at one place)."""
    message: int = 0
    """The newest user message when it returned (where its note goes)."""
    flagged: bool = False
    """Whether its answer was flagged nothingSaved."""
    resolved: Resolution | None = None
    """Whether its card was decided or its question answered since (then nothing waits)."""
    seq: int = 0
    """The version of the event that recorded it (its place in time)."""

    def to_json(self) -> dict[str, Any]:
        """Returns the entry as `replay --json` shapes a `record` item (docs/spec-map.md, D15)."""
        return {
            "segment": self.segment,
            "trigger": self.trigger,
            "ending": self.ending,
            "tools": [{"name": t.name, "calls": t.calls, "failed": t.failed} for t in self.tools],
            "written": [{"record": w.record, "completeness": w.completeness} for w in self.written],
            "waiting": [{"tool": w.tool, "record": w.record, "fields": list(w.fields)} for w in self.still_waiting],
            "decision": self.decision,
            "undecided": self.undecided,
            "card_outcomes_before": self.card_outcomes_before,
        }

    @property
    def still_waiting(self) -> tuple[Waiting, ...]:
        """Returns the calls still waiting for a decision: none once decided, answered or left."""
        return () if self.resolved or self.undecided else self.waiting

    @property
    def empty(self) -> bool:
        """Returns True when nothing ran, was written, decided, waits or was left undecided. Its note
        is evicted first."""
        return not (self.tools or self.written or self.waiting or self.decision or self.undecided)


class PendingApproval(Immutable):
    """An approval of a guided card whose outcome waits for the continuation of `run`."""

    card: str
    """The approved card's segment."""
    run: str
    """The run whose continuation brings the outcome."""
    answer: str
    """The editor's answer."""


class RunRecord(Immutable):
    """The run record of one conversation."""

    entries: tuple[Entry, ...] = ()
    """The newest entries (at most the rule set's `record_entries`), oldest first."""
    dropped: int = 0
    """How many entries the cap evicted."""
    follow: LastDecision | None = None
    """The decision or answer the next continuation follows."""
    open_waits: dict[str, str | None] = {}
    """Each segment whose card or question waits: its run (guided) or None (an ordinary card)."""
    pending: PendingApproval | None = None
    """An approved guided card whose outcome its continuation has still to bring: when another
    segment or a new model call comes first there will be no outcome, so the decision goes on
    the card's entry (docs/spec-map.md, S10)."""


def initial() -> RunRecord:
    """Returns the run record of a conversation before its first event."""
    return RunRecord()


def apply(state: RunRecord, event: ConversationEvent, rules: RuleSet | str) -> RunRecord:
    """Returns the run record after `event`, read under `rules`."""
    return _APPLY(event, state, resolve(rules))


def record_tools(reading: SegmentReading, rules: RuleSet) -> tuple[ToolCount, ...]:
    """Returns the tools that ran with calls and failed calls, in order of first call. Display-only and
    question tools, a declined card's calls and held calls are left out."""
    counts: dict[str, list[int]] = {}
    question, display = rules.question_tools, rules.display_tools
    for call in reading.calls:
        read = call.reading
        if read == "held" or read == "declined":
            continue
        tool = call.tool
        if tool in question or tool in display:
            continue
        count = counts.get(tool)
        if count is None:
            count = counts[tool] = [0, 0]
        count[0] += 1
        if read == "failed" or read == "not_permitted":
            count[1] += 1
    return tuple(trusted(ToolCount, name=name, calls=c, failed=f) for name, (c, f) in counts.items())


def _update(state: RunRecord, segment: str, **changes: Any) -> tuple[Entry, ...]:
    return tuple(e.model_copy(update=changes) if e.segment == segment else e for e in state.entries)


def _close(state: RunRecord, segment: str) -> dict[str, str | None]:
    return {s: g for s, g in state.open_waits.items() if s != segment}


@singledispatch
def _apply(event: ConversationEvent, state: RunRecord, rules: RuleSet) -> RunRecord:
    return state


def _give_up(state: RunRecord) -> RunRecord:
    """Returns the state with a pending approval's decision on its card's entry: no outcome came."""
    if state.pending is None:
        return state
    entries = _update(state, state.pending.card, decision=state.pending.answer)
    return state.model_copy(update={"entries": entries, "pending": None})


@_apply.register(UserMessagePosted)
@_apply.register(TurnRetried)
def _(event: ConversationEvent, state: RunRecord, rules: RuleSet) -> RunRecord:
    return _give_up(state) if starts_model_call(event) else state


@_apply.register
def _(event: SegmentReturned, state: RunRecord, rules: RuleSet) -> RunRecord:
    return returned(state, event, rules)


def reading(event: ConversationEvent, rules: RuleSet, skim: bool = False) -> tuple[str, int | str] | None:
    """Returns what of `rules` the record's fold of `event` reads (`apply`, or `returned` with
    `skim`): nothing (None) but for a returned segment, the number of entries kept for a
    skimmed one, else the rule set. Rule sets of one reading make the same record from the
    same one (`projections.turn.apply_each`)."""
    if not isinstance(event, SegmentReturned):
        return None
    return ("kept", rules.record_entries) if skim else ("rules", rules.id)


def returned(state: RunRecord, event: SegmentReturned, rules: RuleSet, skim: bool = False) -> RunRecord:
    """Returns the run record after a returned segment. With `skim`, its entry is made without reading
    its steps (`skimmed_entry`)."""
    if not continues_run(event.trigger, event.run, state.pending.run if state.pending else None):
        state = _give_up(state)
    entry = skimmed_entry(event) if skim else new_entry(event, state.follow, rules)
    entries = (*state.entries, entry)
    overflow = max(0, len(entries) - rules.record_entries)
    open_waits = state.open_waits
    if event.outcome in ("awaiting_approval", "awaiting_input"):
        open_waits = {**open_waits, event.segment: waits_on(event)}
    return state.model_copy(
        update={
            "entries": entries[overflow:],
            "dropped": state.dropped + overflow,
            "follow": decision_after(state.follow, event),
            "open_waits": open_waits,
            "pending": None,
        }
    )


def waits_on(event: SegmentReturned) -> str | None:
    """Returns a waiting guided card's run, or None for an ordinary card."""
    return event.run if is_guided(event) else None


def skimmed_entry(event: SegmentReturned) -> Entry:
    """Returns a segment's entry without tools, writes or waiting calls. It stands for an entry no one
    reads; the record counts, orders and drops it as a full one."""
    return trusted(
        Entry,
        segment=event.segment,
        trigger=event.trigger,
        ending=event.outcome,
        tools=(),
        written=(),
        waiting=(),
        card_outcomes_before=event.card_outcomes_before,
        message=event.message,
        flagged=event.nothing_saved,
        seq=event.originator_version,
    )


def new_entry(event: SegmentReturned, follow: LastDecision | None, rules: RuleSet) -> Entry:
    """Returns the run record entry of a returned segment, read under `rules` after `follow`
    (what its continuation follows). The one reading both the folded and the row read models use."""
    return read_entry(event, follow, rules)[0]


def read_entry(event: SegmentReturned, follow: LastDecision | None, rules: RuleSet) -> tuple[Entry, SegmentReading]:
    """Returns `new_entry` of the segment and the reading it was built from (which the row
    fold's usage row reads too, `projections.usage.usage_row`: the segment is read once)."""
    follows = decision_kind(event.trigger, follow)
    reading = read_segment(event.steps, event.trigger, follows, rules, outcome=event.outcome)
    # built from the event's validated fields, so not validated again (`domain.values.trusted`)
    entry = trusted(
        Entry,
        segment=event.segment,
        trigger=event.trigger,
        ending=event.outcome,
        tools=record_tools(reading, rules),
        written=tuple(trusted(Written, record=w.record, completeness=w.completeness) for w in reading.writes),
        waiting=tuple(
            trusted(Waiting, tool=w.tool_name, record=str(w.target) if w.target else None, fields=w.fields) for w in event.waiting
        ),
        card_outcomes_before=event.card_outcomes_before,
        message=event.message,
        flagged=event.nothing_saved,
        seq=event.originator_version,
    )
    return entry, reading


@_apply.register
def _(event: CardDecided, state: RunRecord, rules: RuleSet) -> RunRecord:
    decision, pending = decided(event, state.open_waits.get(event.segment))
    follow = decision_after(state.follow, event)
    entries = _update(state, event.segment, resolved="decided", decision=decision)
    return state.model_copy(
        update={"entries": entries, "follow": follow, "open_waits": _close(state, event.segment), "pending": pending}
    )


def decided(event: CardDecided, run: str | None) -> tuple[str | None, PendingApproval | None]:
    """Returns the decision a card's entry records and the approval whose outcome is to come. The entry
    names the decision only where no card outcome will say it."""
    said_by_outcome = records_outcome(run is not None, event.answer)
    decision = None if said_by_outcome else event.answer
    # said_by_outcome holds only for a guided card, whose run is set.
    pending = (
        PendingApproval(card=event.segment, run=run, answer=event.answer)
        if said_by_outcome and event.approved and run is not None
        else None
    )
    return decision, pending


@_apply.register
def _(event: QuestionAnswered, state: RunRecord, rules: RuleSet) -> RunRecord:
    follow = decision_after(state.follow, event)
    entries = _update(state, event.segment, resolved="answered")
    return state.model_copy(update={"entries": entries, "follow": follow, "open_waits": _close(state, event.segment)})


@_apply.register
def _(event: CardLeftUndecided, state: RunRecord, rules: RuleSet) -> RunRecord:
    entries = _update(state, event.segment, undecided=event.reason, decidable_elsewhere=event.decidable_elsewhere)
    return state.model_copy(update={"entries": entries, "open_waits": _close(state, event.segment)})


@_apply.register
def _(event: TurnsTruncated, state: RunRecord, rules: RuleSet) -> RunRecord:
    cut = set(event.cut_segments)
    follow = decision_after(state.follow, event)
    return state.model_copy(
        update={
            "entries": tuple(e for e in state.entries if e.segment not in cut),
            "follow": follow,
            "open_waits": {s: g for s, g in state.open_waits.items() if s not in cut},
            "pending": state.pending if state.pending and state.pending.card not in cut else None,
        }
    )


_APPLY = by_class(_apply)
"""The dispatch the fold calls (`projections.dispatch`), made after every branch above is registered."""
