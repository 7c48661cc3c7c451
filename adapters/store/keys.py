"""The data keys of the conversations: table `chatrecord_keys(conversation, wrapped_key, erased_at)`.

`key(id, create=...)` returns a conversation's data key (made on its first text), None once
it was erased; `erase(id)` deletes the key and records when (the row stays, `wrapped_key`
NULL); `scrub()` removes what deleted rows leave in the database files: on SQLite a VACUUM
and a WAL checkpoint that truncates the log, on PostgreSQL a `VACUUM FULL` of the key table
(the server's own WAL files and backups are outside the store's reach; see README, "Erasing a
conversation"). Keys read are kept in memory for at most KEY_CACHE_SECONDS, so a process that
read a key before another process erased it stops reading the texts soon after.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg.sql import SQL, Identifier

from adapters.store.crypto import MissingDataKey, new_key, unwrap, wrap

KEYS_TABLE = "chatrecord_keys"
KEY_CACHE_SECONDS = 2.0

Row = tuple[bytes | None, Any]
"""A key row: the wrapped key (None once erased) and when it was erased (None before)."""


class DataKeys:
    """A conversation's data key, read from and written to the key table of one backend."""

    def __init__(self, master: bytes | None) -> None:
        self.master = master
        self._cache: dict[UUID, tuple[float, bytes | None]] = {}

    def key(self, originator_id: UUID, *, create: bool) -> bytes | None:
        """Returns the conversation's data key, None when it was erased. Without a key, makes
        one if `create`, else raises MissingDataKey."""
        cached = self._cache.get(originator_id)
        if cached is not None and time.monotonic() - cached[0] < KEY_CACHE_SECONDS:
            return cached[1]
        row = self._select(originator_id)
        if row is None:
            if not create:
                raise MissingDataKey(f"no data key for conversation {originator_id}, and it was not erased")
            self._insert(originator_id, wrap(new_key(), self.master, originator_id))
            row = self._select(originator_id)
            assert row is not None
        wrapped, erased_at = row
        key = None if erased_at is not None or wrapped is None else unwrap(bytes(wrapped), self.master, originator_id)
        self._cache[originator_id] = (time.monotonic(), key)
        return key

    def erased_at(self, originator_id: UUID) -> datetime | None:
        """Returns when the conversation's key was erased, None if it was not."""
        row = self._select(originator_id)
        if row is None or row[1] is None:
            return None
        at = row[1]
        return at if isinstance(at, datetime) else datetime.fromisoformat(at)

    def erase(self, originator_id: UUID, at: datetime | None = None) -> None:
        """Deletes the conversation's key and records `at` (default now) as its erasure time;
        an erased key stays erased at its first time (idempotent)."""
        self._erase(originator_id, at or datetime.now(timezone.utc))
        self._cache.pop(originator_id, None)

    def scrub(self) -> None:
        """Removes the bytes of deleted rows from the database files where the backend can."""

    def _select(self, originator_id: UUID) -> Row | None:
        raise NotImplementedError

    def _insert(self, originator_id: UUID, wrapped: bytes) -> None:
        """Inserts a key unless the conversation has one (a concurrent first text won)."""
        raise NotImplementedError

    def _erase(self, originator_id: UUID, at: datetime) -> None:
        raise NotImplementedError


class MemoryDataKeys(DataKeys):
    """Keys of the in-memory store."""

    def __init__(self, master: bytes | None) -> None:
        super().__init__(master)
        self.rows: dict[UUID, Row] = {}

    def _select(self, originator_id: UUID) -> Row | None:
        return self.rows.get(originator_id)

    def _insert(self, originator_id: UUID, wrapped: bytes) -> None:
        self.rows.setdefault(originator_id, (wrapped, None))

    def _erase(self, originator_id: UUID, at: datetime) -> None:
        erased = self.rows.get(originator_id, (None, None))[1]
        self.rows[originator_id] = (None, erased or at)


class SQLiteDataKeys(DataKeys):
    """Keys in the store's SQLite file."""

    def __init__(self, datastore: SQLiteDatastore, master: bytes | None, *, create_table: bool = True) -> None:
        super().__init__(master)
        self.datastore = datastore
        if create_table:
            with datastore.transaction(commit=True) as c:
                c.execute(f"CREATE TABLE IF NOT EXISTS {KEYS_TABLE} (conversation TEXT PRIMARY KEY, "
                          "wrapped_key BLOB, erased_at TEXT)")

    def _select(self, originator_id: UUID) -> Row | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT wrapped_key, erased_at FROM {KEYS_TABLE} WHERE conversation = ?", (str(originator_id),))
            row = c.fetchone()
        return (row["wrapped_key"], row["erased_at"]) if row else None

    def _insert(self, originator_id: UUID, wrapped: bytes) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"INSERT OR IGNORE INTO {KEYS_TABLE} VALUES (?, ?, NULL)", (str(originator_id), wrapped))

    def _erase(self, originator_id: UUID, at: datetime) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute("PRAGMA secure_delete = ON")
            c.execute(f"INSERT INTO {KEYS_TABLE} VALUES (?, NULL, ?) ON CONFLICT (conversation) DO UPDATE SET "
                      "wrapped_key = NULL, erased_at = COALESCE(erased_at, excluded.erased_at)",
                      (str(originator_id), at.isoformat()))

    def scrub(self) -> None:
        path = self.datastore.pool.db_name
        if ":memory:" in path or "mode=memory" in path:
            return
        connection = sqlite3.connect(path, timeout=self.datastore.pool.lock_timeout or 5, isolation_level=None)
        try:
            connection.execute("VACUUM")  # rebuilds the file: no freed page or cell keeps old bytes
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # and the log of the old pages goes
        finally:
            connection.close()


class PostgresDataKeys(DataKeys):
    """Keys in the store's PostgreSQL schema."""

    def __init__(self, datastore: PostgresDatastore, master: bytes | None, *, create_table: bool = True) -> None:
        super().__init__(master)
        self.datastore = datastore
        self.table = SQL("{}.{}").format(Identifier(datastore.schema), Identifier(KEYS_TABLE))
        if create_table:
            with datastore.transaction(commit=True) as curs:
                curs.execute(SQL("CREATE TABLE IF NOT EXISTS {} (conversation uuid PRIMARY KEY, "
                                 "wrapped_key bytea, erased_at timestamptz)").format(self.table))

    def _select(self, originator_id: UUID) -> Row | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT wrapped_key, erased_at FROM {} WHERE conversation = %s").format(self.table),
                         (originator_id,))
            row = curs.fetchone()
        return (row["wrapped_key"], row["erased_at"]) if row else None

    def _insert(self, originator_id: UUID, wrapped: bytes) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("INSERT INTO {} VALUES (%s, %s, NULL) ON CONFLICT DO NOTHING").format(self.table),
                         (originator_id, wrapped))

    def _erase(self, originator_id: UUID, at: datetime) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("INSERT INTO {} VALUES (%s, NULL, %s) ON CONFLICT (conversation) DO UPDATE SET "
                             "wrapped_key = NULL, erased_at = COALESCE({}.erased_at, excluded.erased_at)")
                         .format(self.table, Identifier(KEYS_TABLE)), (originator_id, at))

    def scrub(self) -> None:
        with self.datastore.get_connection() as conn:
            autocommit = conn.autocommit
            conn.autocommit = True  # VACUUM cannot run inside a transaction
            try:
                conn.execute(SQL("VACUUM FULL {}").format(self.table))
            finally:
                conn.autocommit = autocommit
