"""The commands that rewrite a transcript: erase, edit, replace, import a legacy row. Re-exported by
`domain.conversation`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from domain.command_batch import begin, require_history, require_posted
from domain.errors import MessageOutOfOrder, UnknownMessage, WrongConversationKind
from domain.events import (
    ConversationErased,
    ConversationEvent,
    LegacyRowImported,
    MessageEdited,
    TranscriptReplaced,
    TurnsTruncated,
)
from domain.history_index import History
from domain.state import Conversation
from domain.values import LegacyCardOutcome, TranscriptLine

ERASURE_SOURCE = "erasure"
"""The `source` of a ConversationErased: a conversation is erased once."""


def erase_texts(state: Conversation | None, at: datetime, history: History | None = None) -> list[ConversationEvent]:
    """Returns [ConversationErased] at `at`; [] when the erasure was recorded already.

    Raises ConversationNotStarted for a conversation that was never started."""
    batch = begin(state, at, ERASURE_SOURCE, require_history(history), "erasure")
    if batch is None:
        return []
    batch.add(ConversationErased)
    return batch.events


def edit_message(
    state: Conversation | None,
    message: int,
    text: str,
    at: datetime,
    source: str | None = None,
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns [MessageEdited, TurnsTruncated]: the transcript is cut after `message`. Later messages,
    segments at or after it and their card decisions go. A waiting card of a cut turn records no
    undecided note. Raises MessageTooEarly when `message` is still to come. Raises UnknownMessage
    when it is not an uncut user message."""
    batch = begin(state, at, source, history, f"edit of message {message}")
    if batch is None:
        return []
    require_posted(batch.state, message, "edit")
    past = require_history(history)
    if not past.message_uncut(message):
        raise UnknownMessage(f"edit names user message {message}, which the conversation does not have")
    cut = past.segments_from(message)
    batch.add(MessageEdited, message=message, text=text)
    batch.add(
        TurnsTruncated,
        after_message=message,
        cut_messages=tuple(past.messages_after(message)),
        cut_segments=tuple(r.segment for r in cut),
        cut_cards=tuple(r.segment for r in cut if r.settled),
    )
    return batch.events


def replace_transcript(
    state: Conversation | None,
    messages: Sequence[TranscriptLine],
    at: datetime,
    source: str | None = None,
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns [TranscriptReplaced]. Raises WrongConversationKind unless the kind is alt_text."""
    batch = begin(state, at, source, history, "transcript replacement")
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
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns [LegacyRowImported]; its user lines become messages 1..k.

    Raises MessageOutOfOrder when the conversation already has messages.
    """
    batch = begin(state, at, source, history, "legacy row")
    if batch is None:
        return []
    if batch.state.last_message:
        raise MessageOutOfOrder("a legacy row must come before the conversation's first message")
    batch.add(LegacyRowImported, messages=tuple(messages), card_outcomes=tuple(card_outcomes))
    return batch.events
