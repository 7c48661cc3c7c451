"""What the store's writes take and give back: a command (`Command`, one input line ready to
decide), what `ConversationStore.handle` did with it (`HandleResult`), and how a batch of them
is refused or conflicts (`BatchRefused`, `BatchConflict`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from domain.conversation import Conversation, History
from domain.errors import ChatrecordError
from domain.events import ConversationEvent


@dataclass(frozen=True)
class Lookups:
    """What deciding a command looks up in the history index, which a store may read before
    `decide` and uses to find a repeat's first result: one line's `digest` (the `source` its
    events carry), the `segment` id it records and the `run` it names, read with the index row;
    `new_segments`, the segment ids it records (a store that decides without reading its index
    assumes them unrecorded); `many`, a command of many lines' digests, segment ids and run ids,
    read at once (None: a command that names none)."""

    digest: str | None = None
    segment: str | None = None
    run: str | None = None
    new_segments: frozenset[str] = frozenset()
    many: tuple[list[str], list[str], list[str]] | None = None


class Command(Protocol):
    """What `ConversationStore.handle` accepts: one input line (or a few of one conversation),
    ready to decide, with what deciding it looks up (`lookups`), which lets a repeat return the
    first result."""

    @property
    def conversation(self) -> str:
        """The chat's id of the conversation the command is for (read-only: a frozen command qualifies)."""
        ...

    def decide(self, state: Conversation | None, history: History) -> list[ConversationEvent]: ...

    def lookups(self) -> Lookups:
        """Returns what deciding the command looks up in the history index."""
        ...


@dataclass(frozen=True)
class HandleResult:
    """What `handle` did. `appended` holds the events this call stored (empty for a repeat);
    `events` is `appended`, or for a repeat the events that recorded it first (the events of
    the same line digest, else the SegmentReturned of the same segment id); `state` is the conversation afterwards (None if it never started); `position` the
    notification id of the last appended event; `attempts` how many tries it took."""

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
    """Raised by `ConversationStore.handle_batch` when commands of the batch refused (nothing
    was stored): `refusals` holds each refusing command's error by its place in the batch."""

    def __init__(self, refusals: dict[int, ChatrecordError]) -> None:
        self.refusals = refusals
        super().__init__("; ".join(str(error) for error in refusals.values()))


class BatchConflict(ChatrecordError):
    """Raised by `ConversationStore.handle_batch` when its append conflicted with another
    writer's (or found the history index other than it read it): nothing was stored."""
