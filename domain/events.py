"""Domain events of the Conversation aggregate (docs/spec-map.md, D10).

Every event is a frozen pydantic model holding facts only. Readings live in `projections/`.

Common fields:
- `originator_id`: the conversation's UUID (`conversation_uuid`).
- `originator_version`: the place in the conversation's log, from 1.
- `timestamp`: the input line's `at`, UTC.
- `source`: the input line's digest, as the store keeps it (keyed with the conversation's data key;
  plain in events stored before); None for events not made from a line.

`class_version` and `upcast_vN_vN+1` follow the library's upcasting convention."""

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
    """Returns the conversation's aggregate id: a UUIDv5 of its chat-side id. The newest 4,096 are
    cached."""
    return uuid5(CHATRECORD_NAMESPACE, conversation)


class ConversationEvent(Immutable):
    """Base of every Conversation event."""

    class_version: ClassVar[int] = 1

    originator_id: UUID
    originator_version: int = Field(ge=1)
    timestamp: datetime
    source: str | None = None


class ConversationStarted(ConversationEvent):
    """A conversation began. `kind` is `chat` or `alt_text` (ADR-026: replaces its transcript, gets no
    notes). `owner` is the backend user id. Version 1 events are all chats (`upcast_v1_v2`)."""

    class_version: ClassVar[int] = 2

    conversation: str
    kind: Literal["chat", "alt_text"]
    owner: int

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["kind"] = "chat"


class UserMessagePosted(ConversationEvent):
    """The editor wrote message `message` (from 1). `page` is the page sent with it, 0 for none.
    `skill` is the turn's skill, or None."""

    message: int = Field(ge=1)
    text: str
    page: int = Field(ge=0)
    skill: str | None = None


class SegmentReturned(ConversationEvent):
    """A run segment returned (docs/spec-map.md, S2).

    - `segment`: the chat's idempotency key.
    - `outcome`: nr-llm's `AgentRunOutcome`, or `unknown`.
    - `answer`: the assistant text, or None.
    - `nothing_saved`: the ADR-017 flag.
    - `steps`: the filtered steps; `waiting`: the calls left waiting.
    - `card_outcomes_before`: guided card decisions before it.
    - `message`: the newest user message before it.
    - `skill`: the skill in force, or None.
    - `model`, `provider`: what it ran with, None where the line named none.

    Version 1 events upcast `model`, `provider`, `call` and `offered_tools` as None, never zero."""

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
    `domain.values.CARD_ANSWERS`. `message` and `text` are set when the answer's label joins the
    transcript."""

    segment: str
    approved: bool
    answer: str
    message: int | None = None
    text: str | None = None


class QuestionAnswered(ConversationEvent):
    """The editor answered the question of segment `segment` with option `text`. The text joins the
    transcript as user message `message`."""

    segment: str
    message: int = Field(ge=1)
    text: str


class CardLeftUndecided(ConversationEvent):
    """A waiting card or question was left undecided by a new message or the tour's end. See
    docs/spec-map.md, S11. `decidable_elsewhere` is True for an ordinary chat."""

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
    """The transcript was cut after message `after_message`. The cut messages, segments and their card
    decisions vanish from every projection."""

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
    """The conversation's free texts were erased at `timestamp` (its data key was deleted). The facts
    stay; every text reads as erased from then on."""


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
