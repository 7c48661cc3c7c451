"""What the store needs of a database, as abstract classes each backend implements.

- `HistoryIndex`: one conversation's index rows, read before deciding, written with the events.
- `IdempotencyKeys`: the kept `Idempotency-Key`s.
- `DataKeyStore`: the data key rows and the master key's check row.

`adapters.bootstrap` hands the chosen backend's implementations to the store. Every backend passes
each port's contract suite (`tests/integration/test_store_ports.py`)."""

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
    """Raised by the append when the index no longer stands as an `AssumedHistory` assumed. Nothing was
    stored; the command is decided again from the index."""


class IndexReading(History, Protocol):
    """One conversation's index as a command reads it. `version` is 0 before the first event. `tip` is
    the chain's hash there, or None. `prefetch` and `prefetch_many` read a command's lookups ahead,
    or do nothing."""

    @property
    def version(self) -> int: ...

    @property
    def tip(self) -> bytes | None: ...

    def prefetch(
        self, digest: str | None, segment: str | None = None, run: str | None = None, legacy: str | None = None
    ) -> None: ...

    def prefetch_many(self, digests: Iterable[str], segments: Iterable[str], runs: Iterable[str] = ()) -> None: ...


class HistoryIndex(ABC):
    """The history index tables of one database. An index answers `History`'s lookups for one
    conversation. Its `version` is the last indexed event's, 0 before the first."""

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

        `curs` is the append's transaction; None writes in one of its own. `rebuild` deletes the
        conversation's rows first. `follows`: the index is at the version before. `assumed` is
        checked with the events where `checks_assumptions`. `puts` gets the rows written. Returns
        the card outcomes added (negative after a cut); None when nothing was indexed or not
        counted. Where `assumed` does not hold the append stores nothing and raises
        AssumptionFailed. Raises ValueError for `assumed` where not `checks_assumptions`."""


class IdempotencyKeys(ABC):
    """The kept `Idempotency-Key`s of one store, one `StoredResponse` row per key. Times are unix
    seconds of `clock`. A reservation expires `seconds` after it is made."""

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
        """Reserves `key` for `fingerprint` atomically. Returns (the new reservation, True) when none
        was kept or the kept one had expired. Returns (what is kept, False) otherwise."""

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
        """Inserts check row `sealed` unless there is one or an unwrapped key, in one statement.
        Returns False where the database is read-only, else True."""

    @abstractmethod
    def wrapped_sample(self) -> tuple[UUID, bytes] | None:
        """Returns one wrapped key as (conversation, stored bytes), None when there is none."""

    @abstractmethod
    def erase(self, originator_id: UUID, at: datetime) -> None:
        """Deletes the key of `originator_id` and records `at` as its erasure time. An erased
        key keeps its first time; a conversation with no row gets an erased one."""

    @abstractmethod
    def erased(self) -> set[UUID]:
        """Returns the conversations whose key is erased (`wrapped_key` NULL), as the database holds
        them now."""

    @abstractmethod
    def counts(self) -> tuple[int, int, int]:
        """Returns how many keys are stored wrapped, unwrapped and erased."""

    @abstractmethod
    def rewrap(self, change: Callable[[UUID, bytes], bytes], sealed: bytes | None, also: Callable[[Any], None]) -> int:
        """Replaces each key `k` of conversation `c` by `change(c, k)` and the check row by `sealed`.
        One transaction holds off other writers; `sealed` None deletes the row. Then `also(cursor)`
        runs. Returns how many keys it replaced. An error from `change` or `also` rolls back and
        propagates."""

    @abstractmethod
    def scrub(self) -> None:
        """Removes deleted rows' bytes from the database files where the backend can."""


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
