"""The views' port: what the read models need of a database (`ViewStorage`), one conversation's rows in one
generation (`ViewRows`), and where a transaction's statements go (`AppendTarget`).

Each backend implements them; the composition root hands the storage in. The contract is
`tests/integration/test_view_ports.py`. A generation is a set of row tables (`row_tables.TABLES`). The
pointer names the live one, its rule set and the next number. Writers take the views' lock shared; a
rebuild's switch takes it exclusive. Times are microseconds since the epoch. Errors: `ReadMoved` (read
again) and `NeedsSnapshot` (read again with a snapshot)."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from adapters.store.crypto import ViewTexts
from adapters.views.caches import MessagesCache, PlacementCache
from adapters.views.listing import Listed, ListQuery
from adapters.views.recent_rows import WrittenRowsCache
from adapters.views.storage_reads import Pointer, TurnInputRows, TurnRows
from adapters.views.usage_rows import UsageQuery, UsageSums
from projections.card_outcomes import CardOutcome
from projections.overview import Marks, Overview
from projections.run_record import Entry
from projections.summary_rows import Summary, TurnMark
from projections.transcript import Message
from projections.usage import UsageRow

log = logging.getLogger("chatrecord")


class AppendTarget(Protocol):
    """Where one transaction's statements go: a cursor, a queue for a thread of its own, or an append
    document. The views only hand it back to the storage."""

    def execute(self, query: Any, params: Any = ..., /) -> Any:
        """Runs (or holds) one statement."""

    def fetchone(self) -> Any:
        """Returns the first row of the last statement, None for none."""

    def fetchall(self) -> list[Any]:
        """Returns every row of the last statement."""


class QueuedTarget(AppendTarget, Protocol):
    """An `AppendTarget` whose statements run on a thread of their own (a rebuild's pages)."""

    def commit(self) -> None:
        """Ends the transaction of the statements so far, without waiting for it."""

    def close(self) -> None:
        """Waits for every statement, and raises the first error."""


@runtime_checkable
class FoldsInParts(Protocol):
    """A recorder that reads a rebuild's parts chosen on the server (PostgreSQL's `EventRecorder`). Others
    are read with the library's `select_notifications`."""

    def select_notifications_to_fold(
        self, start: int, limit: int, stop: int | None, part: tuple[int, int] | None = None
    ) -> Sequence[Any]:
        """Returns the notifications after `start` up to `stop`, at most `limit`, in order. `part` is (part,
        parts); None: all."""
        ...

    def count_notifications_by_part(self, stop: int, parts: int) -> list[int]:
        """Returns how many of the notifications up to `stop` each of `parts` parts holds."""
        ...


class ReadMoved(Exception):  # a signal to the reader, never seen outside ReadModels
    """Raised by a turn read whose rows moved: another process's rebuild dropped its tables, or the
    summary's version changed between statements. The reader takes the live pointer and reads again."""


class NeedsSnapshot(Exception):  # a signal to the reader, never seen outside ReadModels
    """Raised by a target of `ViewStorage.reading(snapshot=False)` at its second statement."""


def not_updated(error: Exception) -> None:
    """Logs in one line that a write's read models were not updated; the next read catches up. Logs the
    error's first line, without the statement a driver may quote."""
    reason = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    log.warning("chatrecord: the read models were not updated with this write (%s); the next read catches up", reason)


@dataclass
class Appended:
    """What an append's rows wrote, for the caches of the reads after it (`ViewRows.appended`). Fields: the
    entries and card outcomes written as (kind, body, item); the transcript messages whose body reads
    back as the message; the newest rows (None: unknown); the summary's JSON where the backend made it;
    the append document's views section (None: not written into one)."""

    bodies: list[tuple[str, str, Entry | CardOutcome]] = field(default_factory=list)
    messages: list[tuple[str, Message]] = field(default_factory=list)
    recent: WrittenRowsCache | None = None
    summary_json: str | None = None
    views: dict[str, Any] | None = None


class ViewRows(ABC):
    """One conversation's rows in one generation, read and written in the transaction that made them
    (`ViewStorage.rows`). The fold (`projections.row_fold`) writes them; the reads answer from what the
    writes left. Indexes count transcript messages from 0. `number` is a user message's number; `seq` is
    a run record entry's version."""

    tip: bytes | None = None
    """The hash chain's hash at the summary's version, where the read that made these rows took
    it (`TurnRows.tip`); None otherwise."""
    placement: PlacementCache | None = None
    """What a turn read of one statement knew and learned of the transcript rows for placing
    its notes (PostgreSQL's prefetched rows); None elsewhere."""

    @abstractmethod
    def clear(self) -> None:
        """Deletes every row of the conversation, the entries set aside too."""

    @abstractmethod
    def summary(self) -> Summary | None:
        """Returns the conversation's summary, None before its first event."""

    @abstractmethod
    def put_summary(self, summary: Summary) -> None:
        """Inserts or replaces the summary."""

    @abstractmethod
    def entry(self, segment: str) -> Entry | None:
        """Returns the kept entry of `segment`, None if there is none."""

    @abstractmethod
    def entry_seq(self, segment: str) -> int | None:
        """Returns the version of the kept entry of `segment`, None if there is none."""

    @abstractmethod
    def put_entry(self, entry: Entry) -> None:
        """Inserts or replaces the entry of version `entry.seq`."""

    @abstractmethod
    def delete_entries(self, seqs: Iterable[int]) -> None:
        """Deletes the entries of these versions; a missing one is no error."""

    @abstractmethod
    def set_aside(self, seqs: Iterable[int]) -> None:
        """Moves the entries of these versions out of the run record, into `aside`."""

    @abstractmethod
    def drop_aside(self) -> None:
        """Deletes the entries set aside."""

    @abstractmethod
    def aside(self) -> tuple[Entry, ...]:
        """Returns the entries set aside, oldest first."""

    @abstractmethod
    def entries(
        self, decode: Callable[[str], Entry] | None = None, newest: int | None = None, total: int | None = None
    ) -> Sequence[Entry]:
        """Returns the kept entries, oldest first. `decode` may run on first access to each. With `newest`
        and `total`, older ones may be read on first access. Raises ReadMoved when they are not `total`
        in all."""

    @abstractmethod
    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        """Appends card outcomes, keyed by `seq` (version, place)."""

    @abstractmethod
    def cut_outcomes(self, cards: set[str], length: int) -> int:
        """Deletes the outcomes of `cards` and those of no card at or after index `length`; returns how
        many."""

    @abstractmethod
    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        """Returns the card outcomes, oldest first; only the `newest` ones if given."""

    @abstractmethod
    def message(self, index: int) -> Message | None:
        """Returns transcript message `index`, None past the end."""

    @abstractmethod
    def messages(self) -> tuple[Message, ...]:
        """Returns the whole transcript, in order."""

    @abstractmethod
    def user_index(self, number: int) -> int | None:
        """Returns the index of the newest message of user message `number`, None for none."""

    @abstractmethod
    def block_end(self, number: int) -> int | None:
        """Returns the index of the user message after user message `number` (None: none)."""

    @abstractmethod
    def messages_at(self, indexes: set[int], kept: MessagesCache | None = None) -> dict[int, Message]:
        """Returns the transcript messages at `indexes` there are."""

    @abstractmethod
    def block_ends(self, numbers: set[int]) -> dict[int, int | None]:
        """Returns `block_end` of each user message number that has a message."""

    @abstractmethod
    def placement_reads(
        self, length: int, kept: MessagesCache | None = None, known: PlacementCache | None = None
    ) -> tuple[Callable[[set[int]], dict[int, Message]], Callable[[set[int]], dict[int, int | None]]]:
        """Returns `(messages_at, block_ends)` for placing a turn's notes in a transcript of `length`
        messages. `kept` and `known` are caches it may read and fill."""

    @abstractmethod
    def put_message(self, index: int, message: Message) -> None:
        """Inserts or replaces transcript message `index`; a new one's block end is unset."""

    @abstractmethod
    def end_block(self, index: int, end: int | None) -> None:
        """Records where the block of the user message at `index` ends (None: at the end)."""

    @abstractmethod
    def cut_messages(self, keep: int) -> None:
        """Deletes the transcript messages from index `keep` on."""

    @abstractmethod
    def put_page(self, message: int, page: int) -> None:
        """Records that typed message `message` changed the page to `page`."""

    @abstractmethod
    def cut_pages(self, after: int) -> tuple[int | None, int]:
        """Deletes the page changes after message `after`. Returns the newest kept page (None: none) and the
        newest kept non-zero page (0: none)."""

    @abstractmethod
    def put_turn(self, turn: TurnMark) -> None:
        """Records a model call a user message started; a second of one version is ignored."""

    @abstractmethod
    def put_usage(self, usage: UsageRow) -> None:
        """Inserts or replaces the usage row of the segment of version `usage.seq` (nothing where
        the generation has no usage table: an earlier version made it)."""

    @abstractmethod
    def turn_starts(self, message: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Returns the versions that started a turn of user message `message`, oldest first. When there are
        none, also the numbers of user messages that started any turn, ascending; else empty."""

    def turn_rows(
        self, length: int, version: int, kept: MessagesCache | None = None, rendered: Any = None
    ) -> tuple[tuple[Message, ...], tuple[Entry, ...], tuple[CardOutcome, ...]] | None:
        """Returns a turn's rows in one statement, or None where the rows cannot (read one kind at a time).
        They are: the first `length` transcript messages, the entries set aside for the latest turn and
        up to `version`, the card outcomes up to `version` (`row_state.turn_rows_state`)."""
        return None

    # ---------------------------------------------------------------- an append's rows

    def prime(self, recent: WrittenRowsCache | None, summary: Summary | None) -> None:
        """Takes `recent` as the newest rows at `summary`, so the fold's reads skip the database. Does
        nothing where the rows do not hold writes."""
        return None

    def prefetch(self, events: Sequence[Any]) -> None:
        """Reads at once what folding `events` will ask of the stored rows, where the backend
        can; nothing otherwise."""
        return None

    def flush(self) -> None:
        """Sends the writes held so far (rows that hold them); nothing otherwise."""
        return None

    def appended(self) -> Appended:
        """Returns what the writes so far wrote (`Appended`, after `flush`) and forgets the bodies it hands
        out. Knows nothing where the rows do not hold writes."""
        return Appended()


class ViewStorage(ABC):
    """What the read models need of a database: transactions, the generations' tables and pointer, the
    views' lock, the log's version, the list, and a turn's reads. A method taking `curs` runs in that
    target's transaction."""

    texts: ViewTexts | None = None
    """Seals the transcript rows' texts with each conversation's data key (None: plain)."""
    shared = True
    """Whether other processes use the same tables (and may switch the live generation)."""
    reads_ahead = False
    """Whether a rebuild reads the log's next page on a thread of its own while it folds one."""
    folds_in_parts = False
    """Whether a rebuild may fold the log in worker processes, each its own conversations."""
    listing_tables: tuple[str, ...] = ()
    usage_tables: tuple[str, ...] = ()
    """The usage audit's table a generation has besides `TABLES` (`usage`; none: kept in memory)."""
    """The list's table a generation has besides `TABLES` (`listed`; none: the rows are listed from the summaries)."""
    overview_tables: tuple[str, ...] = ()
    """The overview's tables a generation has besides `TABLES` (none: no overview rows)."""
    reads_turn_in_one = False
    """Whether `turn_input_rows` reads a latest turn's rows in one statement."""

    @abstractmethod
    def transaction(self, write: bool) -> AbstractContextManager[AppendTarget]:
        """Yields the target of one transaction, committed at the end if `write`."""

    @abstractmethod
    def rows(self, curs: AppendTarget, generation: int, cid: UUID, buffered: bool = False) -> ViewRows:
        """Returns the rows of conversation `cid` in `generation`; `buffered` rows hold their
        writes until `flush()`."""

    @abstractmethod
    def pointer(self, curs: AppendTarget) -> Pointer | None:
        """Returns the live pointer, None before the first `set_pointer`."""

    @abstractmethod
    def set_pointer(self, curs: AppendTarget, pointer: Pointer) -> None:
        """Makes `pointer` the live one."""

    @abstractmethod
    def create(self, curs: AppendTarget, generation: int) -> None:
        """Creates the tables of `generation`, if missing."""

    @abstractmethod
    def drop(self, curs: AppendTarget, generation: int) -> None:
        """Drops the tables of `generation`, and what else the backend keeps of it."""

    @abstractmethod
    def generations(self, curs: AppendTarget) -> set[int]:
        """Returns the generations whose tables exist."""

    @abstractmethod
    def log_version(self, curs: AppendTarget, cid: UUID) -> int:
        """Returns the version of the conversation's newest stored event, 0 if none."""

    @abstractmethod
    def listed(self, curs: AppendTarget, generation: int, query: ListQuery) -> list[Listed]:
        """Returns the list rows of `generation` that `query` admits (`ListQuery.admits`), at
        most `query.limit`, newest activity first, then by `cid` descending. A row without
        activity (`at`) is not listed."""

    @abstractmethod
    def usage(self, curs: AppendTarget, generation: int, query: UsageQuery) -> tuple[list[UsageSums], UsageSums]:
        """Returns the usage rows of `generation` that `query` admits, summed by its groups (at
        most `query.limit` after `query.after`, in its order: `adapters.views.usage_rows.sum_rows`
        defines them), and their sums over every group (`key` None)."""

    def has_usage(self, curs: AppendTarget, generation: int) -> bool:
        """Returns whether `generation` has the usage rows (`usage`): an earlier version made none."""
        return True

    def pointer_and_summary(self, curs: AppendTarget, cid: UUID, generation: int) -> tuple[Pointer | None, str | None]:
        """Returns the live pointer and, where the backend reads both at once and `generation` is live, the
        summary body of `cid` (None: read it through `rows`)."""
        return self.pointer(curs), None

    def lock(self, curs: AppendTarget, exclusive: bool) -> None:
        """Takes the views' lock until the transaction ends (shared, or exclusive)."""
        return None

    def savepoint(
        self, curs: AppendTarget, on_failure: Callable[[Exception], object] | None = None
    ) -> AbstractContextManager[AppendTarget]:
        """Yields a target inside a savepoint of `curs`'s transaction. An error inside rolls back to it and
        goes to `on_failure`. It is logged (`not_updated`) unless `on_failure` returns True. The
        transaction goes on."""
        raise NotImplementedError  # every backend has its own; not abstract: a read-only test double need not

    def reading(self, snapshot: bool = True) -> AbstractContextManager[AppendTarget]:
        """Yields a target whose statements all see one snapshot. Without `snapshot`, a
        backend may run one statement only and raise NeedsSnapshot at a second. Raises
        ReadMoved when the read's tables were dropped meanwhile."""
        return self.transaction(write=False)

    def queued(self) -> QueuedTarget | None:
        """Returns a target whose statements run on a thread of their own; None where the backend has none."""
        return None

    def has_activity(self, curs: AppendTarget, generation: int) -> bool:
        """Returns whether `generation` has the list's rows (`listed`): an earlier version made none."""
        return True

    def old_tables(self, curs: AppendTarget) -> tuple[str | None, list[str]]:
        """Returns the rule set of the previous version's views and their tables, if any."""
        return None, []

    def drop_table(self, curs: AppendTarget, name: str) -> None:
        """Drops one of `old_tables`."""
        raise NotImplementedError  # only where `old_tables` names any

    def turn_rows(
        self,
        curs: AppendTarget,
        cid: UUID,
        generation: int,
        newest: int,
        kept_at: int | None = None,
        entries: int | None = None,
        since: int | None = None,
        tail_from: int = 0,
        held_at: int | None = None,
    ) -> TurnRows | None:
        """Reads a turn's summary, log version, newest entries and outcomes in one statement (`TurnRows`).
        None where the backend cannot; read them through `rows`."""
        return None

    def prefetched_rows(
        self,
        curs: AppendTarget,
        generation: int,
        cid: UUID,
        entries: str | Sequence[str],
        outcomes: str | Sequence[str],
        newest: int,
        summary: Summary | None,
        known: PlacementCache | None,
    ) -> ViewRows:
        """Returns the rows of a turn read whose newest entries and outcomes `turn_rows` read
        (their bodies, oldest first). Only where `turn_rows` reads."""
        raise NotImplementedError  # only where `turn_rows` returns rows

    def turn_input_rows(self, curs: AppendTarget, cid: UUID, generation: int) -> TurnInputRows | None:
        """Reads the rows of the latest turn in one statement (`TurnInputRows`), where the
        backend can; None: read them through `rows`."""
        return None

    def overview(
        self, cid: UUID, generation: int, logged: int, fold: Callable[[Overview, Marks], Overview], keep: bool = True
    ) -> Overview | None:
        """Returns the overview of `cid` in `generation` at log version `logged`. A kept one at `logged` is
        returned. Else `fold(kept, marks)` folds the events after it and is written back under the views'
        shared lock; one past `logged` is replaced by `fold(Overview(), marks)`. None where the
        generation or backend keeps no overview, and, with `keep` False (a store opened read-only), where
        no kept one is at `logged`: nothing is written."""
        return None
