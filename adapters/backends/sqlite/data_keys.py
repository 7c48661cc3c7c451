"""The data keys and the master key's check row in the SQLite file (`SQLiteDataKeys`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.sqlite import SQLiteDatastore

from adapters.store.keys import KEYS_TABLE, MASTER_TABLE
from adapters.store.ports import DataKeyStore, KeyRow


class SQLiteDataKeys(DataKeyStore):
    """Keys and the master key's check row in the store's SQLite file."""

    def __init__(self, datastore: SQLiteDatastore, *, create_table: bool = True) -> None:
        self.datastore = datastore
        if create_table:
            with datastore.transaction(commit=True) as c:
                c.execute(
                    f"CREATE TABLE IF NOT EXISTS {KEYS_TABLE} (conversation TEXT PRIMARY KEY, wrapped_key BLOB, erased_at TEXT)"
                )
                c.execute(
                    f"CREATE TABLE IF NOT EXISTS {MASTER_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), sealed BLOB NOT NULL)"
                )

    def select(self, originator_id: UUID) -> KeyRow | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT wrapped_key, erased_at FROM {KEYS_TABLE} WHERE conversation = ?", (str(originator_id),))
            row = c.fetchone()
        return (row["wrapped_key"], row["erased_at"]) if row else None

    def insert(self, originator_id: UUID, wrapped: bytes, check: bytes | None) -> None:
        params: tuple[bytes, ...]
        if check is None:
            guard, params = f"NOT EXISTS (SELECT 1 FROM {MASTER_TABLE})", ()
        else:
            guard, params = f"EXISTS (SELECT 1 FROM {MASTER_TABLE} WHERE id = 1 AND sealed = ?)", (check,)
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"INSERT OR IGNORE INTO {KEYS_TABLE} (conversation, wrapped_key) SELECT ?, ? WHERE {guard}",
                (str(originator_id), wrapped, *params),
            )

    def select_check(self) -> bytes | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT sealed FROM {MASTER_TABLE} WHERE id = 1")
            row = c.fetchone()
        return bytes(row["sealed"]) if row else None

    def insert_check(self, sealed: bytes) -> bool:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"INSERT OR IGNORE INTO {MASTER_TABLE} SELECT 1, ? WHERE NOT EXISTS (SELECT 1 FROM {KEYS_TABLE} "
                "WHERE substr(wrapped_key, 1, 1) = x'00')",
                (sealed,),
            )
        return True

    def counts(self) -> tuple[int, int, int]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT count(CASE WHEN substr(wrapped_key, 1, 1) = x'01' THEN 1 END) AS wrapped, "
                f"count(CASE WHEN substr(wrapped_key, 1, 1) = x'00' THEN 1 END) AS plain, "
                f"count(CASE WHEN wrapped_key IS NULL THEN 1 END) AS erased FROM {KEYS_TABLE}"
            )
            row = c.fetchone()
        return int(row["wrapped"]), int(row["plain"]), int(row["erased"])

    def rewrap(self, change: Callable[[UUID, bytes], bytes], sealed: bytes | None, also: Callable[[Any], None]) -> int:
        with self.datastore.transaction(commit=True) as c:  # BEGIN IMMEDIATE: no other writer meanwhile
            c.execute(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE} WHERE wrapped_key IS NOT NULL")
            rows = c.fetchall()
            for r in rows:  # each written as it is made: a failure part-way rolls back the ones before
                c.execute(
                    f"UPDATE {KEYS_TABLE} SET wrapped_key = ? WHERE conversation = ?",
                    (change(UUID(r["conversation"]), bytes(r["wrapped_key"])), r["conversation"]),
                )
            if sealed is None:
                c.execute(f"DELETE FROM {MASTER_TABLE}")
            else:
                c.execute(
                    f"INSERT INTO {MASTER_TABLE} VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed", (sealed,)
                )
            also(c)
        return len(rows)

    def wrapped_sample(self) -> tuple[UUID, bytes] | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE} WHERE substr(wrapped_key, 1, 1) = x'01' LIMIT 1")
            row = c.fetchone()
        return (UUID(row["conversation"]), bytes(row["wrapped_key"])) if row else None

    def erased(self) -> set[UUID]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT conversation FROM {KEYS_TABLE} WHERE wrapped_key IS NULL")
            rows = c.fetchall()
        return {UUID(r["conversation"]) for r in rows}

    def erase(self, originator_id: UUID, at: datetime) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute("PRAGMA secure_delete = ON")
            c.execute(
                f"INSERT INTO {KEYS_TABLE} VALUES (?, NULL, ?) ON CONFLICT (conversation) DO UPDATE SET "
                "wrapped_key = NULL, erased_at = COALESCE(erased_at, excluded.erased_at)",
                (str(originator_id), at.isoformat()),
            )

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
