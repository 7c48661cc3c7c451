"""The SQLite backend: the store in one file (the embedded default).

- `SQLiteFactory`, the library's SQLite persistence with a `WaitingSQLiteDatastore` (a writing
  transaction takes the file's write lock when it begins), the hash chain
  (`ChainedSQLiteRecorder`) and the data keys in the same file (`SQLiteDataKeys`);
- its pieces of the store: the history index (`adapters.store.history.SQLHistoryTables`), the
  views' tables (`SQLiteBackend`) and the kept idempotency keys (`adapters.store.idempotency.SQLKeys`).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing import sqlite as es_sqlite
from eventsourcing.persistence import OperationalError, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore
from eventsourcing.utils import strtobool

from adapters.backends import StoreFactory
from adapters.backends.writer_queue import WriterQueue
from adapters.store.chain import (
    CHAIN_TABLE,
    PAGE,
    ChainedRecorder,
    Link,
    Stored,
    run_inline,
    state_bytes,
)
from adapters.store.history import SQLHistoryTables
from adapters.store.idempotency import COLUMNS, TABLE, SQLKeys
from adapters.store.keys import KEYS_TABLE, MASTER_TABLE, DataKeys, Row
from adapters.views.backends import SQLBackend
from domain.errors import ChatrecordError


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
        run_inline(kwargs, c)
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
        return state_bytes(row["hash"]) if row else None

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        verb = "INSERT OR IGNORE" if missing_only else "INSERT"
        cursor.executemany(f"{verb} INTO {CHAIN_TABLE} VALUES (?, ?, ?)",
                           [(self._id(k), v, h) for k, v, h in rows])

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        cursor.execute(f"SELECT originator_version, topic, state FROM {self.events_table_name} "
                       "WHERE originator_id=? AND originator_version<=? ORDER BY originator_version",
                       (self._id(key), upto))
        return [(key, r["originator_version"], r["topic"], state_bytes(r["state"])) for r in cursor.fetchall()]

    def _page(self, table: str, columns: str, after: tuple[UUID, int] | None, only: UUID | None) -> list[Any]:
        where: list[str] = []
        params: list[str | int] = []
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
            rows: list[Any] = c.fetchall()
            return rows

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        rows = self._page(self.events_table_name, "topic, state", after, only)
        return [(self._key(r["originator_id"]), r["originator_version"], r["topic"], state_bytes(r["state"])) for r in rows]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Link]:
        rows = self._page(CHAIN_TABLE, "hash", after, only)
        return [(self._key(r["originator_id"]), r["originator_version"], state_bytes(r["hash"])) for r in rows]


class SQLiteDataKeys(DataKeys):
    """Keys and the master key's check row in the store's SQLite file."""

    def __init__(self, datastore: SQLiteDatastore, master: bytes | None, *, create_table: bool = True) -> None:
        super().__init__(master)
        self.datastore = datastore
        if create_table:
            with datastore.transaction(commit=True) as c:
                c.execute(f"CREATE TABLE IF NOT EXISTS {KEYS_TABLE} (conversation TEXT PRIMARY KEY, "
                          "wrapped_key BLOB, erased_at TEXT)")
                c.execute(f"CREATE TABLE IF NOT EXISTS {MASTER_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), "
                          "sealed BLOB NOT NULL)")

    def _select(self, originator_id: UUID) -> Row | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT wrapped_key, erased_at FROM {KEYS_TABLE} WHERE conversation = ?", (str(originator_id),))
            row = c.fetchone()
        return (row["wrapped_key"], row["erased_at"]) if row else None

    def _insert(self, originator_id: UUID, wrapped: bytes, check: bytes | None) -> None:
        params: tuple[bytes, ...]
        if check is None:
            guard, params = f"NOT EXISTS (SELECT 1 FROM {MASTER_TABLE})", ()
        else:
            guard, params = f"EXISTS (SELECT 1 FROM {MASTER_TABLE} WHERE id = 1 AND sealed = ?)", (check,)
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"INSERT OR IGNORE INTO {KEYS_TABLE} (conversation, wrapped_key) SELECT ?, ? WHERE {guard}",
                      (str(originator_id), wrapped, *params))

    def _select_check(self) -> bytes | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT sealed FROM {MASTER_TABLE} WHERE id = 1")
            row = c.fetchone()
        return bytes(row["sealed"]) if row else None

    def _insert_check(self, sealed: bytes) -> bool:
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"INSERT OR IGNORE INTO {MASTER_TABLE} SELECT 1, ? WHERE NOT EXISTS (SELECT 1 FROM {KEYS_TABLE} "
                      "WHERE substr(wrapped_key, 1, 1) = x'00')", (sealed,))
        return True

    def _counts(self) -> tuple[int, int, int]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT count(CASE WHEN substr(wrapped_key, 1, 1) = x'01' THEN 1 END) AS wrapped, "
                      f"count(CASE WHEN substr(wrapped_key, 1, 1) = x'00' THEN 1 END) AS plain, "
                      f"count(CASE WHEN wrapped_key IS NULL THEN 1 END) AS erased FROM {KEYS_TABLE}")
            row = c.fetchone()
        return int(row["wrapped"]), int(row["plain"]), int(row["erased"])

    def _rewrap(self, change: Callable[[UUID, bytes], bytes], sealed: bytes | None) -> int:
        with self.datastore.transaction(commit=True) as c:  # BEGIN IMMEDIATE: no other writer meanwhile
            c.execute(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE} WHERE wrapped_key IS NOT NULL")
            rows = c.fetchall()
            for r in rows:  # each written as it is made: a failure part-way rolls back the ones before
                c.execute(f"UPDATE {KEYS_TABLE} SET wrapped_key = ? WHERE conversation = ?",
                          (change(UUID(r["conversation"]), bytes(r["wrapped_key"])), r["conversation"]))
            if sealed is None:
                c.execute(f"DELETE FROM {MASTER_TABLE}")
            else:
                c.execute(f"INSERT INTO {MASTER_TABLE} VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed",
                          (sealed,))
        return len(rows)

    def _wrapped_sample(self) -> tuple[UUID, bytes] | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE} "
                      "WHERE substr(wrapped_key, 1, 1) = x'01' LIMIT 1")
            row = c.fetchone()
        return (UUID(row["conversation"]), bytes(row["wrapped_key"])) if row else None

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


class _ImmediateTransaction(es_sqlite.SQLiteTransaction):
    """A writing transaction that takes the file's write lock when it begins."""

    def __enter__(self) -> es_sqlite.SQLiteCursor:
        cursor = self.connection.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise OperationalError(e) from e
        return cursor


class WaitingSQLiteDatastore(es_sqlite.SQLiteDatastore):
    """The library's SQLite datastore, except that a writing transaction begins IMMEDIATE and
    the process's writers queue first come, first served (`WriterQueue`), each for as long as
    the queue moves, instead of racing for the pool's writer lock for at most 5 s; the pool
    waits up to the lock timeout (not 5 s) for a free connection.

    Under the library's plain BEGIN, a transaction that reads before it writes (as the
    read models' catch-up does) cannot wait for another process's write: SQLite
    refuses to upgrade its read at once with "database is locked", whatever the lock timeout.
    Taking the write lock first makes every writer wait up to the lock timeout instead.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        wait = float(kwargs.get("lock_timeout") or es_sqlite.SQLITE3_DEFAULT_LOCK_TIMEOUT)
        kwargs.setdefault("pool_timeout", wait)
        super().__init__(*args, **kwargs)
        self.pool._create_connection = self._connect_waiting(self.pool._create_connection)  # type: ignore[method-assign]  # the library's pool has no hook
        self.writers = WriterQueue(patience=wait)
        """The process's writers to this file, in the order they came."""

    def _connect_waiting(self, create: Callable[[], Any]) -> Callable[[], Any]:
        """Returns the pool's `create` tried again while the file is locked: a new connection
        switches a fresh file to WAL (the library's `PRAGMA journal_mode=WAL`), which SQLite
        refuses at once with "database is locked", whatever the busy timeout, while another
        process opening the same file holds it. Tries until the lock timeout has passed."""
        limit = float(self.pool.lock_timeout or 5)

        def connect() -> Any:
            waited, pause = 0.0, 0.005
            while True:
                try:
                    return create()
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) or waited >= limit:
                        raise
                time.sleep(pause)
                waited, pause = waited + pause, min(pause * 2, 0.1)

        return connect

    @contextmanager
    def get_connection(self, *, commit: bool) -> Iterator[es_sqlite.SQLiteConnection]:
        """Yields a connection from the pool; one for writing only in the writer's turn."""
        if not commit:
            with super().get_connection(commit=False) as conn:
                yield conn
            return
        self.writers.acquire()
        try:
            with super().get_connection(commit=True) as conn:
                yield conn
        finally:
            self.writers.release()

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[es_sqlite.SQLiteCursor]:
        begin = _ImmediateTransaction if commit else es_sqlite.SQLiteTransaction
        with self.get_connection(commit=commit) as conn, begin(conn, commit=commit) as curs, curs:
            yield curs


class SQLiteBackend(SQLBackend):
    """The views' tables in the SQLite file (`adapters.views.backends.SQLBackend`)."""

    def _id(self, cid: UUID) -> Any:
        return cid.hex  # the library stores a UUID's hex

    def _tables(self, curs: Any) -> list[str]:
        return [r["name"] for r in self._x(curs, "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]


# SQLite result codes (the primary code, the low byte) a setting or another process causes
_SQLITE_LOCKED = {5: "SQLITE_BUSY", 6: "SQLITE_LOCKED"}
_SQLITE_NOT_A_DATABASE = {11: "SQLITE_CORRUPT", 26: "SQLITE_NOTADB"}
_SQLITE_CANNOT_USE = {3: "SQLITE_PERM", 8: "SQLITE_READONLY", 10: "SQLITE_IOERR", 13: "SQLITE_FULL",
                      14: "SQLITE_CANTOPEN", 23: "SQLITE_AUTH"}


class ForeignDatabase(ChatrecordError):
    """Raised when CHATRECORD_DB names a SQLite database of something else: it holds tables,
    none of them a chatrecord store's. Nothing is created in it."""


OWN_TABLES = ("stored_events", "stored_snapshots")
"""The library's tables of a chatrecord store; with `OWN_PREFIXES`, what a store's file holds."""
OWN_PREFIXES = ("chatrecord_", "views_")


def refuse_foreign(path: str) -> None:
    """Raises ForeignDatabase when the SQLite file at `path` holds tables, none of them a
    chatrecord store's (`OWN_TABLES`, `OWN_PREFIXES`). An empty file, a store another process
    is creating right now (some of its tables made), a file that is not a database (the
    driver says so at open) and a chatrecord store pass."""
    try:
        with closing(sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)) as conn:
            tables = [row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    except sqlite3.Error:
        return  # not a database, or unreadable: the store's open names the reason
    if tables and not any(name in OWN_TABLES or name.startswith(OWN_PREFIXES) for name in tables):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise ForeignDatabase(
            f"CHATRECORD_DB: {path} is a SQLite database of something else (it holds {shown}, and no "
            "chatrecord store); point CHATRECORD_DB at a chatrecord store, or at a file that does not exist yet")


def read_only_uri(path: str) -> str | None:
    """Returns the URI that opens the SQLite file at `path` read-only when this process cannot
    write it (the file or its folder lacks write permission, or the file system is read-only);
    None when it can. Without a way to make the WAL's shared-memory file (`-shm`) and with no
    WAL file left, the file is opened `immutable` (SQLite then takes no lock, which is safe
    as no process can write it here either); else `mode=ro`."""
    file = Path(path).resolve()
    folder = file.parent
    if os.access(file, os.W_OK) and os.access(folder, os.W_OK):
        return None
    uri = file.as_uri() + "?mode=ro"
    shm, wal = Path(f"{file}-shm"), Path(f"{file}-wal")
    if not os.access(folder, os.W_OK) and not shm.exists() and not (wal.exists() and wal.stat().st_size):
        uri += "&immutable=1"
    return uri


class SQLiteFactory(StoreFactory, es_sqlite.SQLiteFactory):
    """The library's SQLite persistence with a `WaitingSQLiteDatastore`, the hash chain and
    the data keys in the same file; it hands out the file's history index, views and
    idempotency keys."""

    application_recorder_class = ChainedSQLiteRecorder
    driver_errors = (sqlite3.Error,)

    SQLITE_READING = "SQLITE_READING"
    """`y`: the store is opened for a command that only reads (`adapters.store.settings.open_store`):
    a file this process cannot write (its permissions, or a read-only file system) is opened
    read-only (`read_only_uri`) instead of failing on the first write the open would try."""

    def __init__(self, env: Any) -> None:
        name = env.get(self.SQLITE_DBNAME) or ""
        fresh = not os.path.exists(name)
        if not fresh:
            refuse_foreign(name)
        uri = read_only_uri(name) if strtobool(env.get(self.SQLITE_READING) or "n") and not fresh else None
        self.read_only = uri is not None
        """Whether the file is opened read-only (a reading command on a file it cannot write)."""
        super().__init__(env)
        self.created: list[str] = [name] if fresh else []
        """The file this factory created (empty when it existed already), as PostgresFactory's
        `created` lists the tables it created."""
        plain = self.datastore
        self.datastore = WaitingSQLiteDatastore(
            db_name=uri or plain.pool.db_name,
            lock_timeout=plain.pool.lock_timeout,
            single_row_tracking=plain.single_row_tracking,
            originator_id_type=plain.originator_id_type,
        )
        plain.close()

    def env_create_table(self) -> bool:
        return not self.read_only and super().env_create_table()  # nothing is created in a file read only

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return SQLiteDataKeys(self.datastore, master, create_table=self.env_create_table())

    @classmethod
    def describe(cls, env: Mapping[str, str]) -> str:
        return f"SQLite file {env.get('SQLITE_DBNAME')}"

    @classmethod
    def problem(cls, driver: BaseException, env: Mapping[str, str], text: str, backend: str) -> str | None:
        path = env.get("SQLITE_DBNAME", "")
        code = (getattr(driver, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in _SQLITE_NOT_A_DATABASE:
            return (
                f"CHATRECORD_DB: {path} is not a SQLite database ({text}); point CHATRECORD_DB at a "
                "chatrecord store, or at a file that does not exist yet to start a new one"
            )
        if code in _SQLITE_LOCKED:
            waited = env.get("SQLITE_LOCK_TIMEOUT") or es_sqlite.SQLITE3_DEFAULT_LOCK_TIMEOUT
            return (
                f"the {backend} stayed locked by another process for {waited} s ({text}); "
                "try again when its write has ended"
            )
        if code in _SQLITE_CANNOT_USE:
            return (
                f"the {backend} cannot be used ({text}); check CHATRECORD_DB: its folder must exist "
                "and the file must be readable and writable"
            )
        return None

    @classmethod
    def history_tables(cls, store: Any) -> SQLHistoryTables:
        chained = getattr(store.recorder, "chain_heads", None) is not None
        return SQLHistoryTables(store.recorder.datastore, chain=(CHAIN_TABLE, store.recorder._id) if chained else None)

    @classmethod
    def views_backend(cls, store: Any) -> SQLiteBackend:
        return SQLiteBackend(store.recorder.datastore, store.recorder.events_table_name)

    @classmethod
    def idempotency_keys(cls, store: Any) -> SQLKeys:
        return SQLKeys(store.recorder.datastore, TABLE, "?", [f"CREATE TABLE IF NOT EXISTS {TABLE} {COLUMNS}"])
