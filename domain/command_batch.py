"""One command's events in the making, shared by the aggregate's commands. `begin` checks the
conversation started and the line is new. `CommandBatch` gives each event the next version, the
line's time and source."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from domain.errors import ConversationNotStarted, MessageTooEarly
from domain.events import ConversationEvent
from domain.history_index import History
from domain.state import Conversation

E = TypeVar("E", bound=ConversationEvent)


class CommandBatch:
    """Builds the events of one command with consecutive versions."""

    def __init__(self, state: Conversation, at: datetime, source: str | None) -> None:
        self.state, self.at, self.source = state, at, source
        self.events: list[ConversationEvent] = []

    def add(self, cls: type[E], **fields: Any) -> E:
        """Returns the event of type `cls` with `fields`, at the batch's next version, kept in `events`."""
        event = cls(
            originator_id=self.state.id,
            originator_version=self.state.version + len(self.events) + 1,
            timestamp=self.at,
            source=self.source,
            **fields,
        )
        self.events.append(event)
        return event


def begin(
    state: Conversation | None, at: datetime, source: str | None, history: History | None, what: str
) -> CommandBatch | None:
    """Returns the batch of a command on `state` at `at` from line `source`. Returns None when
    `history` knows the line already: a redelivery stores nothing. Raises ConversationNotStarted
    when `state` is None; `what` names the command."""
    if state is None:
        raise ConversationNotStarted(
            f"{what} waits for conversation_started: the conversation was never started (nothing of it was stored, "
            "deliver it again after its conversation_started)"
        )
    if source is not None and history is not None and history.source(source) is not None:
        return None  # the same line, delivered again
    return CommandBatch(state, at, source)


def require_history(history: History | None) -> History:
    """Returns `history`; raises TypeError when a command that reads it was given None."""
    if history is None:
        raise TypeError("this command reads the conversation's history index: pass history=")
    return history


def require_next(state: Conversation, message: int, what: str) -> None:
    """Raises MessageTooEarly when `message` is past the next number. The next number is one above the
    highest the conversation had, cut ones included."""
    if state.numbered is not None and message > max(state.numbered, state.last_message) + 1:
        raise MessageTooEarly(
            f"{what} {message} waits for message {message - 1}: the conversation's last user message is "
            f"{state.last_message} (numbers go up by one; nothing of it was stored, deliver it again after message {message - 1})",
            f"message {message - 1}",
        )


def require_posted(state: Conversation, message: int, what: str) -> None:
    """Raises MessageTooEarly when user message `message` is still to come (above the last)."""
    if message > state.last_message:
        raise MessageTooEarly(
            f"{what} of message {message} waits for user message {message}: the conversation's last is "
            f"{state.last_message} (nothing of it was stored; deliver it again after message {message})",
            f"message {message}",
        )
