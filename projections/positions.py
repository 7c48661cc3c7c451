"""Transcript positions without the texts: the length, the last role, each user message's index. A
position is the transcript's length at a moment. User messages are typed messages, answers to
questions and appended card answers. A segment's answer adds an assistant message, or joins the last
one if it is an assistant's."""

from __future__ import annotations

from functools import singledispatch
from typing import Any, Literal

from pydantic import ModelWrapValidatorHandler, PrivateAttr, TypeAdapter, computed_field, model_validator

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
from domain.values import Immutable, TranscriptLine, assembled
from projections.dispatch import by_class
from projections.prefix_list import extended, taken


class Positions(Immutable):
    """The transcript's `length`, its last message's role, and each user message's index. Appending one
    costs O(1) amortised: a fold's positions share one list, each reading its prefix."""

    length: int = 0
    """How many messages the transcript holds."""
    last_role: Literal["user", "assistant"] | None = None
    """The role of its last message; None while it is empty."""
    _pairs: list[tuple[int, int]] | None = PrivateAttr(default=None)  # set by every constructor (see Transcript._done)
    _k: int = PrivateAttr(default=0)

    @model_validator(mode="wrap")
    @classmethod
    def _given_users(cls, data: Any, handler: ModelWrapValidatorHandler[Positions]) -> Positions:
        """Takes `users` (user message number -> index, as `users` dumps it) beside the fields."""
        data, users = taken(data, "users")
        given = _USERS.validate_python(users) if users is not None else {}
        made = handler(data)
        made.__pydantic_private__ = {"_pairs": list(given.items()), "_k": len(given)}
        return made

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented way: a property under it
    @property
    def users(self) -> dict[int, int]:
        """Each user message number and its index; a number given twice maps to its newest index."""
        pairs, k = _held(self)
        return dict(pairs[:k])

    def index_of(self, number: int) -> int | None:
        """Returns user message `number`'s newest index, or None: O(messages after it)."""
        pairs, k = _held(self)
        for i in range(k - 1, -1, -1):
            if pairs[i][0] == number:
                return pairs[i][1]
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Positions):
            return NotImplemented
        return (self.length, self.last_role, self.users) == (other.length, other.last_role, other.users)

    def __hash__(self) -> int:
        return hash((self.length, self.last_role))


_USERS = TypeAdapter(dict[int, int])


def _held(positions: Positions) -> tuple[list[tuple[int, int]], int]:
    """Returns the shared list of (number, index) pairs and how many `positions` reads."""
    held = positions.__pydantic_private__
    assert held is not None
    return held["_pairs"], held["_k"]


def _made(length: int, last_role: Literal["user", "assistant"] | None, pairs: list[tuple[int, int]], k: int) -> Positions:
    made = assembled(Positions, {"length": length, "last_role": last_role}, {"length", "last_role"})
    object.__setattr__(made, "__pydantic_private__", {"_pairs": pairs, "_k": k})
    return made


def advance(positions: Positions, event: ConversationEvent) -> Positions:
    """Returns the positions after `event`; unchanged for an event that adds no message."""
    return _ADVANCE(event, positions)


def _user(positions: Positions, message: int) -> Positions:
    pairs, k = _held(positions)
    return _made(positions.length + 1, "user", extended(pairs, k, ((message, positions.length),)), k + 1)


def _lines(lines: tuple[TranscriptLine, ...]) -> Positions:
    pairs: list[tuple[int, int]] = []
    for index, line in enumerate(lines):
        if line.role == "user":
            pairs.append((len(pairs) + 1, index))
    return _made(len(lines), lines[-1].role if lines else None, pairs, len(pairs))


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
    index = positions.index_of(event.after_message)
    if index is None:
        return positions
    held, k = _held(positions)
    pairs = [pair for pair in held[:k] if pair[1] <= index]
    return _made(index + 1, "user", pairs, len(pairs))


@_advance.register
def _(event: TranscriptReplaced, positions: Positions) -> Positions:
    return _lines(event.messages)


@_advance.register
def _(event: LegacyRowImported, positions: Positions) -> Positions:
    return _lines(event.messages)


_ADVANCE = by_class(_advance)
"""The dispatch the fold calls (`projections.dispatch`), made after every branch above is registered."""
