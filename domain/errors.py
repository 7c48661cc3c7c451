"""The chatrecord error family, drawn here in one place; each error lives beside the layer that
raises it, and each message names what went wrong, where, and what to do.

    ChatrecordError                     every error a user can cause (CLI: `error: …`, exit 1)
    ├── InvalidInput                    a line of the wrong shape: source, line, field, expected
    ├── domain (this module): a conversation refuses a line
    │   ├── LineTooEarly                a line before one it needs (`waits_for`; retryable):
    │   │   ├── ConversationNotStarted  a line before its conversation_started
    │   │   ├── MessageTooEarly         a user message past a gap, a retry or edit of one to come
    │   │   └── SegmentBeforeMessage, ContinuationBeforeDecision
    │   ├── ConversationAlreadyStarted  started again with another kind or owner
    │   ├── UnknownConversation         an id the store does not hold (lookups)
    │   ├── NoCardWaiting, NoQuestionWaiting (too early, `waits_for`, on a segment still to come),
    │   │   CardAlreadyDecided (CardLeftUndecidedBefore)
    │   ├── UnknownMessage, MessageOutOfOrder, LineOutOfOrder
    │   ├── TurnTruncated               an edit cut the segment or run away
    │   └── WrongConversationKind
    ├── projections
    │   ├── NoTurnYet                   no user message or retry has started a turn (turn.py)
    │   └── UnknownRuleSet              (rules.py)
    ├── adapters/service                VersionMismatch (If-Match), TurnNotFound (--at N),
    │                                   EmptyInput (a file with no conversation), UnreadableFile,
    │                                   NoDataKeys
    ├── adapters/store                  WriteConflict (every retry conflicted), BadSetting >
    │                                   BadDatabaseURL, StoreUnusable, BadMasterKey,
    │                                   MissingDataKey, TextsErased, NoChain,
    │                                   BadHeadsFile
    ├── adapters/backends               SchemaNotCreated (PostgreSQL tables missing, not creatable)
    ├── adapters/views                  ViewOutOfStep, RebuildSuperseded
    └── adapters/cli                    NoStore (a reading command on a store that is not there)

Anything else that escapes is a bug and keeps its traceback; the HTTP service maps each class
to a problem type (`adapters/http/problems.py`).
"""

from __future__ import annotations

ID_SHOWN = 80
"""The most characters of a conversation id an error message repeats."""


def shown_id(conversation: str, quote: str = '"') -> str:
    """Returns `conversation` quoted for an error message: in `quote` (`'"'`), or as Python's
    repr (`quote="repr"`: single quotes, escapes); an id longer than ID_SHOWN characters is cut
    there, with how long it is, so a message stays one short line."""
    cut = conversation if len(conversation) <= ID_SHOWN else conversation[:ID_SHOWN] + "…"
    shown = repr(cut) if quote == "repr" else f"{quote}{cut}{quote}"
    return shown if cut is conversation else f"{shown} ({len(conversation):,} characters)"


class ChatrecordError(Exception):
    """Base of every error a user can cause; the CLI prints it as one line and exits with 1.

    `field` names the input field (the chat's key) a conversation's refusal is about, so an
    ingester can say `line 3, segment: …`; None where no one field is at fault. `waits_for`
    names what a line that came too early waits for (`message 2`): delivered again after it,
    the line is stored; None for every other refusal, which delivering again does not change.
    """

    field: str | None = None
    waits_for: str | None = None


class LineTooEarly(ChatrecordError):
    """Raised when a line comes before a line it needs (the chat delivers at least once, in
    any order): nothing of it is stored, and delivered again after what it waits for it is."""

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
    """Raised when a card or question that was left undecided (by a new user message or the end
    of the tour) is decided or answered afterwards: the late decision is not recorded."""


class UnknownMessage(ChatrecordError):
    """Raised when an edit or a retry names a user message the conversation does not have."""

    field = "message"


class MessageOutOfOrder(ChatrecordError):
    """Raised when a user message number is not greater than every earlier one."""

    field = "message"


class MessageTooEarly(LineTooEarly):
    """Raised when a user message (or an answer joining the transcript) skips a number, or a
    retry or an edit names a message still to come: it waits for the message before it."""

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
    """Raised when a continuation (trigger `approval` or `answer`) returns while a card or
    question still waits, or with no decision since the segment before it: a continuation
    follows its decision."""

    field = "trigger"


class LineOutOfOrder(ChatrecordError):
    """Raised when a line names the conversation version it follows (`follows`) and the
    conversation is at another version: it came too early (it waits for the lines before it)
    or too late (it was written for an older state)."""

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
        """True: the line came before the lines it follows; False: after its state had passed;
        None when the versions are not known."""
        return None if self.follows is None or self.actual is None else self.actual < self.follows


class InvalidInput(ChatrecordError):
    """Raised when an input line does not have the shape the chat's format requires.

    The message names the source, the line number, the field path and what was expected;
    nothing of that line is stored.
    """

    def __init__(self, source: str, line: int, field: str, expected: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.expected = expected
        super().__init__(f"{source}: line {line}, {field}: {expected}")
