"""The Conversation aggregate's state and its one mutator. `evolve` folds one event into a new
immutable `Conversation`. `project_conversation` folds many; it is the repository's projector. The
commands are in `domain.conversation`."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import singledispatch
from typing import Any, ClassVar, Literal
from uuid import UUID

from domain.cards import is_guided, records_outcome, starts_model_call
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
from domain.segments import SegmentInfo, continues_approval, waits_for
from domain.values import Immutable, assembled


class Conversation(Immutable):
    """State of one conversation, folded from its events; bounded, whatever the history. The past the
    invariants need is in the history index (`domain.history_index`)."""

    class_version: ClassVar[int] = 7

    id: UUID
    """The aggregate's id: the UUID the conversation id maps to (`conversation_uuid`)."""
    version: int
    """The version of the last event folded in (its number of events)."""
    created_on: datetime
    """When the conversation started (its first event's time)."""
    modified_on: datetime
    """The time of the last event folded in."""
    conversation: str
    """The conversation's id as the chat names it."""
    kind: Literal["chat", "alt_text"]
    """`chat`, or `alt_text` (a conversation that replaces its transcript and gets no notes)."""
    owner: int
    """The backend user id of the conversation's owner."""
    skill: str | None = None
    """The skill in force (a guided process), None outside one."""
    last_message: int = 0
    """The newest uncut user message number, 0 before the first."""
    waiting: str | None = None
    """The segment whose card or question waits, None when none waits."""
    waiting_info: SegmentInfo | None = None
    """What the waiting segment is: its run, message, whether guided, what it waits for, calls."""
    approval: tuple[str, int, str] | None = None
    """The approved card of a guided process (segment, calls, run) whose continuation has not
    returned yet: its outcomes come with the next segment of that run that continues after the
    approval; any other segment or a new model call gives them up."""
    legacy_outcomes: tuple[int, ...] = ()
    """The transcript positions of a legacy row's card outcomes (an edit may cut some)."""
    legacy_users: dict[int, int] = {}
    """The transcript index of each legacy user message, by number."""
    erased: bool = False
    """Whether the conversation's texts were erased (ConversationErased): no text may be stored
    for it afterwards, whichever process writes it."""
    tour_returned: bool = True
    """Whether a segment returned since the skill in force was loaded (True outside a tour): a
    tour ends after its first segment, so a `tour_ended` before it waits for it."""
    numbered: int | None = 0
    """The highest user message number the conversation has had, cut ones included: the next
    message is numbered at most one above it (or above `last_message`); None in a state
    restored from a snapshot of class version 5 or before, which did not keep it (no number is
    then taken as skipping one)."""
    decided: Literal["card", "question", "any"] | None = None
    """What was decided since the last segment: `card` (a card decided), `question` (a question
    answered), None (nothing: no continuation has a decision to follow); `any` in a state
    restored from a snapshot of class version 4 or before, which did not keep it (any
    continuation is then taken, as it was)."""
    resumes: tuple[str, int | None] | None = None
    """The run of the last segment returned and the last round of its steps (None without steps):
    a continuation of its card or question resumes that run at that round (nr-llm executes or
    refuses the waiting calls first, at round = the iterations before the pause), so a
    continuation of another run or round continues a decision still to come; None in a state
    restored from a snapshot of class version 6 or before, which did not keep it (any
    continuation after a decision is then taken, as it was)."""

    def is_continuation(self, trigger: str, run: str) -> bool:
        """Returns True when a segment of `trigger` and `run` continues after the pending approval."""
        return continues_approval(self.approval, trigger, run)


class ConversationSnapshot(ConversationEvent):
    """A snapshot of a Conversation's state at `originator_version`. Its `class_version` follows
    `Conversation.class_version`. When the state's fields change, raise both and add
    `upcast_vN_vN+1(state)` here, so stored snapshots still load."""

    class_version: ClassVar[int] = Conversation.class_version

    state: dict[str, Any]

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["state"]["undecided"] = {}  # not known for a snapshot taken before version 2

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        """Version 3 moves the past to the history index; the waiting segment and approved run stay."""
        old = state["state"]
        segments = old.pop("segments", {}) or {}
        messages = old.pop("messages", []) or []
        old["last_message"] = messages[-1] if messages else 0
        old["waiting_info"] = segments.get(old.get("waiting")) if old.get("waiting") else None
        approval = old.get("approval")
        if approval:
            card = segments.get(approval[0])
            old["approval"] = [approval[0], approval[1], card["run"] if card else ""]
        for gone in ("settled", "card_outcomes", "outcomes_of", "cut_segments", "cut_runs", "sources", "undecided"):
            old.pop(gone, None)

    @staticmethod
    def upcast_v3_v4(state: dict[str, Any]) -> None:
        """Version 4 adds whether the texts were erased; older snapshots say not."""
        state["state"]["erased"] = False

    @staticmethod
    def upcast_v4_v5(state: dict[str, Any]) -> None:
        """Version 5 adds what was decided since the last segment; older snapshots say `any`."""
        state["state"]["decided"] = "any"

    @staticmethod
    def upcast_v5_v6(state: dict[str, Any]) -> None:
        """Version 6 adds the highest message number (None) and whether the tour returned (True)."""
        state["state"]["numbered"] = None
        state["state"]["tour_returned"] = True

    @staticmethod
    def upcast_v6_v7(state: dict[str, Any]) -> None:
        """Version 7 adds the last segment's run and round; older snapshots say None."""
        state["state"]["resumes"] = None

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
    # `state.model_copy(update=…)` (no validation, the same fields set), made as pydantic's
    # own copy makes it without its `copy.copy` per attribute: a state has no extra fields and
    # no private attributes, and each event makes one
    fields = state.__dict__.copy()
    if "last_message" in changes and state.numbered is not None:  # an edit's cut lowers the last, not this
        changes["numbered"] = max(state.numbered, changes["last_message"])
    fields.update(changes, version=event.originator_version, modified_on=event.timestamp)
    return assembled(type(state), fields, state.__pydantic_fields_set__.union(("version", "modified_on", *changes)))


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
    )


@evolve.register
def _(event: ConversationSnapshot, _: Conversation | None) -> Conversation:
    return Conversation.model_validate(event.state)


@evolve.register
def _(event: UserMessagePosted, state: Conversation | None) -> Conversation:
    return _step(state, event, last_message=event.message, approval=_kept_approval(state, event), decided=None)


@evolve.register
def _(event: SkillLoaded, state: Conversation | None) -> Conversation:
    return _step(state, event, skill=event.skill, tour_returned=False)


@evolve.register
def _(event: SegmentReturned, state: Conversation | None) -> Conversation:
    assert state is not None
    waits = waits_for(event.outcome)
    info = (
        SegmentInfo(
            version=event.originator_version,
            run=event.run,
            message=event.message,
            guided=is_guided(event),
            waits=waits,
            calls=len(event.waiting),
        )
        if waits
        else None
    )
    # an approval is settled by its continuation, else given up
    resumes = (event.run, max((step.round for step in event.steps), default=None))
    return _step(
        state,
        event,
        waiting=event.segment if waits else None,
        waiting_info=info,
        approval=None,
        decided=None,
        tour_returned=True,
        resumes=resumes,
    )


@evolve.register
def _(event: CardDecided, state: Conversation | None) -> Conversation:
    assert state is not None
    card = state.waiting_info
    approval = state.approval
    if card is not None and event.approved and records_outcome(card.guided, event.answer):
        approval = (event.segment, card.calls, card.run)
    last = event.message if event.message is not None and event.text is not None else state.last_message
    return _step(state, event, waiting=None, waiting_info=None, approval=approval, last_message=last, decided="card")


@evolve.register
def _(event: QuestionAnswered, state: Conversation | None) -> Conversation:
    assert state is not None
    return _step(state, event, waiting=None, waiting_info=None, last_message=event.message, decided="question")


@evolve.register
def _(event: CardLeftUndecided, state: Conversation | None) -> Conversation:
    assert state is not None
    return _step(state, event, waiting=None, waiting_info=None)


@evolve.register
def _(event: TourEnded, state: Conversation | None) -> Conversation:
    return _step(state, event, skill=None)


@evolve.register
def _(event: TurnRetried, state: Conversation | None) -> Conversation:
    return _step(state, event, approval=_kept_approval(state, event), decided=None)


def _kept_approval(state: Conversation | None, event: ConversationEvent) -> tuple[str, int, str] | None:
    """A new model call gives up a pending approval (`domain.cards.starts_model_call`)."""
    return None if state is None or starts_model_call(event) else state.approval


@evolve.register
def _(event: MessageEdited, state: Conversation | None) -> Conversation:
    return _step(state, event)


@evolve.register
def _(event: ConversationErased, state: Conversation | None) -> Conversation:
    return _step(state, event, erased=True)  # the state holds no text


@evolve.register
def _(event: TurnsTruncated, state: Conversation | None) -> Conversation:
    assert state is not None
    cut = set(event.cut_segments)
    legacy = state.legacy_outcomes
    if event.after_message in state.legacy_users:  # the transcript keeps up to this message
        legacy = tuple(after for after in legacy if after <= state.legacy_users[event.after_message])
    waiting = None if state.waiting in cut else state.waiting
    return _step(
        state,
        event,
        last_message=event.after_message,
        waiting=waiting,
        waiting_info=state.waiting_info if waiting else None,
        legacy_outcomes=legacy,
        approval=None if state.approval and state.approval[0] in set(event.cut_cards) else state.approval,
        decided=None,  # the edited message runs again: a turn, no continuation
    )


@evolve.register
def _(event: TranscriptReplaced, state: Conversation | None) -> Conversation:
    users = sum(line.role == "user" for line in event.messages)
    return _step(state, event, last_message=users)  # numbered as the transcript numbers them


@evolve.register
def _(event: LegacyRowImported, state: Conversation | None) -> Conversation:
    assert state is not None
    users = [index for index, line in enumerate(event.messages) if line.role == "user"]
    return _step(
        state,
        event,
        last_message=len(users) or state.last_message,
        legacy_outcomes=tuple(o.after for o in event.card_outcomes),
        legacy_users={number: index for number, index in enumerate(users, start=1)},
    )


def project_conversation(state: Conversation | None, events: Iterable[ConversationEvent]) -> Conversation | None:
    """Returns the state after folding `events` into `state` (the repository's projector)."""
    for event in events:
        state = evolve(event, state)
    return state
