"""A hash chain per conversation, written in the same transaction as its events.

Table `chatrecord_chain(originator_id, originator_version, hash)`, keyed by the pair, holds for
every stored event

    hash(v) = SHA-256(hash(v-1) || canonical(originator_id, v, topic, state))

with hash(0) = GENESIS, 32 zero bytes. `canonical` is the originator id's 16 UUID bytes, the
version as 8 bytes big-endian, the topic's UTF-8 bytes and the state bytes, each of the last
two after its length (4 and 8 bytes big-endian). The state is hashed as stored: a free text is
ciphertext there (`adapters.store.crypto`), which erasing a conversation leaves as it is, so an erased
conversation still verifies. Snapshots are not chained (they are a cache of the events).

`ChainedRecorder` is a cooperative mixin: each backend's recorder below lets the library insert
the events first (`super()`), then writes the chain rows with the same cursor or transaction,
so another mixin that writes in the same transaction composes with it the same way. The
previous hash is read inside that transaction; a conversation stored before the chain existed
gets its older hashes computed then, from its stored events ("trust on first use").

`adapters.store.verify` recomputes the chains.
"""

from __future__ import annotations

import hashlib
import threading
from functools import lru_cache
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.sqlite import SQLiteApplicationRecorder
from psycopg.sql import SQL, Identifier

from adapters.store.postgres import EventRecorder

GENESIS = bytes(32)
"""The hash before a conversation's first event: 32 zero bytes."""
CHAIN_TABLE = "chatrecord_chain"
PAGE = 500
"""Rows per page when the chain is read for verification."""

Link = tuple[UUID, int, bytes]
"""A chain row: originator id, version, hash."""
Stored = tuple[UUID, int, str, bytes]
"""A stored event as the chain reads it: originator id, version, topic, state."""


def link(previous: bytes, originator_id: UUID | str, version: int, topic: str, state: bytes) -> bytes:
    """Returns the 32-byte hash of an event after `previous` (see the module docstring)."""
    digest = hashlib.sha256(previous)
    digest.update((originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))).bytes)
    digest.update(version.to_bytes(8, "big"))
    encoded = topic.encode()
    digest.update(len(encoded).to_bytes(4, "big"))
    digest.update(encoded)
    digest.update(len(state).to_bytes(8, "big"))
    digest.update(state)
    return digest.digest()


def _bytes(value: Any) -> bytes:
    """Returns a state column's value as bytes (a changed SQLite row may hold TEXT)."""
    return value.encode() if isinstance(value, str) else bytes(value)


def _inline(kwargs: dict[str, Any], cursor: Any) -> None:
    """Runs the writer's `inline(cursor)` (passed to `Application.save`), if any, in the
    events' own transaction: the history index is written with the events or not at all."""
    inline = kwargs.get("inline")
    if inline is not None:
        inline(cursor)


class ChainHeads:
    """Each conversation's newest committed (version, hash), kept by the process that wrote
    it, so the next append need not read the previous hash. A row of the chain never changes
    once committed, so a kept hash stays true; at most `size` conversations are kept (the
    oldest go first). Only hashes of committed transactions are put here."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._heads: dict[UUID, tuple[int, bytes]] = {}

    def get(self, key: UUID) -> tuple[int, bytes] | None:
        """Returns the kept (version, hash) of conversation `key`, None if none."""
        return self._heads.get(key)

    def clear(self) -> None:
        """Forgets every kept hash (as a process that opens the store anew)."""
        self._heads.clear()

    def remember(self, heads: dict[UUID, tuple[int, bytes]]) -> None:
        """Keeps `heads` (from `_seal`, after its transaction committed)."""
        for key, head in heads.items():
            self._heads.pop(key, None)
            self._heads[key] = head
        while len(self._heads) > self.size:
            del self._heads[next(iter(self._heads))]


class ChainedRecorder:
    """Mixin for an application recorder: `_seal(cursor, stored_events)` writes the chain rows
    of events just inserted in the cursor's transaction. Backends give the four `_chain_*`
    primitives; `chain_events` and `chain_links` read pages for `adapters.store.verify`."""

    def _seal(self, cursor: Any, stored_events: Sequence[StoredEvent]) -> dict[UUID, tuple[int, bytes]]:
        """Writes the chain rows of `stored_events` through `cursor`; returns each
        conversation's newest (version, hash) among them (`ChainHeads.remember` keeps them once
        the transaction commits)."""
        heads: dict[UUID, tuple[int, bytes]] = {}
        rows: list[Link] = []
        known = getattr(self, "chain_heads", None)
        for event in stored_events:
            key = UUID(str(event.originator_id))
            version = event.originator_version
            last = heads.get(key) or (known.get(key) if known is not None else None)
            if last is not None and last[0] == version - 1:
                previous = last[1]
            elif version == 1:
                previous = GENESIS
            else:
                found = self._chain_hash(cursor, key, version - 1)
                previous = found if found is not None else self._backfill(cursor, key, version - 1)
            digest = link(previous, key, version, event.topic, event.state)
            heads[key] = (version, digest)
            rows.append((key, version, digest))
        if rows:
            self._chain_insert(cursor, rows)
        return heads

    def _backfill(self, cursor: Any, key: UUID, upto: int) -> bytes:
        """Returns the hash of version `upto`, computing and storing the missing hashes of the
        conversation's events up to it (events stored before the chain existed)."""
        digest, rows = GENESIS, []
        for _, version, topic, state in self._chain_stored(cursor, key, upto):
            digest = link(digest, key, version, topic, state)
            rows.append((key, version, digest))
        if rows:
            self._chain_insert(cursor, rows, missing_only=True)
        return digest

    # ------------------------------------------------------------ backend primitives

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        raise NotImplementedError

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        raise NotImplementedError

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        raise NotImplementedError

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        """Returns the next page of stored events after `after` (originator id, version), in
        the order of the chain table's key; of conversation `only` if given."""
        raise NotImplementedError

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Link]:
        """Returns the next page of chain rows after `after`, in key order; of `only` if given."""
        raise NotImplementedError


# ---------------------------------------------------------------------- SQLite


class ChainedSQLiteRecorder(ChainedRecorder, SQLiteApplicationRecorder):
    """The library's SQLite application recorder with the hash chain. Originator ids are kept
    as in the events table (hex, or text with ORIGINATOR_ID_TYPE=text), so both sort alike."""

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} (originator_id TEXT NOT NULL, "
            "originator_version INTEGER NOT NULL, hash BLOB NOT NULL, "
            "PRIMARY KEY (originator_id, originator_version)) WITHOUT ROWID",
        ]

    def _insert_events(self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        returning = super()._insert_events(c, stored_events, **kwargs)
        self._seal(c, stored_events)
        _inline(kwargs, c)
        return returning

    def _id(self, key: UUID) -> str:
        return key.hex if self.datastore.originator_id_type == "uuid" else str(key)

    @staticmethod
    @lru_cache(maxsize=1024)
    def _key(value: str) -> UUID:
        return UUID(value)

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        cursor.execute(f"SELECT hash FROM {CHAIN_TABLE} WHERE originator_id=? AND originator_version=?",
                       (self._id(key), version))
        row = cursor.fetchone()
        return _bytes(row["hash"]) if row else None

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        verb = "INSERT OR IGNORE" if missing_only else "INSERT"
        cursor.executemany(f"{verb} INTO {CHAIN_TABLE} VALUES (?, ?, ?)",
                           [(self._id(k), v, h) for k, v, h in rows])

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        cursor.execute(f"SELECT originator_version, topic, state FROM {self.events_table_name} "
                       "WHERE originator_id=? AND originator_version<=? ORDER BY originator_version",
                       (self._id(key), upto))
        return [(key, r["originator_version"], r["topic"], _bytes(r["state"])) for r in cursor.fetchall()]

    def _page(self, table: str, columns: str, after: tuple[UUID, int] | None, only: UUID | None) -> list[Any]:
        where, params = [], []
        if only is not None:
            where.append("originator_id=?")
            params.append(self._id(only))
        if after is not None:
            where.append("(originator_id, originator_version) > (?, ?)")
            params += [self._id(after[0]), after[1]]
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT originator_id, originator_version, {columns} FROM {table} {clause}"
                      f"ORDER BY originator_id, originator_version LIMIT {PAGE}", params)
            return c.fetchall()

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        rows = self._page(self.events_table_name, "topic, state", after, only)
        return [(self._key(r["originator_id"]), r["originator_version"], r["topic"], _bytes(r["state"])) for r in rows]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Link]:
        rows = self._page(CHAIN_TABLE, "hash", after, only)
        return [(self._key(r["originator_id"]), r["originator_version"], _bytes(r["hash"])) for r in rows]


# ---------------------------------------------------------------------- PostgreSQL


class ChainedPostgresRecorder(ChainedRecorder, EventRecorder):
    """The PostgreSQL application recorder (`adapters.store.postgres.EventRecorder`: one ordinary
    transaction, no pipeline mode) with the hash chain, in the store's schema. The library's optional database function for inserts (POSTGRES_ENABLE_DB_FUNCTIONS)
    would bypass the chain, so it is switched off."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.datastore.enable_db_functions = False
        self.chain_heads = ChainHeads()
        self._sealing = threading.local()  # the heads of this thread's transaction, until it commits
        self.chain_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(CHAIN_TABLE))
        self.sql_create_statements.append(
            SQL("CREATE TABLE IF NOT EXISTS {} (originator_id uuid NOT NULL, originator_version bigint NOT NULL, "
                "hash bytea NOT NULL, PRIMARY KEY (originator_id, originator_version))").format(self.chain_table)
        )
        self.events_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(self.events_table_name))

    def _insert_stored_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        super()._insert_stored_events(curs, stored_events, **kwargs)
        # another cursor of the same transaction: the ids are read from `curs` afterwards
        with curs.connection.cursor() as own:
            self._sealing.heads = self._seal(own, stored_events)

    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Keeps the hashes this thread's transaction just committed (`ChainHeads`)."""
        heads, self._sealing.heads = getattr(self._sealing, "heads", None), None
        if heads:
            self.chain_heads.remember(heads)

    def _insert_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        # before the events, in their transaction: an error here rolls both back
        super()._insert_events(curs, stored_events, **kwargs)
        _inline(kwargs, curs)

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        cursor.execute(SQL("SELECT hash FROM {} WHERE originator_id = %s AND originator_version = %s")
                       .format(self.chain_table), (key, version))
        row = cursor.fetchone()
        return _bytes(row["hash"]) if row else None

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        conflict = SQL(" ON CONFLICT DO NOTHING") if missing_only else SQL("")
        statement = SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(self.chain_table) + conflict
        if len(rows) == 1:
            cursor.execute(statement, rows[0])
        else:
            cursor.executemany(statement, rows)

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        cursor.execute(SQL("SELECT originator_version, topic, state FROM {} WHERE originator_id = %s "
                           "AND originator_version <= %s ORDER BY originator_version").format(self.events_table),
                       (key, upto))
        return [(key, r["originator_version"], r["topic"], _bytes(r["state"])) for r in cursor.fetchall()]

    def _page(self, table: Any, columns: str, after: tuple[UUID, int] | None, only: UUID | None) -> list[Any]:
        where, params = [], []
        if only is not None:
            where.append(SQL("originator_id = %s"))
            params.append(only)
        if after is not None:
            where.append(SQL("(originator_id, originator_version) > (%s, %s)"))
            params += [after[0], after[1]]
        clause = SQL("WHERE {} ").format(SQL(" AND ").join(where)) if where else SQL("")
        statement = SQL("SELECT originator_id, originator_version, {} FROM {} {}"
                        "ORDER BY originator_id, originator_version LIMIT {}").format(
            SQL(columns), table, clause, PAGE)
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(statement, params)
            return curs.fetchall()

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        rows = self._page(self.events_table, "topic, state", after, only)
        return [(r["originator_id"], r["originator_version"], r["topic"], _bytes(r["state"])) for r in rows]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Link]:
        rows = self._page(self.chain_table, "hash", after, only)
        return [(r["originator_id"], r["originator_version"], _bytes(r["hash"])) for r in rows]


# ---------------------------------------------------------------------- in memory


class ChainedPOPORecorder(ChainedRecorder, POPOApplicationRecorder):
    """The library's in-memory application recorder with the hash chain (a dict)."""

    def __init__(self) -> None:
        super().__init__()
        self.chain: dict[tuple[UUID, int], bytes] = {}

    def _insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self._database_lock:
            self._assert_uniqueness(stored_events, **kwargs)
            _inline(kwargs, None)  # no rollback in memory: the writer's rows first, once the events fit
            returning = super()._insert_events(stored_events, **kwargs)
            self._seal(None, stored_events)
            return returning

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        return self.chain.get((key, version))

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        for key, version, digest in rows:
            if not (missing_only and (key, version) in self.chain):
                self.chain[(key, version)] = digest

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        return [(key, s.originator_version, s.topic, s.state) for s in self.select_events(key, lte=upto)]

    @staticmethod
    def _sorted(keys: Iterator[tuple[UUID, int]], after: tuple[UUID, int] | None,
                only: UUID | None) -> list[tuple[UUID, int]]:
        return sorted(k for k in keys if (only is None or k[0] == only) and (after is None or k > after))[:PAGE]

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        with self._database_lock:
            index = {(UUID(i), v): p for i, versions in self._stored_events_index.items() for v, p in versions.items()}
            picked = self._sorted(iter(index), after, only)
            return [(k, v, self._stored_events[index[(k, v)]].topic, self._stored_events[index[(k, v)]].state)
                    for k, v in picked]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Link]:
        with self._database_lock:
            return [(k, v, self.chain[(k, v)]) for k, v in self._sorted(iter(self.chain), after, only)]
