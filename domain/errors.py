"""The chatrecord error family, drawn in one place.

Each error lives beside the layer that raises it. Each message names what went wrong, where, and
what to do.

    ChatrecordError                     every error a user can cause (CLI: `error: …`, exit 1)
    ├── InvalidInput                    a line of the wrong shape
    ├── domain (this module): a conversation refuses a line
    │   ├── LineTooEarly                a line before one it needs (`waits_for`; retryable)
    │   │   ├── ConversationNotStarted
    │   │   ├── MessageTooEarly
    │   │   └── SegmentBeforeMessage, ContinuationBeforeDecision
    │   ├── ConversationAlreadyStarted
    │   ├── UnknownConversation
    │   ├── NoCardWaiting, NoQuestionWaiting, CardAlreadyDecided (CardLeftUndecidedBefore)
    │   ├── UnknownMessage, MessageOutOfOrder, LineOutOfOrder
    │   ├── TurnTruncated
    │   └── WrongConversationKind
    ├── projections                     NoTurnYet, UnknownRuleSet
    ├── adapters/service                VersionMismatch, TurnNotFound, EmptyInput,
    │                                   UnreadableFile, NoDataKeys
    ├── adapters/store                  WriteConflict, BadSetting > BadDatabaseURL,
    │                                   StoreUnusable, BadMasterKey, MissingDataKey,
    │                                   TextsErased, NoChain, BadHeadsFile
    ├── adapters/backends               SchemaNotCreated
    ├── adapters/views                  ViewOutOfStep, RebuildSuperseded
    └── adapters/cli                    NoStore

Any other exception is a bug and keeps its traceback. The HTTP service maps each class to a problem
type (`adapters/http/problems.py`)."""

from __future__ import annotations

ID_SHOWN = 80
"""The most characters of a conversation id an error message repeats."""


def shown_id(conversation: str, quote: str = '"') -> str:
    """Returns `conversation` quoted for an error message. `quote` is the quote character, or "repr"
    for Python's repr. An id longer than ID_SHOWN characters is cut, with its length."""
    cut = conversation if len(conversation) <= ID_SHOWN else conversation[:ID_SHOWN] + "…"
    shown = repr(cut) if quote == "repr" else f"{quote}{cut}{quote}"
    return shown if cut is conversation else f"{shown} ({len(conversation):,} characters)"


class ChatrecordError(Exception):
    """Base of every error a user can cause; the CLI prints it as one line and exits with 1. `field`
    names the input field at fault (`line 3, segment: …`), or None. `waits_for` names what a
    too-early line waits for (`message 2`), or None. Delivered again after that, the line is stored;
    other refusals do not change on redelivery."""

    field: str | None = None
    waits_for: str | None = None


class LineTooEarly(ChatrecordError):
    """Raised when a line comes before a line it needs. Nothing of it is stored. Delivered again after
    what it waits for, it is stored."""

    waits_for: str | None = "the lines before it"

    def __init__(self, message: str, waits_for: str | None = None) -> None:
        super().__init__(message)
        if waits_for is not None:
            self.waits_for = waits_for


class ConversationNotStarted(LineTooEarly):
    """Raised when an event arrives for a conversation that was never started."""

    field = "conversation"
    waits_for = "conversation_started"


class UnknownConversation(ChatrecordError):
    """Raised when a conversation id names no conversation the store holds."""


class ConversationAlreadyStarted(ChatrecordError):
    """Raised when a conversation is started twice with different facts."""

    field = "conversation"


class NoCardWaiting(ChatrecordError):
    """Raised when a card decision names a segment that has no card waiting."""

    field = "segment"


class NoQuestionWaiting(ChatrecordError):
    """Raised when an answer names a segment that has no question waiting."""

    field = "segment"


class CardAlreadyDecided(ChatrecordError):
    """Raised when a card or question is decided, answered or left undecided a second time."""

    field = "segment"


class CardLeftUndecidedBefore(CardAlreadyDecided):
    """Raised when a card or question left undecided is decided or answered afterwards. The late
    decision is not recorded."""


class UnknownMessage(ChatrecordError):
    """Raised when an edit or a retry names a user message the conversation does not have."""

    field = "message"


class MessageOutOfOrder(ChatrecordError):
    """Raised when a user message number is not greater than every earlier one."""

    field = "message"


class MessageTooEarly(LineTooEarly):
    """Raised when a message skips a number, or a retry or edit names a message still to come."""

    field = "message"


class TurnTruncated(ChatrecordError):
    """Raised when an event arrives for a segment or run an edit has already cut away."""

    field = "segment"


class WrongConversationKind(ChatrecordError):
    """Raised when an event is not allowed for the conversation's kind (chat or alt_text)."""

    field = "type"


class SegmentBeforeMessage(LineTooEarly):
    """Raised when a segment returns before any user message started a turn."""

    field = "segment"
    waits_for = "a user message"


class ContinuationBeforeDecision(LineTooEarly):
    """Raised when a continuation returns before its decision. That is: a card or question still waits,
    or no decision came since the segment before."""

    field = "trigger"


class LineOutOfOrder(ChatrecordError):
    """Raised when a line's `follows` version is not the conversation's version. The line came too
    early (it waits for lines before it) or too late (its state has passed)."""

    field = "follows"

    def __init__(self, message: str, follows: int | None = None, actual: int | None = None) -> None:
        super().__init__(message)
        self.follows = follows
        """The version the line names."""
        self.actual = actual
        """The conversation's version when the line came."""
        if self.early:
            self.waits_for = f"version {follows}"

    @property
    def early(self) -> bool | None:
        """True: the line came too early. False: too late. None: versions not known."""
        return None if self.follows is None or self.actual is None else self.actual < self.follows


class InvalidInput(ChatrecordError):
    """Raised when an input line does not have the shape the chat's format requires. The message names
    the source, line number, field path and what was expected. Nothing of that line is stored."""

    def __init__(self, source: str, line: int, field: str, expected: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.expected = expected
        super().__init__(f"{source}: line {line}, {field}: {expected}")
