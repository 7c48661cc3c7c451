"""Transcript positions without the texts: how long the transcript is, the role of its last
message, and where each user message stands. Card outcomes use it for their `after`.

A position is the transcript's length (number of messages) at a moment. User messages are
typed messages, answers to questions and appended card answers; a segment's answer adds an
assistant message unless the last message is an assistant's, which it then joins.
"""

from __future__ import annotations

from functools import singledispatch
from typing import Literal

from domain.events import (
    CardDecided,
    ConversationEvent,
    LegacyRowImported,
    QuestionAnswered,
    SegmentReturned,
    TranscriptReplaced,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.values import Immutable, TranscriptLine


class Positions(Immutable):
    """`length` of the transcript, role of its last message, and `users`: user message number
    -> its index."""

    length: int = 0
    """How many messages the transcript holds."""
    last_role: Literal["user", "assistant"] | None = None
    """The role of its last message; None while it is empty."""
    users: dict[int, int] = {}
    """Each user message number and its index in the transcript."""


def advance(positions: Positions, event: ConversationEvent) -> Positions:
    """Returns the positions after `event`; unchanged for an event that adds no message."""
    return _advance(event, positions)


def _user(positions: Positions, message: int) -> Positions:
    users = {**positions.users, message: positions.length}
    return positions.model_copy(update={"length": positions.length + 1, "last_role": "user", "users": users})


def _lines(lines: tuple[TranscriptLine, ...]) -> Positions:
    users: dict[int, int] = {}
    for index, line in enumerate(lines):
        if line.role == "user":
            users[len(users) + 1] = index
    return Positions(length=len(lines), last_role=lines[-1].role if lines else None, users=users)


@singledispatch
def _advance(event: ConversationEvent, positions: Positions) -> Positions:
    return positions


@_advance.register
def _(event: UserMessagePosted, positions: Positions) -> Positions:
    return _user(positions, event.message)


@_advance.register
def _(event: QuestionAnswered, positions: Positions) -> Positions:
    return _user(positions, event.message)


@_advance.register
def _(event: CardDecided, positions: Positions) -> Positions:
    if event.message is None or event.text is None:
        return positions
    return _user(positions, event.message)


@_advance.register
def _(event: SegmentReturned, positions: Positions) -> Positions:
    if event.answer is None or positions.last_role == "assistant":
        return positions
    return positions.model_copy(update={"length": positions.length + 1, "last_role": "assistant"})


@_advance.register
def _(event: TurnsTruncated, positions: Positions) -> Positions:
    index = positions.users.get(event.after_message)
    if index is None:
        return positions
    users = {number: at for number, at in positions.users.items() if at <= index}
    return Positions(length=index + 1, last_role="user", users=users)


@_advance.register
def _(event: TranscriptReplaced, positions: Positions) -> Positions:
    return _lines(event.messages)


@_advance.register
def _(event: LegacyRowImported, positions: Positions) -> Positions:
    return _lines(event.messages)
