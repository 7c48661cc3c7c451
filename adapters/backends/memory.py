"""The in-memory backend: the library's POPO persistence, for tests; nothing outlives the process.
`MemoryFactory` makes the chained recorder and the data keys. It hands out the history index, the views
and the idempotency keys, each in dicts."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.popo import POPOFactory as LibraryPOPOFactory

from adapters.backends import StoreFactory
from adapters.store.chain import PAGE, ChainedRecorder, Link, Stored, run_inline
from adapters.store.chain_checks import BrokenChain, VerifiedPosition
from adapters.store.crypto import ViewTexts
from adapters.store.history_rows import write_folded
from adapters.store.idempotency import StoredResponse, reservation
from adapters.store.keys import DataKeys
from adapters.store.known_records import IndexPuts
from adapters.store.ports import DataKeyStore, HistoryIndex, IdempotencyKeys, KeyRow
from adapters.store.reproductions import ReproductionRow, ReproductionRows, StreamConflict
from adapters.views.listing import Listed, ListQuery
from adapters.views.memory_rows import MemoryConversation, MemoryRows
from adapters.views.ports import ViewStorage
from adapters.views.storage_reads import Pointer
from adapters.views.usage_rows import UsageQuery, UsageSums, sum_rows
from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, MemoryHistory

log = logging.getLogger("chatrecord")


class ChainedPOPORecorder(ChainedRecorder, POPOApplicationRecorder):
    """The library's in-memory application recorder with the hash chain (a dict)."""

    def __init__(self) -> None:
        super().__init__()
        self.chain: dict[tuple[UUID, int], bytes] = {}
        self.mark: str | None = None
        self.verified: dict[UUID, VerifiedPosition] = {}
        self.broken: dict[UUID, BrokenChain] = {}
        self.view_tables = MemoryViewTables()
        """The views' rows (`MemoryViewStorage`), which the in-memory database keeps with the log."""

    def verified_position(self, key: UUID) -> VerifiedPosition | None:
        return self.verified.get(key)

    def broken_chain(self, key: UUID) -> BrokenChain | None:
        return self.broken.get(key)

    def keep_verdicts(self, positions: Sequence[VerifiedPosition], broken: Sequence[BrokenChain]) -> None:
        with self._database_lock:
            for p in positions:
                self.verified[p.originator_id] = p
                self.broken.pop(p.originator_id, None)
            for b in broken:
                self.broken[b.originator_id] = b
                self.verified.pop(b.originator_id, None)

    def _insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self._database_lock:
            self._assert_uniqueness(stored_events, **kwargs)
            # no rollback in memory: the chain first (it refuses an append to a broken chain), then
            # the writer's rows, once the events fit
            self._seal(None, stored_events)
            run_inline(kwargs, None)
            return super()._insert_events(stored_events, **kwargs)

    @contextmanager
    def _chain_writing(self) -> Iterator[None]:
        with self._database_lock:
            yield None

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        return self.chain.get((key, version))

    _chain_reading = _chain_writing

    def _chain_kept(self, cursor: Any, only: UUID | None) -> tuple[list[tuple[UUID, int, str]], list[Link]]:
        breaks = [(k, b.version, b.problem) for k, b in self.broken.items() if only in (None, k)]
        return breaks, [(k, p.version, p.hash) for k, p in self.verified.items() if only in (None, k)]

    def chain_mark(self) -> str | None:
        return self.mark

    def _chain_mark_put(self, cursor: Any, mark: str | None) -> None:
        self.mark = mark

    def _chain_everything(self, cursor: Any) -> tuple[list[Stored], list[Link]]:
        stored = self._stored_events
        events = sorted(
            (UUID(i), v, stored[p].topic, stored[p].state)
            for i, versions in self._stored_events_index.items()
            for v, p in versions.items()
        )
        return events, [(k, v, h) for (k, v), h in sorted(self.chain.items())]

    def _chain_replace(self, cursor: Any, rows: list[Link]) -> None:
        self.chain = {(k, v): h for k, v, h in rows}
        self.verified.clear()  # their hashes were of the replaced links

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        for key, version, digest in rows:
            if not (missing_only and (key, version) in self.chain):
                self.chain[(key, version)] = digest

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        return [(key, s.originator_version, s.topic, s.state) for s in self.select_events(key, lte=upto)]

    @staticmethod
    def _sorted(
        keys: Iterator[tuple[UUID, int]], after: tuple[UUID, int] | None, only: UUID | None, limit: int = PAGE
    ) -> list[tuple[UUID, int]]:
        return sorted(k for k in keys if (only is None or k[0] == only) and (after is None or k > after))[:limit]

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        with self._database_lock:
            index = {(UUID(i), v): p for i, versions in self._stored_events_index.items() for v, p in versions.items()}
            picked = self._sorted(iter(index), after, only)
            return [(k, v, self._stored_events[index[(k, v)]].topic, self._stored_events[index[(k, v)]].state) for k, v in picked]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None, limit: int = PAGE) -> list[Link]:
        with self._database_lock:
            return [(k, v, self.chain[(k, v)]) for k, v in self._sorted(iter(self.chain), after, only, limit)]


class MemoryDataKeys(DataKeyStore):
    """The key rows and the check row of the in-memory store."""

    def __init__(self) -> None:
        self.kept: dict[UUID, KeyRow] = {}
        self.sealed: bytes | None = None
        """The store's check row (`DataKeys.check_master`)."""

    def select(self, originator_id: UUID) -> KeyRow | None:
        return self.kept.get(originator_id)

    def insert(self, originator_id: UUID, wrapped: bytes, check: bytes | None) -> None:
        if self.sealed == check:
            self.kept.setdefault(originator_id, (wrapped, None))

    def select_check(self) -> bytes | None:
        return self.sealed

    def insert_check(self, sealed: bytes) -> bool:
        if self.sealed is None and not any(w is not None and w[:1] == b"\x00" for w, _ in self.kept.values()):
            self.sealed = sealed
        return True

    def counts(self) -> tuple[int, int, int]:
        kinds = [None if w is None else w[:1] for w, _ in self.kept.values()]
        return kinds.count(b"\x01"), kinds.count(b"\x00"), kinds.count(None)

    def rewrap(self, change: Callable[[UUID, bytes], bytes], sealed: bytes | None, also: Callable[[Any], None]) -> int:
        changed = {k: (change(k, w), at) for k, (w, at) in self.kept.items() if w is not None}  # all, or raise
        also(None)  # before any change: it raises, or writes all
        self.kept.update(changed)
        self.sealed = sealed
        return len(changed)

    def wrapped_sample(self) -> tuple[UUID, bytes] | None:
        return next(((k, w) for k, (w, _) in self.kept.items() if w is not None and w[:1] == b"\x01"), None)

    def erased(self) -> set[UUID]:
        return {k for k, (w, _) in self.kept.items() if w is None}

    def erase(self, originator_id: UUID, at: datetime) -> None:
        erased = self.kept.get(originator_id, (None, None))[1]
        self.kept[originator_id] = (None, erased or at)

    def scrub(self) -> None:
        """Does nothing: no file keeps a deleted row."""


class MemoryHistoryTables(HistoryIndex):
    """The history index in memory: one `MemoryHistory` per conversation."""

    def __init__(self) -> None:
        self.memory: dict[UUID, MemoryHistory] = {}

    def create(self) -> None:
        """Does nothing: the index is a dict."""

    def reader(self, cid: UUID) -> MemoryHistory:
        return self.memory.setdefault(cid, MemoryHistory())

    def reading(self, cid: UUID | None) -> AbstractContextManager[MemoryHistory]:
        return self._reading(cid)

    @contextmanager
    def _reading(self, cid: UUID | None) -> Iterator[MemoryHistory]:
        yield MemoryHistory() if cid is None else self.reader(cid)

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
        if assumed is not None:
            raise ValueError("this index cannot check an assumed history (checks_assumptions)")

        def emptied(_: Any) -> MemoryHistory:
            fresh = self.memory[cid] = MemoryHistory()
            return fresh

        return write_folded(self.reader(cid), state, list(events), rebuild=rebuild, follows=follows, emptied=emptied)


class MemoryViewTables:
    """The views' rows of an in-memory store: dicts per generation and the live pointer, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.generations: dict[int, dict[UUID, MemoryConversation]] = {}
        self.pointer: Pointer | None = None


class MemoryViewStorage(ViewStorage):
    """The in-memory store's views on `tables`, its recorder's; every storage of one store sees the same
    rows. `texts` is kept; the rows stay plain."""

    def __init__(self, recorder: Any, tables: MemoryViewTables, texts: ViewTexts | None = None) -> None:
        self.recorder, self.texts = recorder, texts
        self.view_tables = tables
        self.lock_ = tables.lock
        self.tables = tables.generations

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Any]:
        with self.lock_:
            yield None

    shared = False  # this process's own dicts: no other writer switches generations

    @contextmanager
    def savepoint(self, curs: Any, on_failure: Callable[[Exception], object] | None = None) -> Iterator[Any]:
        try:
            with self.lock_:
                yield None
        except Exception as error:  # noqa: BLE001 - rows in memory cannot roll back; reads catch up
            if on_failure is not None:
                on_failure(error)
            log.warning("chatrecord: the read models were not updated with this write (%s)", error)

    def rows(self, curs: Any, generation: int, cid: UUID, buffered: bool = False) -> MemoryRows:
        return MemoryRows(self.tables[generation].setdefault(cid, MemoryConversation()))

    def pointer(self, curs: Any) -> Pointer | None:
        return self.view_tables.pointer

    def set_pointer(self, curs: Any, pointer: Pointer) -> None:
        self.view_tables.pointer = pointer

    def create(self, curs: Any, generation: int) -> None:
        self.tables.setdefault(generation, {})

    def drop(self, curs: Any, generation: int) -> None:
        self.tables.pop(generation, None)

    def generations(self, curs: Any) -> set[int]:
        return set(self.tables)

    def usage(self, curs: Any, generation: int, query: UsageQuery) -> tuple[list[UsageSums], UsageSums]:
        with self.lock_:  # the in-memory store's usage rows, summed here
            rows = [u for r in self.tables.get(generation, {}).values() for u in r.usage.values()]
        return sum_rows(rows, query)

    def listed(self, curs: Any, generation: int, query: ListQuery) -> list[Listed]:
        with self.lock_:  # the in-memory store's list rows, made from its summaries and sorted here
            rows = [Listed.of(str(cid), r.summary) for cid, r in self.tables.get(generation, {}).items() if r.summary is not None]
        found = sorted((r for r in rows if query.admits(r)), key=lambda r: (r.at, r.cid), reverse=True)
        return found[: query.limit]

    def log_version(self, curs: Any, cid: UUID) -> int:
        found = self.recorder.select_events(cid, desc=True, limit=1)
        return found[0].originator_version if found else 0


class MemoryIdempotencyKeys(IdempotencyKeys):
    """The idempotency keys in a dict, reserved under a lock (`adapters.store.idempotency`)."""

    def __init__(self) -> None:
        self.kept: dict[str, StoredResponse] = {}
        self.lock = threading.Lock()

    def create(self) -> None:
        """Does nothing: the keys are a dict."""

    def get(self, key: str) -> StoredResponse | None:
        return self.kept.get(key)

    def reserve(self, key: str, fingerprint: str) -> tuple[StoredResponse, bool]:
        with self.lock:
            now = self.clock()
            found = self.kept.get(key)
            if found is not None and not found.expired(now):
                return found, False
            mine = self.kept[key] = reservation(fingerprint, now, self.seconds)
            return mine, True

    def finish(self, key: str, reserved: StoredResponse, kept: StoredResponse) -> StoredResponse:
        with self.lock:
            if self.kept.get(key) == reserved:
                self.kept[key] = kept
            return self.kept.get(key) or kept

    def release(self, key: str, reserved: StoredResponse) -> None:
        with self.lock:
            if self.kept.get(key) == reserved:
                del self.kept[key]


class MemoryReproductionRows(ReproductionRows):
    """The reproductions' streams in a list, appended under a lock; one per recorder."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], ReproductionRow] = {}
        self.lock = threading.Lock()

    def create(self) -> None:
        """Does nothing: the rows are a dict."""

    def append(self, *rows: ReproductionRow) -> None:
        with self.lock:
            for row in rows:
                if (row.reproduction, row.seq) in self.rows:
                    raise StreamConflict(f"reproduction {row.reproduction} already holds an event at {row.seq}")
            self.rows.update(((row.reproduction, row.seq), row) for row in rows)

    def of_conversation(self, conversation: str) -> list[ReproductionRow]:
        with self.lock:
            return [row for key, row in sorted(self.rows.items()) if row.conversation == conversation]


_REPRODUCTION_ROWS: weakref.WeakKeyDictionary[Any, MemoryReproductionRows] = weakref.WeakKeyDictionary()
"""The reproductions' rows of each in-memory recorder."""
_REPRODUCTION_LOCK = threading.Lock()


class MemoryFactory(StoreFactory, LibraryPOPOFactory):
    """The library's in-memory persistence with the chain and keys; hands out the store's ports in memory."""

    def application_recorder(self) -> ChainedPOPORecorder:
        return ChainedPOPORecorder()

    @classmethod
    def describe(cls, env: Mapping[str, str]) -> str:
        return "in memory (nothing is kept after the process ends)"

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return DataKeys(master, MemoryDataKeys())

    @classmethod
    def history_index(cls, recorder: Any) -> MemoryHistoryTables:
        return MemoryHistoryTables()

    @classmethod
    def view_storage(cls, recorder: Any, texts: ViewTexts | None) -> MemoryViewStorage:
        """Returns the views on the rows `recorder` keeps. On the library's own recorder, which keeps none,
        returns views on rows of their own."""
        tables = recorder.view_tables if isinstance(recorder, ChainedPOPORecorder) else MemoryViewTables()
        return MemoryViewStorage(recorder, tables, texts)

    @classmethod
    def idempotency_keys(cls, recorder: Any) -> MemoryIdempotencyKeys:
        return MemoryIdempotencyKeys()

    @classmethod
    def reproduction_rows(cls, recorder: Any) -> MemoryReproductionRows:
        """The rows `recorder` keeps: the same for every call on one recorder."""
        with _REPRODUCTION_LOCK:
            rows = _REPRODUCTION_ROWS.get(recorder)
            if rows is None:
                rows = _REPRODUCTION_ROWS[recorder] = MemoryReproductionRows()
            return rows
