"""Domain events of the Conversation aggregate (docs/spec-map.md, D10).

Every event is a frozen pydantic model holding facts only: what the chat sent, less what the
privacy filter drops. Readings (failed, held, declined, a note's text) live in `projections/`.

Common fields: `originator_id` (UUID of the conversation, see `conversation_uuid`),
`originator_version` (1-based position in the conversation's log), `timestamp` (the `at` of the
input line, UTC) and `source` (digest of the input line that produced it, for idempotent
ingestion; None for events not made from a line). `class_version` and `upcast_vN_vN+1` follow
the eventsourcing library's upcasting convention: a stored state older than `class_version`
is upcast step by step before it is turned into an event.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, ClassVar, Literal
from uuid import UUID, uuid5

from pydantic import Field

from domain.values import (
    Immutable,
    LegacyCardOutcome,
    StepFact,
    TranscriptLine,
    WaitingCall,
)

CHATRECORD_NAMESPACE = UUID("5f0f3c1e-6c55-4d1a-9d2f-2b8f6f7c3a10")

Trigger = Literal["turn", "approval", "answer", "retry"]
UndecidedReason = Literal["new_message", "tour_ended"]


@lru_cache(maxsize=4096)
def conversation_uuid(conversation: str) -> UUID:
    """Returns the aggregate id of a conversation: a UUIDv5 of its chat-side id (a string).
    The newest 4,096 are kept (a UUID is immutable): a writer asks for its conversation's on
    every line."""
    return uuid5(CHATRECORD_NAMESPACE, conversation)


class ConversationEvent(Immutable):
    """Base of every Conversation event."""

    class_version: ClassVar[int] = 1

    originator_id: UUID
    originator_version: int = Field(ge=1)
    timestamp: datetime
    source: str | None = None


class ConversationStarted(ConversationEvent):
    """A conversation began. `kind` is `chat`, or `alt_text` (ADR-026: replaces its transcript
    and gets no notes). `owner` is the backend user id.

    Version 2 added `kind`; version 1 events were all ordinary chats (see `upcast_v1_v2`).
    """

    class_version: ClassVar[int] = 2

    conversation: str
    kind: Literal["chat", "alt_text"]
    owner: int

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["kind"] = "chat"


class UserMessagePosted(ConversationEvent):
    """The editor wrote message `message` (from 1). `page` is the page sent with it, 0 for none;
    `skill` the skill the turn runs with, or None."""

    message: int = Field(ge=1)
    text: str
    page: int = Field(ge=0)
    skill: str | None = None


class SegmentReturned(ConversationEvent):
    """A run segment returned (docs/spec-map.md, S2).

    `segment` is the chat's idempotency key; `outcome` is nr-llm's `AgentRunOutcome` or
    `unknown`; `answer` the assistant text or None; `nothing_saved` the ADR-017 flag;
    `steps` the filtered steps; `waiting` the calls left waiting; `card_outcomes_before` how many
    card decisions of a guided process existed before it; `message` the newest user message
    before it; `skill` the skill in force when it returned (a card of a guided process needs one);
    `model` and `provider` the model and provider the segment ran with, None where the line
    named none.

    Version 2 added `model`, `provider` and the steps' `call` and `offered_tools`; a version 1
    event stated none of them: they are upcast as unknown (None), never as zero.
    """

    class_version: ClassVar[int] = 2

    segment: str
    run: str
    trigger: Trigger
    outcome: str
    answer: str | None = None
    nothing_saved: bool = False
    steps: tuple[StepFact, ...] = ()
    waiting: tuple[WaitingCall, ...] = ()
    card_outcomes_before: int = Field(ge=0)
    message: int = Field(ge=0)
    skill: str | None = None
    model: str | None = None
    provider: str | None = None

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["model"] = None
        state["provider"] = None
        for step in state.get("steps") or ():
            step["call"] = None
            step["offered_tools"] = None


class CardDecided(ConversationEvent):
    """The editor decided the card of waiting segment `segment`. `answer` is one of
    `domain.values.CARD_ANSWERS`; `message`/`text` are set when the chat appends the answer's
    label to the transcript as a user message."""

    segment: str
    approved: bool
    answer: str
    message: int | None = None
    text: str | None = None


class QuestionAnswered(ConversationEvent):
    """The editor answered the question of waiting segment `segment` with option `text`,
    which joins the transcript as user message `message`."""

    segment: str
    message: int = Field(ge=1)
    text: str


class CardLeftUndecided(ConversationEvent):
    """A waiting card or question was left undecided by a new message or the end of the tour
    (docs/spec-map.md, S11). `decidable_elsewhere` is True for
    an ordinary chat, whose run may still be decided in AI Tasks."""

    segment: str
    waiting_kind: Literal["card", "question"]
    reason: UndecidedReason
    decidable_elsewhere: bool


class TurnRetried(ConversationEvent):
    """The turn of user message `message` runs again after a failed segment."""

    message: int = Field(ge=1)


class SkillLoaded(ConversationEvent):
    """A skill (guided process, e.g. `3:seo-optimieren`) was set on the conversation."""

    skill: str


class TourEnded(ConversationEvent):
    """The editor ended the tour; the skill is cleared (ADR-023)."""


class MessageEdited(ConversationEvent):
    """User message `message` was edited to `text`; a TurnsTruncated follows."""

    message: int = Field(ge=1)
    text: str


class TurnsTruncated(ConversationEvent):
    """The transcript was cut after message `after_message`. The cut messages, segments and
    card decisions (named by their card's segment) vanish from every projection."""

    after_message: int = Field(ge=1)
    cut_messages: tuple[int, ...] = ()
    cut_segments: tuple[str, ...] = ()
    cut_cards: tuple[str, ...] = ()


class TranscriptReplaced(ConversationEvent):
    """An `alt_text` conversation replaced its transcript (ADR-026)."""

    messages: tuple[TranscriptLine, ...]


class LegacyRowImported(ConversationEvent):
    """A row from before the run record existed: transcript and card outcomes only."""

    messages: tuple[TranscriptLine, ...]
    card_outcomes: tuple[LegacyCardOutcome, ...] = ()


class ConversationErased(ConversationEvent):
    """The conversation's free texts were erased at `timestamp` (crypto-shredding: its data key
    was deleted). The facts stay; every text of it reads as erased from then on."""


EVENT_TYPES: tuple[type[ConversationEvent], ...] = (
    ConversationStarted,
    UserMessagePosted,
    SegmentReturned,
    CardDecided,
    QuestionAnswered,
    CardLeftUndecided,
    TurnRetried,
    SkillLoaded,
    TourEnded,
    MessageEdited,
    TurnsTruncated,
    TranscriptReplaced,
    LegacyRowImported,
    ConversationErased,
)
