"""The card outcomes read model (docs/spec-map.md, D12–D14).

Only a guided card's decision has card outcomes; the run record carries an ordinary card's. An
approval's outcome is read from its continuation:
- tool step in error: `not_applied`;
- no write step: `check` if the run was cancelled, lost its lease or failed, else `not_applied`;
- a write with a hook failure: `check`;
- completeness `complete`: `applied`; `partial`: `not_applied`; unstated: `check`.

A decline records at once: `skipped` (Überspringen), `variant` (Andere Variante), `kept` (Behalten).
A plain denial (`abgelehnt`) records none (spec S10, D12). Legacy rows may hold `declined`. `after`
is the transcript length when the outcome was recorded."""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatch
from typing import Any, cast

from pydantic import ModelWrapValidatorHandler, PrivateAttr, TypeAdapter, computed_field, model_validator

from domain.cards import continues_run, is_guided, records_outcome, starts_model_call
from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationEvent,
    LegacyRowImported,
    SegmentReturned,
    TurnRetried,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.values import Immutable, WaitingCall
from projections.dispatch import by_class
from projections.positions import Positions, advance
from projections.prefix_list import extended, taken
from projections.rules import RuleSet, resolve
from projections.steps import CallReading, read_segment

DECLINES = {"Überspringen": "skipped", "Andere Variante": "variant", "Behalten": "kept"}
ENDED_UNCLEAR = frozenset({"cancelled", "lease_lost", "failed"})


class CardOutcome(Immutable):
    """One card outcome. `outcome`; the card's `tool`; `record` (`table:uid`, None for a create);
    `fields`; transcript position `after`; `card`, the decided card's segment (None for a legacy
    row); `answer`, the editor's; `index`, how many outcomes came before; `seq`, the recording
    event's version."""

    outcome: str
    """`applied`, `check`, `not_applied` (an approval's), `kept`, `skipped`, `variant` (a
    decline's), or `declined` (legacy rows only)."""
    tool: str
    """The tool of the card's call."""
    record: str | None = None
    """The record the call names, `table:uid`; None for a create."""
    fields: tuple[str, ...] = ()
    """The field names the call names."""
    after: int = 0
    """The transcript position the outcome comes after."""
    card: str | None = None
    """The decided card's segment; None for a legacy row's outcome."""
    answer: str | None = None
    """The editor's answer to the card."""
    index: int = 0
    """How many card outcomes came before it."""
    seq: tuple[int, int] = (0, 0)
    """The version of the event that recorded it, and its place among that event's outcomes."""

    def to_json(self) -> dict[str, Any]:
        """Returns the outcome as the `replay --json` contract shapes it (docs/spec-map.md, D15)."""
        return {
            "outcome": self.outcome,
            "tool": self.tool,
            "record": self.record,
            "fields": list(self.fields),
            "after": self.after,
        }


class OpenCard(Immutable):
    """A waiting card of a guided process: its segment's `run` and the calls it names."""

    run: str
    """The run of the card's segment."""
    calls: tuple[WaitingCall, ...]
    """The calls the card names."""


class Approval(Immutable):
    """An approved guided card whose continuation has not returned yet. Its outcomes come with the next
    segment of its `run` that continues it. Any other segment, or a new model call, gives them up."""

    card: str
    """The approved card's segment."""
    run: str
    """The run whose continuation brings the outcomes."""
    answer: str
    """The editor's answer (Übernehmen)."""
    calls: tuple[WaitingCall, ...]
    """The calls the card names."""


class CardOutcomes(Immutable):
    """Card outcomes of one conversation, in order. `open_cards`: the guided cards waiting. `approval`:
    the card awaiting its continuation. `positions`: the transcript's. `model_dump` includes
    `outcomes`. Appending one outcome costs O(1) amortised: the fold's states share one list, each
    reading its prefix. `outcomes` builds its tuple once; `count` and `since` do not build it."""

    open_cards: dict[str, OpenCard] = {}
    """The guided cards waiting, by segment."""
    approval: Approval | None = None
    """The approved card whose continuation has not returned yet, None when none."""
    positions: Positions = Positions()
    """The transcript's positions, where each outcome is placed."""
    _list: list[CardOutcome] | None = PrivateAttr(default=None)  # set by every constructor (see Transcript._done)
    _n: int = PrivateAttr(default=0)
    _tuple: tuple[CardOutcome, ...] | None = PrivateAttr(default=None)

    def __init__(self, *, outcomes: Sequence[CardOutcome] = (), **fields: Any) -> None:
        given: dict[str, Any] = {"outcomes": outcomes, **fields}  # `outcomes` taken by `_given_outcomes`
        super().__init__(**given)

    @model_validator(mode="wrap")
    @classmethod
    def _given_outcomes(cls, data: Any, handler: ModelWrapValidatorHandler[CardOutcomes]) -> CardOutcomes:
        """Takes `outcomes` (card outcomes or their dicts) beside the model's fields."""
        data, given = taken(data, "outcomes")
        made = handler(data)
        return _holding(made, _OUTCOMES.validate_python(given) if given else ())

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented way: a property under it
    @property
    def outcomes(self) -> tuple[CardOutcome, ...]:
        """Every card outcome, in the order they came."""
        held = _held(self)
        built: tuple[CardOutcome, ...] | None = held["_tuple"]
        if built is None:
            built = held["_tuple"] = tuple(held["_list"][: held["_n"]])
        return built

    @property
    def count(self) -> int:
        """How many card outcomes there are, without building the tuple."""
        return int(_held(self)["_n"])

    def since(self, before: int) -> tuple[CardOutcome, ...]:
        """Returns `outcomes[before:]`: what a fold appended since it held `before`."""
        held = _held(self)
        return tuple(held["_list"][before : held["_n"]])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CardOutcomes):
            return NotImplemented
        return (self.outcomes, self.open_cards, self.approval, self.positions) == (
            other.outcomes,
            other.open_cards,
            other.approval,
            other.positions,
        )

    def __hash__(self) -> int:
        return hash((self.outcomes, self.approval, self.positions))


_OUTCOMES = TypeAdapter(tuple[CardOutcome, ...])


def _held(state: CardOutcomes) -> dict[str, Any]:
    held = state.__pydantic_private__
    assert held is not None  # set by validation and by `with_outcomes`
    return held


def with_outcomes(state: CardOutcomes, update: dict[str, Any], added: tuple[CardOutcome, ...] = ()) -> CardOutcomes:
    """Returns `state` with `update` applied and `added` appended, in O(len(added)) amortised."""
    made = state.model_copy(update=update)  # shares `state`'s list and its count
    if not added:
        return made
    held = _held(made)
    n = held["_n"]
    made.__pydantic_private__ = {"_list": extended(held["_list"], n, added), "_n": n + len(added), "_tuple": None}
    return made


def held_outcomes(outcomes: tuple[CardOutcome, ...]) -> CardOutcomes:
    """Returns card outcomes holding `outcomes` and nothing else: the state a turn read builds from rows."""
    return _holding(CardOutcomes(), outcomes)


def _holding(made: CardOutcomes, outcomes: tuple[CardOutcome, ...]) -> CardOutcomes:
    """Returns `made`, set to hold exactly `outcomes` (a list of its own, all of it read)."""
    made.__pydantic_private__ = {"_list": list(outcomes), "_n": len(outcomes), "_tuple": outcomes}
    return made


def initial() -> CardOutcomes:
    """Returns the card outcomes of a conversation before its first event."""
    return CardOutcomes()


def apply(state: CardOutcomes, event: ConversationEvent, rules: RuleSet | str) -> CardOutcomes:
    """Returns the card outcomes after `event`, read under `rules`."""
    return _APPLY(event, state, resolve(rules))


def approved_outcome(call: CallReading | None, ending: str) -> str:
    """Returns the outcome of an approved call read from its continuation's opening call."""
    if call is not None and call.reading != "ran":
        return "not_applied"
    if call is None or call.write is None:
        return "check" if ending in ENDED_UNCLEAR else "not_applied"
    if call.write.hook_failed:
        return "check"
    return {"complete": "applied", "partial": "not_applied"}.get(call.write.completeness, "check")


def declined_outcome(answer: str) -> str:
    """Returns the outcome a declined card records for the editor's `answer`."""
    return DECLINES.get(answer, "declined")


def _outcome(call: WaitingCall, outcome: str, card: str, answer: str, at: tuple[int, int], seq: int, sub: int) -> CardOutcome:
    after, before = at
    return CardOutcome(
        outcome=outcome,
        tool=call.tool_name,
        record=str(call.target) if call.target else None,
        fields=call.fields,
        after=after,
        card=card,
        answer=answer,
        index=before + sub,
        seq=(seq, sub),
    )


def approval_outcomes(approval: Approval, event: SegmentReturned, rules: RuleSet, at: tuple[int, int]) -> tuple[CardOutcome, ...]:
    """Returns the card outcomes an approved card's continuation `event` brings, one per waiting call.
    `at` is (transcript position, card outcomes before them)."""
    reading = read_segment(event.steps, event.trigger, "approved", rules, outcome=event.outcome)
    seen: dict[str, int] = {}
    new = []
    for sub, call in enumerate(approval.calls):
        nth = seen.get(call.tool_name, 0)
        seen[call.tool_name] = nth + 1
        outcome = approved_outcome(_opening_call(reading.calls, call.tool_name, nth), event.outcome)
        new.append(_outcome(call, outcome, approval.card, approval.answer, at, event.originator_version, sub))
    return tuple(new)


def continues(approval: Approval | None, event: SegmentReturned) -> bool:
    """Returns True when `event` is the continuation of the approved card `approval`
    (`domain.cards.continues_run`)."""
    return continues_run(event.trigger, event.run, approval.run if approval is not None else None)


def reads_rules(state: CardOutcomes, event: ConversationEvent) -> bool:
    """Returns True when `apply(state, event, rules)` reads `rules`: `event` continues the
    approved card `state` holds (its opening calls are read). Else the result is the same under
    every rule set, so rule sets folded side by side may share it (`projections.turn.apply_each`)."""
    return isinstance(event, SegmentReturned) and continues(state.approval, event)


def declined_outcomes(calls: tuple[WaitingCall, ...], event: CardDecided, at: tuple[int, int]) -> tuple[CardOutcome, ...]:
    """Returns a declined guided card's outcomes, one per call; none for a plain denial. `at` is as for
    approval_outcomes."""
    if not records_outcome(True, event.answer):
        return ()
    outcome = declined_outcome(event.answer)
    return tuple(
        _outcome(call, outcome, event.segment, event.answer, at, event.originator_version, sub) for sub, call in enumerate(calls)
    )


def legacy_outcomes(event: LegacyRowImported, before: int) -> tuple[CardOutcome, ...]:
    """Returns a legacy row's card outcomes, `before` the number of outcomes before them."""
    return tuple(
        CardOutcome(
            outcome=o.outcome,
            tool=o.tool,
            record=str(o.target) if o.target else None,
            fields=o.fields,
            after=o.after,
            index=before + sub,
            seq=(event.originator_version, sub),
        )
        for sub, o in enumerate(event.card_outcomes)
    )


def _opening_call(calls: tuple[CallReading, ...], tool: str, nth: int) -> CallReading | None:
    matching = [c for c in calls if c.opening and c.tool == tool]
    return matching[nth] if nth < len(matching) else None


@singledispatch
def _apply(event: ConversationEvent, state: CardOutcomes, rules: RuleSet) -> CardOutcomes:
    return state.model_copy(update={"positions": advance(state.positions, event)})


@_apply.register
def _(event: SegmentReturned, state: CardOutcomes, rules: RuleSet) -> CardOutcomes:
    approval, added = state.approval, cast("tuple[CardOutcome, ...]", ())
    if continues(approval, event):
        assert approval is not None
        added = approval_outcomes(approval, event, rules, (state.positions.length, state.count))
    open_cards = state.open_cards
    if event.outcome == "awaiting_approval" and is_guided(event):
        open_cards = {**open_cards, event.segment: OpenCard(run=event.run, calls=event.waiting)}
    return with_outcomes(
        state,
        {
            "approval": None,  # settled by its continuation, or given up
            "open_cards": open_cards,
            "positions": advance(state.positions, event),
        },
        added,
    )


@_apply.register
def _(event: CardDecided, state: CardOutcomes, rules: RuleSet) -> CardOutcomes:
    state = state.model_copy(update={"positions": advance(state.positions, event)})
    card = state.open_cards.get(event.segment)
    if card is None:
        return state
    calls = card.calls
    open_cards = {s: c for s, c in state.open_cards.items() if s != event.segment}
    if event.approved and records_outcome(True, event.answer):
        approval = Approval(card=event.segment, run=card.run, answer=event.answer, calls=calls)
        return state.model_copy(update={"open_cards": open_cards, "approval": approval})
    new = declined_outcomes(calls, event, (state.positions.length, state.count))
    return with_outcomes(state, {"open_cards": open_cards}, new)


@_apply.register(UserMessagePosted)
@_apply.register(TurnRetried)
def _(event: ConversationEvent, state: CardOutcomes, rules: RuleSet) -> CardOutcomes:
    """A new model call gives up on a pending approval (`domain.cards.starts_model_call`)."""
    approval = None if starts_model_call(event) else state.approval
    return state.model_copy(update={"approval": approval, "positions": advance(state.positions, event)})


@_apply.register
def _(event: CardLeftUndecided, state: CardOutcomes, rules: RuleSet) -> CardOutcomes:
    open_cards = {s: c for s, c in state.open_cards.items() if s != event.segment}
    return state.model_copy(update={"open_cards": open_cards})


def is_cut(outcome: CardOutcome, cut: set[str], length: int) -> bool:
    """Returns True when a truncation takes `outcome` away. Its card was cut, or, for a legacy row's
    outcome, its position lies beyond `length`."""
    return outcome.card in cut if outcome.card is not None else outcome.after >= length


@_apply.register
def _(event: TurnsTruncated, state: CardOutcomes, rules: RuleSet) -> CardOutcomes:
    positions = advance(state.positions, event)
    cut = set(event.cut_cards) | set(event.cut_segments)
    kept = tuple(o for o in state.outcomes if not is_cut(o, cut, positions.length))
    approval = state.approval if state.approval and state.approval.card not in cut else None
    made = held_outcomes(kept)
    return made.model_copy(
        update={
            "approval": approval,
            "open_cards": {s: c for s, c in state.open_cards.items() if s not in cut},
            "positions": positions,
        }
    )


@_apply.register
def _(event: LegacyRowImported, state: CardOutcomes, rules: RuleSet) -> CardOutcomes:
    legacy = legacy_outcomes(event, state.count)
    return with_outcomes(state, {"positions": advance(state.positions, event)}, legacy)


_APPLY = by_class(_apply)
"""The dispatch the fold calls (`projections.dispatch`), made after every branch above is registered."""
