"""What the store's writes take and give: `Command`, `HandleResult`, `BatchRefused`, `BatchConflict`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from domain.conversation import Conversation, History
from domain.errors import ChatrecordError
from domain.events import ConversationEvent
from domain.history_index import LayeredHistory


@dataclass(frozen=True)
class Lookups:
    """What deciding a command looks up in the history index, read before `decide`. `digest`: one
    line's source. `segment`, `run`: the ids it names, read with the index row. `new_segments`: the
    segments it records, assumed unrecorded without a read. `many`: many lines' digests, segments
    and runs, read at once; None when it names none. `legacy`: one line's plain digest, which an
    event stored before digests were keyed carries (`adapters.store.line_digests`); None when
    `digest` is plain."""

    digest: str | None = None
    segment: str | None = None
    run: str | None = None
    new_segments: frozenset[str] = frozenset()
    many: tuple[list[str], list[str], list[str]] | None = None
    legacy: str | None = None


class Command(Protocol):
    """What `ConversationStore.handle` accepts: one line, or a few of one conversation, ready to
    decide. `lookups` lets a repeat return the first result. A command may keep `folded` after
    `decide` returned events: the last of them and the state after them, not folded again."""

    @property
    def conversation(self) -> str:
        """The chat's id of the conversation the command is for (read-only: a frozen command qualifies)."""
        ...

    def decide(self, state: Conversation | None, history: History) -> list[ConversationEvent]: ...

    def lookups(self) -> Lookups:
        """Returns what deciding the command looks up in the history index."""
        ...


@runtime_checkable
class KeyedLines(Protocol):
    """A command of input lines (`RecordLines`): the store keys their digests before it decides."""

    starts: bool
    """Whether its first line starts the conversation (`conversation_started`)."""
    indexed: LayeredHistory | None
    """After `decide` returned events: the history it decided on with their index writes on top, which
    an assumed append sends instead of folding the events again (`AssumedHistory.decided`)."""

    def key_digests(self, keyed: Callable[[str], str] | None) -> None:
        """Takes each line's digest as `keyed` gives it (None: the plain digest), in its events' `source`
        and its lookups."""
        ...


@dataclass(frozen=True)
class HandleResult:
    """What `handle` did. `appended`: the events this call stored, empty for a repeat. `events`:
    `appended`, or for a repeat the events that recorded it first. `state`: the conversation
    afterwards, None if it never started. `position`: the last appended event's notification id.
    `attempts`: tries taken."""

    conversation: str
    appended: tuple[ConversationEvent, ...]
    events: tuple[ConversationEvent, ...]
    state: Conversation | None
    position: int | None
    attempts: int
    read_after: str | None = None
    """The write's read-after position, set by the service where it reads from standbys
    (`adapters.api.Chatrecord.position`); None otherwise."""

    @property
    def repeated(self) -> bool:
        """Returns True when nothing was appended because the input was recorded before."""
        return not self.appended


class BatchRefused(ChatrecordError):
    """Raised by `handle_batch` when commands refused; nothing was stored. `refusals` holds each
    refusing command's error by its place in the batch."""

    def __init__(self, refusals: dict[int, ChatrecordError]) -> None:
        self.refusals = refusals
        super().__init__("; ".join(str(error) for error in refusals.values()))


class BatchConflict(ChatrecordError):
    """Raised by `handle_batch` when its append conflicted or found the index moved; nothing was stored."""
