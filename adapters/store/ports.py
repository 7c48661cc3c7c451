"""What the store needs of a database, as abstract classes each backend implements.

- `HistoryIndex`: one conversation's history index rows (`domain.history_index`), read before a
  command decides and written in the transaction that stores its events.
- `IdempotencyKeys`: the kept `Idempotency-Key`s (`adapters.store.idempotency`).
- `DataKeyStore`: the rows of the data keys and of the master key's check (`adapters.store.keys`).

The store only calls these methods; `adapters.bootstrap` asks the chosen backend
(`adapters.backends`) for its implementations and hands them to the store. Each port has one
contract suite every backend passes (`tests/integration/test_store_ports.py`).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from adapters.store.idempotency import IN_FLIGHT_SECONDS, StoredResponse
from adapters.store.known_records import IndexPuts
from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, History

KeyRow = tuple[bytes | None, Any]
"""A data key row: the wrapped key (None once erased) and when it was erased (None before; a
datetime or its ISO text)."""


class AssumptionFailed(Exception):  # not an error of the caller's: the command is decided again
    """Raised by the append when the index no longer stands as an `AssumedHistory` assumed
    (another writer appended, the line or segment was recorded before, the run was cut):
    nothing was stored, and the command is decided again from the index."""


class IndexReading(History, Protocol):
    """One conversation's index as a command reads it (what `HistoryIndex.reading` yields): its
    `version` (0 before the first event), the hash chain's `tip` at that version where it was
    read with the index row (else None), and the reads ahead of a command's lookups: `prefetch`
    (one line's digest, segment and run, with the index row) and `prefetch_many` (many lines'),
    each doing nothing where every lookup is cheap already."""

    @property
    def version(self) -> int: ...

    @property
    def tip(self) -> bytes | None: ...

    def prefetch(self, digest: str | None, segment: str | None = None, run: str | None = None) -> None: ...

    def prefetch_many(self, digests: Iterable[str], segments: Iterable[str], runs: Iterable[str] = ()) -> None: ...


class HistoryIndex(ABC):
    """The history index tables of one database.

    An index (what `reader`, `reading` give) answers `domain.history_index.History`'s lookups
    for one conversation and has `version`: the version of the last event indexed, 0 before the
    first.
    """

    checks_assumptions: bool = False
    """True where `write` checks an `AssumedHistory` in the events' transaction, so a command
    may be decided without reading the index first."""

    @abstractmethod
    def create(self) -> None:
        """Creates the tables where they do not exist. Does nothing where the backend made them
        with the store."""

    @abstractmethod
    def reader(self, cid: UUID) -> Any:
        """Returns the index of conversation `cid`; each lookup is a read of its own."""

    @abstractmethod
    def reading(self, cid: UUID | None) -> AbstractContextManager[IndexReading]:
        """Returns a context that yields the index of conversation `cid` for one command's
        lookups, each lookup asked once. `cid` None yields an empty index."""

    @abstractmethod
    def write(
        self,
        cid: UUID,
        state: Any,
        events: Sequence[ConversationEvent],
        curs: Any = None,
        *,
        rebuild: bool = False,
        follows: bool = False,
        assumed: AssumedHistory | None = None,
        puts: list[IndexPuts] | None = None,
    ) -> int | None:
        """Indexes `events` of conversation `cid`; `state` is the aggregate's state before them.

        `curs` is the cursor of the transaction that stores the events (the append's); None
        writes in a transaction of its own. `rebuild` deletes the conversation's rows first.
        `follows` says the caller saw the index at the version before the first event, so it is
        not read again. `assumed` is the history the events were decided on; it is checked with
        them where `checks_assumptions`. `puts`, where given, gets the rows the write puts (one
        `IndexPuts`) where the backend gathers them.

        Returns how many card outcomes the events added (negative when an edit cut some); None
        when nothing was indexed or the backend does not count them. Where `assumed` does not
        hold, the append fails and stores nothing: the recorder raises AssumptionFailed (on
        PostgreSQL the check fails the append's statement with chatrecord's own SQLSTATE, which
        the recorder translates). Raises ValueError for `assumed` where not `checks_assumptions`.
        """


class IdempotencyKeys(ABC):
    """The kept `Idempotency-Key`s of one store: for each key, one `StoredResponse` row.

    Times are unix seconds of `clock`. A reservation (`adapters.store.idempotency.reservation`)
    expires `seconds` after it is made.
    """

    clock: Callable[[], float] = staticmethod(time.time)
    seconds: float = IN_FLIGHT_SECONDS

    @abstractmethod
    def create(self) -> None:
        """Creates the table where it does not exist. Safe to call from several processes."""

    @abstractmethod
    def get(self, key: str) -> StoredResponse | None:
        """Returns what is kept for `key`, None when nothing is."""

    @abstractmethod
    def reserve(self, key: str, fingerprint: str) -> tuple[StoredResponse, bool]:
        """Reserves `key` for a request with `fingerprint`, atomically. Returns (the new
        reservation, True) when this request has the key: none was kept, or the kept one was an
        expired reservation. Returns (what is kept, False) otherwise."""

    @abstractmethod
    def finish(self, key: str, reserved: StoredResponse, kept: StoredResponse) -> StoredResponse:
        """Keeps `kept` in place of the reservation `reserved`. Returns what is kept for the key
        afterwards: `kept`, or another request's row where `reserved` was taken over."""

    @abstractmethod
    def release(self, key: str, reserved: StoredResponse) -> None:
        """Deletes the reservation `reserved`, unless another request took it over."""


class DataKeyStore(ABC):
    """The rows of the data keys (one per conversation) and of the master key's check (one or
    none) in one database. Wrapped keys and the check value are opaque bytes here."""

    @abstractmethod
    def select(self, originator_id: UUID) -> KeyRow | None:
        """Returns the key row of conversation `originator_id`, None when it has none."""

    @abstractmethod
    def insert(self, originator_id: UUID, wrapped: bytes, check: bytes | None) -> None:
        """Inserts a key row unless the conversation has one, and only while the check row is
        `check` (None: while there is none). Inserts nothing otherwise; raises nothing for it."""

    @abstractmethod
    def select_check(self) -> bytes | None:
        """Returns the check value, None when there is no check row."""

    @abstractmethod
    def insert_check(self, sealed: bytes) -> bool:
        """Inserts the check row `sealed` unless there is one or a key is stored unwrapped (a
        first byte 0), in one statement. Returns False where the database is read-only, else
        True."""

    @abstractmethod
    def wrapped_sample(self) -> tuple[UUID, bytes] | None:
        """Returns one key wrapped by a master key (first byte not 0) as (conversation, stored
        bytes), None when there is none."""

    @abstractmethod
    def erase(self, originator_id: UUID, at: datetime) -> None:
        """Deletes the key of `originator_id` and records `at` as its erasure time. An erased
        key keeps its first time; a conversation with no row gets an erased one."""

    @abstractmethod
    def counts(self) -> tuple[int, int, int]:
        """Returns how many keys are stored wrapped, unwrapped and erased."""

    @abstractmethod
    def rewrap(self, change: Callable[[UUID, bytes], bytes], sealed: bytes | None, also: Callable[[Any], None]) -> int:
        """In one transaction that holds off other writers of the key rows: replaces each stored
        key `k` of conversation `c` by `change(c, k)`, and the check row by `sealed` (deleting it
        for None), then calls `also(cursor)`. Returns how many keys it replaced. An error raised
        by `change` or `also` rolls everything back and goes through."""

    @abstractmethod
    def scrub(self) -> None:
        """Removes the bytes of deleted rows from the database files where the backend can;
        does nothing where it cannot."""


def never_lost(error: BaseException) -> bool:
    """Says no error is a lost connection (a backend with no server)."""
    return False


@dataclass(frozen=True)
class StorePorts:
    """A backend's implementations of the ports the store is built with (`adapters.bootstrap`).
    `idempotency_keys` is made without its table; the store makes it on first use."""

    history: HistoryIndex
    idempotency_keys: IdempotencyKeys
    connection_lost: Callable[[BaseException], bool] = never_lost
    """Says whether an error (the library's, with the driver's as its cause) is the connection to
    the database server failing, refused or broken off, not the server answering a statement with
    an error: the backend's wording of its driver's errors (`StoreFactory.connection_lost`);
    never, by default (a backend with no server)."""
