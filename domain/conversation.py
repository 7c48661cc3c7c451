"""The Conversation aggregate: its state, the one mutator `evolve`, and its commands.

A command is a plain function from the current state (None before the conversation starts)
to the events to append; it raises a `ChatrecordError` and appends nothing when an invariant
would break (DESIGN.md, "Invariants"). `evolve` folds one event into a new immutable state;
`project_conversation` folds many and is the projector the repository uses.

Every command takes `at` (the input line's time, UTC) and `source` (digest of the input line,
or None). A command whose `source` was seen before returns no events: delivering the same line
twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import singledispatch
from typing import Any, ClassVar, Literal, TypeVar
from uuid import UUID

from domain.errors import (
    CardAlreadyDecided,
    ConversationAlreadyStarted,
    ConversationNotStarted,
    MessageOutOfOrder,
    NoCardWaiting,
    NoQuestionWaiting,
    NoTurn,
    TurnTruncated,
    UnknownMessage,
    WrongConversationKind,
)
from domain.events import (
    CardDecided,
    CardLeftUndecided,
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
    conversation_uuid,
)
from domain.values import PLAIN_DENIAL, Immutable, LegacyCardOutcome, StepFact, TranscriptLine, WaitingCall

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
    `approval` the approved card (and its call count) whose continuation has not returned yet;
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
    cut_segments: frozenset[str] = frozenset()
    cut_runs: frozenset[str] = frozenset()
    sources: frozenset[str] = frozenset()

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
    return _step(state, event, messages=messages)


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
    counted: dict[str, Any] = {}
    if state.approval is not None and event.trigger == "approval":  # the approval's outcomes are in
        card, calls = state.approval
        counted = _counted(state, card, calls) | {"approval": None}
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
    return _step(state, event)


@evolve.register
def _(event: MessageEdited, state: Conversation | None) -> Conversation:
    return _step(state, event)


@evolve.register
def _(event: TurnsTruncated, state: Conversation | None) -> Conversation:
    assert state is not None
    cut = set(event.cut_segments)
    cut_cards = set(event.cut_cards)
    return _step(
        state,
        event,
        messages=tuple(m for m in state.messages if m not in set(event.cut_messages)),
        segments={s: i for s, i in state.segments.items() if s not in cut},
        waiting=None if state.waiting in cut else state.waiting,
        card_outcomes=state.card_outcomes - sum(state.outcomes_of.get(c, 0) for c in cut_cards),
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
    users = sum(1 for line in event.messages if line.role == "user")
    return _step(
        state,
        event,
        messages=(*state.messages, *range(1, users + 1)),
        card_outcomes=state.card_outcomes + len(event.card_outcomes),
    )


def project_conversation(
    state: Conversation | None, events: Iterable[ConversationEvent]
) -> Conversation | None:
    """Returns the state after folding `events` into `state` (the repository's projector)."""
    for event in events:
        state = evolve(event, state)
    return state


# ---------------------------------------------------------------- commands

E = TypeVar("E", bound=ConversationEvent)


class _Batch:
    """Builds the events of one command with consecutive versions."""

    def __init__(self, state: Conversation, at: datetime, source: str | None) -> None:
        self.state, self.at, self.source = state, at, source
        self.events: list[ConversationEvent] = []

    def add(self, cls: type[E], **fields: Any) -> E:
        event = cls(
            originator_id=self.state.id,
            originator_version=self.state.version + len(self.events) + 1,
            timestamp=self.at,
            source=self.source,
            **fields,
        )
        self.events.append(event)
        return event


def _begin(state: Conversation | None, at: datetime, source: str | None, what: str) -> _Batch | None:
    if state is None:
        raise ConversationNotStarted(f"{what}: the conversation was never started")
    if source is not None and source in state.sources:
        return None
    return _Batch(state, at, source)


def start_conversation(
    state: Conversation | None,
    conversation: str,
    kind: Literal["chat", "alt_text"],
    owner: int,
    at: datetime,
    source: str | None = None,
) -> list[ConversationEvent]:
    """Returns [ConversationStarted]; [] when the same start was recorded already.

    Raises ConversationAlreadyStarted when the conversation exists with another kind or owner.
    """
    if state is not None:
        if state.kind == kind and state.owner == owner:
            return []
        raise ConversationAlreadyStarted(
            f"conversation {conversation!r} was started already as {state.kind} of owner {state.owner}"
        )
    return [
        ConversationStarted(
            originator_id=conversation_uuid(conversation),
            originator_version=1,
            timestamp=at,
            source=source,
            conversation=conversation,
            kind=kind,
            owner=owner,
        )
    ]


def _leave_waiting(batch: _Batch, reason: Literal["new_message", "tour_ended"]) -> None:
    state = batch.state
    if state.waiting is None:
        return
    info = state.segments[state.waiting]
    batch.add(
        CardLeftUndecided,
        segment=state.waiting,
        waiting_kind=info.waits,
        reason=reason,
        decidable_elsewhere=reason == "new_message" and not info.guided,
    )


def post_user_message(
    state: Conversation | None,
    message: int,
    text: str,
    page: int,
    skill: str | None,
    at: datetime,
    source: str | None = None,
) -> list[ConversationEvent]:
    """Returns the events of a typed user message: CardLeftUndecided(new_message) first if a card
    or question waits, SkillLoaded if the message brings a new skill, then UserMessagePosted.

    Raises MessageOutOfOrder when `message` is not above every earlier message number.
    """
    batch = _begin(state, at, source, f"user message {message}")
    if batch is None:
        return []
    if message <= batch.state.last_message:
        raise MessageOutOfOrder(
            f"user message {message} is not after message {batch.state.last_message}"
        )
    _leave_waiting(batch, "new_message")
    if skill is not None and skill != batch.state.skill:
        batch.add(SkillLoaded, skill=skill)
    batch.add(UserMessagePosted, message=message, text=text, page=page, skill=skill)
    return batch.events


def return_segment(
    state: Conversation | None,
    segment: str,
    run: str,
    trigger: Literal["turn", "approval", "answer", "retry"],
    outcome: str,
    answer: str | None,
    nothing_saved: bool,
    steps: Sequence[StepFact],
    waiting: Sequence[WaitingCall],
    at: datetime,
    source: str | None = None,
) -> list[ConversationEvent]:
    """Returns [SegmentReturned]; [] when `segment` was recorded already (the chat may deliver
    twice: the first result stands, see `recorded_segment`).

    Raises NoTurn before any user message, TurnTruncated for a segment or run an edit cut away.
    """
    batch = _begin(state, at, source, f"segment {segment}")
    if batch is None or segment in batch.state.segments:
        return []
    current = batch.state
    if segment in current.cut_segments or run in current.cut_runs:
        raise TurnTruncated(f"segment {segment} belongs to a turn an edit has cut away")
    if current.last_message == 0:
        raise NoTurn(f"segment {segment} returned before any user message")
    batch.add(
        SegmentReturned,
        segment=segment,
        run=run,
        trigger=trigger,
        outcome=outcome,
        answer=answer,
        nothing_saved=nothing_saved,
        steps=tuple(steps),
        waiting=tuple(waiting),
        card_outcomes_before=current.card_outcomes + _approved_outcomes(current, trigger),
        message=current.last_message,
        skill=current.skill,
    )
    return batch.events


def _approved_outcomes(state: Conversation, trigger: str) -> int:
    """Returns the outcomes an approval continuation records of the card it follows: they
    exist before its own entry (DESIGN.md, "read from the decision and the continuation")."""
    return state.approval[1] if state.approval is not None and trigger == "approval" else 0


def recorded_segment(state: Conversation | None, segment: str) -> int | None:
    """Returns the version of the SegmentReturned that recorded `segment`, or None."""
    if state is None or segment not in state.segments:
        return None
    return state.segments[segment].version


def _check_waiting(state: Conversation, segment: str, kind: WaitingKind) -> None:
    if segment in state.cut_segments:
        raise TurnTruncated(f"segment {segment} belongs to a turn an edit has cut away")
    if segment in state.settled:
        raise CardAlreadyDecided(f"the {kind} of segment {segment} was decided already")
    if state.waiting != segment or state.segments[segment].waits != kind:
        error = NoCardWaiting if kind == "card" else NoQuestionWaiting
        raise error(f"segment {segment} has no {kind} waiting")


def decide_card(
    state: Conversation | None,
    segment: str,
    approved: bool,
    answer: str,
    message: int | None,
    text: str | None,
    at: datetime,
    source: str | None = None,
) -> list[ConversationEvent]:
    """Returns [CardDecided] for the card waiting on `segment`.

    Raises NoCardWaiting when no card waits there, CardAlreadyDecided when it was decided (or
    left undecided) before, TurnTruncated when an edit cut it away, MessageOutOfOrder when the
    appended answer's message number is not the next one.
    """
    batch = _begin(state, at, source, f"card of segment {segment}")
    if batch is None:
        return []
    _check_waiting(batch.state, segment, "card")
    if message is not None and message <= batch.state.last_message:
        raise MessageOutOfOrder(f"answer message {message} is not after message {batch.state.last_message}")
    batch.add(CardDecided, segment=segment, approved=approved, answer=answer, message=message, text=text)
    return batch.events


def answer_question(
    state: Conversation | None,
    segment: str,
    message: int,
    text: str,
    at: datetime,
    source: str | None = None,
) -> list[ConversationEvent]:
    """Returns [QuestionAnswered] for the question waiting on `segment`.

    Raises NoQuestionWaiting, CardAlreadyDecided, TurnTruncated or MessageOutOfOrder as
    `decide_card` does.
    """
    batch = _begin(state, at, source, f"question of segment {segment}")
    if batch is None:
        return []
    _check_waiting(batch.state, segment, "question")
    if message <= batch.state.last_message:
        raise MessageOutOfOrder(f"answer message {message} is not after message {batch.state.last_message}")
    batch.add(QuestionAnswered, segment=segment, message=message, text=text)
    return batch.events


def retry_turn(
    state: Conversation | None, message: int, at: datetime, source: str | None = None
) -> list[ConversationEvent]:
    """Returns [TurnRetried]. Raises UnknownMessage when `message` is not a live user message."""
    batch = _begin(state, at, source, f"retry of message {message}")
    if batch is None:
        return []
    if message not in batch.state.messages:
        raise UnknownMessage(f"retry names user message {message}, which the conversation does not have")
    batch.add(TurnRetried, message=message)
    return batch.events


def end_tour(state: Conversation | None, at: datetime, source: str | None = None) -> list[ConversationEvent]:
    """Returns CardLeftUndecided(tour_ended) if a card or question waits, then TourEnded."""
    batch = _begin(state, at, source, "tour end")
    if batch is None:
        return []
    _leave_waiting(batch, "tour_ended")
    batch.add(TourEnded)
    return batch.events


def edit_message(
    state: Conversation | None, message: int, text: str, at: datetime, source: str | None = None
) -> list[ConversationEvent]:
    """Returns [MessageEdited, TurnsTruncated]: the transcript is cut after `message`; every
    later message, every segment at or after it and the decisions on those segments' cards go.
    A waiting card of a cut turn records no undecided note: it is cut away with its turn.

    Raises UnknownMessage when `message` is not a live user message.
    """
    batch = _begin(state, at, source, f"edit of message {message}")
    if batch is None:
        return []
    current = batch.state
    if message not in current.messages:
        raise UnknownMessage(f"edit names user message {message}, which the conversation does not have")
    cut_segments = tuple(s for s, info in current.segments.items() if info.message >= message)
    batch.add(MessageEdited, message=message, text=text)
    batch.add(
        TurnsTruncated,
        after_message=message,
        cut_messages=tuple(m for m in current.messages if m > message),
        cut_segments=cut_segments,
        cut_cards=tuple(s for s in cut_segments if s in current.settled),
    )
    return batch.events


def replace_transcript(
    state: Conversation | None,
    messages: Sequence[TranscriptLine],
    at: datetime,
    source: str | None = None,
) -> list[ConversationEvent]:
    """Returns [TranscriptReplaced]. Raises WrongConversationKind unless the kind is alt_text."""
    batch = _begin(state, at, source, "transcript replacement")
    if batch is None:
        return []
    if batch.state.kind != "alt_text":
        raise WrongConversationKind(
            f"only an alt_text conversation replaces its transcript; {batch.state.conversation!r} is a {batch.state.kind}"
        )
    batch.add(TranscriptReplaced, messages=tuple(messages))
    return batch.events


def import_legacy_row(
    state: Conversation | None,
    messages: Sequence[TranscriptLine],
    card_outcomes: Sequence[LegacyCardOutcome],
    at: datetime,
    source: str | None = None,
) -> list[ConversationEvent]:
    """Returns [LegacyRowImported]; its user lines become messages 1..k.

    Raises MessageOutOfOrder when the conversation already has messages.
    """
    batch = _begin(state, at, source, "legacy row")
    if batch is None:
        return []
    if batch.state.messages:
        raise MessageOutOfOrder("a legacy row must come before the conversation's first message")
    batch.add(LegacyRowImported, messages=tuple(messages), card_outcomes=tuple(card_outcomes))
    return batch.events
