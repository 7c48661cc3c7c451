"""The Conversation aggregate's state and its one mutator.

`evolve` folds one event into a new immutable `Conversation`; `project_conversation` folds many
and is the projector the repository uses (eventsourcing's functional style, as in its
aggregate7 example). The commands that decide which events to append are in
`domain.conversation`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import singledispatch
from typing import Any, ClassVar, Literal
from uuid import UUID

from domain.errors import ConversationNotStarted
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
from domain.values import PLAIN_DENIAL, Immutable

WaitingKind = Literal["card", "question"]


class SegmentInfo(Immutable):
    """What the aggregate keeps of a recorded segment: enough for its invariants."""

    version: int
    run: str
    message: int
    guided: bool
    waits: WaitingKind | None = None
    calls: int = 0


class Conversation(Immutable):
    """State of one conversation, folded from its events.

    `messages` are the live user message numbers; `segments` maps each live segment id to its
    `SegmentInfo`; `waiting` is the segment whose card or question waits; `settled` holds the
    segments whose card or question was decided, answered or left undecided; `card_outcomes`
    how many card outcomes exist (DESIGN.md, "Card outcomes are derived": one per call of a
    decided card of a guided process, a decline's at its decision, an approval's when its
    continuation returns, and a legacy row's), `outcomes_of` how many each card added,
    `approval` the approved card (and its call count) whose continuation has not returned yet:
    its outcomes come with the next segment of the card's run that continues after the approval
    (`is_continuation`); any other segment or a new model call gives up on them;
    `legacy_outcomes` the transcript positions of a legacy row's card outcomes, `legacy_users`
    the transcript index of each legacy user message (an edit of one cuts the outcomes after it);
    `cut_segments` / `cut_runs` what edits cut away; `sources` the input digests seen.
    """

    class_version: ClassVar[int] = 1

    id: UUID
    version: int
    created_on: datetime
    modified_on: datetime
    conversation: str
    kind: Literal["chat", "alt_text"]
    owner: int
    skill: str | None = None
    messages: tuple[int, ...] = ()
    segments: dict[str, SegmentInfo] = {}
    waiting: str | None = None
    settled: frozenset[str] = frozenset()
    card_outcomes: int = 0
    outcomes_of: dict[str, int] = {}
    approval: tuple[str, int] | None = None
    legacy_outcomes: tuple[int, ...] = ()
    legacy_users: dict[int, int] = {}
    cut_segments: frozenset[str] = frozenset()
    cut_runs: frozenset[str] = frozenset()
    sources: frozenset[str] = frozenset()

    def is_continuation(self, trigger: str, run: str) -> bool:
        """Returns True when a segment of `trigger` and `run` continues after the pending approval."""
        return self.approval is not None and trigger == "approval" and self.segments[self.approval[0]].run == run

    @property
    def last_message(self) -> int:
        """Returns the newest live user message number, 0 when there is none."""
        return self.messages[-1] if self.messages else 0



class ConversationSnapshot(ConversationEvent):
    """A snapshot of a Conversation's state at `originator_version`.

    Its `class_version` follows `Conversation.class_version`: when the state's fields change,
    raise both and add `upcast_vN_vN+1(state)` here, rewriting `state["state"]`, so stored
    snapshots still load (the mapper runs the upcasts, as for every event).
    """

    class_version: ClassVar[int] = Conversation.class_version

    state: dict[str, Any]

    @classmethod
    def take(cls, aggregate: Conversation) -> ConversationSnapshot:
        """Returns a snapshot of `aggregate` at its version."""
        return cls(
            originator_id=aggregate.id,
            originator_version=aggregate.version,
            timestamp=aggregate.modified_on,
            state=aggregate.model_dump(mode="json"),
        )


# ---------------------------------------------------------------- the mutator


@singledispatch
def evolve(event: ConversationEvent, state: Conversation | None) -> Conversation:
    """Returns the state after `event`. Raises TypeError for an event it does not know."""
    raise TypeError(f"unknown event {type(event).__name__}")


def _step(state: Conversation | None, event: ConversationEvent, **changes: Any) -> Conversation:
    if state is None:
        raise ConversationNotStarted(f"{type(event).__name__} before ConversationStarted")
    sources = state.sources | {event.source} if event.source else state.sources
    return state.model_copy(
        update={
            "version": event.originator_version,
            "modified_on": event.timestamp,
            "sources": sources,
            **changes,
        }
    )


@evolve.register
def _(event: ConversationStarted, _: Conversation | None) -> Conversation:
    return Conversation(
        id=event.originator_id,
        version=event.originator_version,
        created_on=event.timestamp,
        modified_on=event.timestamp,
        conversation=event.conversation,
        kind=event.kind,
        owner=event.owner,
        sources=frozenset({event.source}) if event.source else frozenset(),
    )


@evolve.register
def _(event: ConversationSnapshot, _: Conversation | None) -> Conversation:
    return Conversation.model_validate(event.state)


@evolve.register
def _(event: UserMessagePosted, state: Conversation | None) -> Conversation:
    messages = (*state.messages, event.message) if state else ()
    return _step(state, event, messages=messages, approval=None)  # a new model call: given up


@evolve.register
def _(event: SkillLoaded, state: Conversation | None) -> Conversation:
    return _step(state, event, skill=event.skill)


@evolve.register
def _(event: SegmentReturned, state: Conversation | None) -> Conversation:
    assert state is not None
    waits: WaitingKind | None = {"awaiting_approval": "card", "awaiting_input": "question"}.get(
        event.outcome
    )  # type: ignore[assignment]
    info = SegmentInfo(
        version=event.originator_version,
        run=event.run,
        message=event.message,
        guided=event.skill is not None,
        waits=waits,
        calls=len(event.waiting),
    )
    counted: dict[str, Any] = {"approval": None}  # settled by its continuation, else given up
    if state.approval is not None and state.is_continuation(event.trigger, event.run):
        card, calls = state.approval
        counted |= _counted(state, card, calls)
    return _step(
        state,
        event,
        segments={**state.segments, event.segment: info},
        waiting=event.segment if waits else None,
        **counted,
    )


def _counted(state: Conversation, card: str, outcomes: int) -> dict[str, Any]:
    return {
        "card_outcomes": state.card_outcomes + outcomes,
        "outcomes_of": {**state.outcomes_of, card: state.outcomes_of.get(card, 0) + outcomes},
    }


@evolve.register
def _(event: CardDecided, state: Conversation | None) -> Conversation:
    assert state is not None
    card = state.segments[event.segment]
    counted: dict[str, Any] = {}
    if card.guided and event.approved:
        counted = {"approval": (event.segment, card.calls)}
    elif card.guided and event.answer != PLAIN_DENIAL:  # a plain denial records no card outcome
        counted = _counted(state, event.segment, card.calls)
    messages = state.messages
    if event.message is not None and event.text is not None:
        messages = (*messages, event.message)
    return _step(
        state,
        event,
        waiting=None,
        settled=state.settled | {event.segment},
        messages=messages,
        **counted,
    )


@evolve.register
def _(event: QuestionAnswered, state: Conversation | None) -> Conversation:
    assert state is not None
    return _step(
        state,
        event,
        waiting=None,
        settled=state.settled | {event.segment},
        messages=(*state.messages, event.message),
    )


@evolve.register
def _(event: CardLeftUndecided, state: Conversation | None) -> Conversation:
    assert state is not None
    return _step(state, event, waiting=None, settled=state.settled | {event.segment})


@evolve.register
def _(event: TourEnded, state: Conversation | None) -> Conversation:
    return _step(state, event, skill=None)


@evolve.register
def _(event: TurnRetried, state: Conversation | None) -> Conversation:
    return _step(state, event, approval=None)  # a new model call: a pending approval is given up


@evolve.register
def _(event: MessageEdited, state: Conversation | None) -> Conversation:
    return _step(state, event)


@evolve.register
def _(event: ConversationErased, state: Conversation | None) -> Conversation:
    return _step(state, event)  # the state holds no text


@evolve.register
def _(event: TurnsTruncated, state: Conversation | None) -> Conversation:
    assert state is not None
    cut = set(event.cut_segments)
    cut_cards = set(event.cut_cards)
    legacy = state.legacy_outcomes
    if event.after_message in state.legacy_users:  # the transcript keeps up to this message
        legacy = tuple(after for after in legacy if after <= state.legacy_users[event.after_message])
    return _step(
        state,
        event,
        messages=tuple(m for m in state.messages if m not in set(event.cut_messages)),
        segments={s: i for s, i in state.segments.items() if s not in cut},
        waiting=None if state.waiting in cut else state.waiting,
        card_outcomes=state.card_outcomes
        - sum(state.outcomes_of.get(c, 0) for c in cut_cards)
        - (len(state.legacy_outcomes) - len(legacy)),
        legacy_outcomes=legacy,
        outcomes_of={c: n for c, n in state.outcomes_of.items() if c not in cut_cards},
        approval=None if state.approval and state.approval[0] in cut_cards else state.approval,
        cut_segments=state.cut_segments | cut,
        cut_runs=state.cut_runs | {state.segments[s].run for s in cut if s in state.segments},
    )


@evolve.register
def _(event: TranscriptReplaced, state: Conversation | None) -> Conversation:
    return _step(state, event)


@evolve.register
def _(event: LegacyRowImported, state: Conversation | None) -> Conversation:
    assert state is not None
    users = [index for index, line in enumerate(event.messages) if line.role == "user"]
    return _step(
        state,
        event,
        messages=(*state.messages, *range(1, len(users) + 1)),
        card_outcomes=state.card_outcomes + len(event.card_outcomes),
        legacy_outcomes=tuple(o.after for o in event.card_outcomes),
        legacy_users={number: index for number, index in enumerate(users, start=1)},
    )


def project_conversation(
    state: Conversation | None, events: Iterable[ConversationEvent]
) -> Conversation | None:
    """Returns the state after folding `events` into `state` (the repository's projector)."""
    for event in events:
        state = evolve(event, state)
    return state
