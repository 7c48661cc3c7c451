"""The data keys and the master key's check row in the store's schema (`PostgresDataKeys`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Composed, Identifier

from adapters.store.keys import KEYS_TABLE, MASTER_TABLE
from adapters.store.ports import DataKeyStore, KeyRow


def keys_statements(schema: str) -> list[Composed]:
    """Returns the CREATE statements of the data keys' table and the master key's check table
    in `schema` (`adapters.store.keys`)."""
    return [
        SQL("CREATE TABLE IF NOT EXISTS {}.{} (conversation uuid PRIMARY KEY, wrapped_key bytea, erased_at timestamptz)").format(
            Identifier(schema), Identifier(KEYS_TABLE)
        ),
        SQL("CREATE TABLE IF NOT EXISTS {}.{} (id integer PRIMARY KEY CHECK (id = 1), sealed bytea NOT NULL)").format(
            Identifier(schema), Identifier(MASTER_TABLE)
        ),
    ]


class PostgresDataKeys(DataKeyStore):
    """Keys and the master key's check row in the store's PostgreSQL schema."""

    def __init__(self, datastore: PostgresDatastore, *, create_table: bool = True) -> None:
        self.datastore = datastore
        self.table = SQL("{}.{}").format(Identifier(datastore.schema), Identifier(KEYS_TABLE))
        self.master_table = SQL("{}.{}").format(Identifier(datastore.schema), Identifier(MASTER_TABLE))
        if create_table:
            with datastore.transaction(commit=True) as curs:
                for statement in keys_statements(datastore.schema):
                    curs.execute(statement)

    def select(self, originator_id: UUID) -> KeyRow | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL("SELECT wrapped_key, erased_at FROM {} WHERE conversation = %s").format(self.table), (originator_id,)
            )
            row = curs.fetchone()
        return (row["wrapped_key"], row["erased_at"]) if row else None

    def insert(self, originator_id: UUID, wrapped: bytes, check: bytes | None) -> None:
        params: tuple[bytes, ...]
        if check is None:
            guard, params = SQL("NOT EXISTS (SELECT 1 FROM {})").format(self.master_table), ()
        else:
            guard = SQL("EXISTS (SELECT 1 FROM {} WHERE id = 1 AND sealed = %s)").format(self.master_table)
            params = (check,)
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                SQL("INSERT INTO {} (conversation, wrapped_key) SELECT %s, %s WHERE {} ON CONFLICT DO NOTHING").format(
                    self.table, guard
                ),
                (originator_id, wrapped, *params),
            )

    def select_check(self) -> bytes | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT sealed FROM {} WHERE id = 1").format(self.master_table))
            row = curs.fetchone()
        return bytes(row["sealed"]) if row else None

    def insert_check(self, sealed: bytes) -> bool:
        try:
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(
                    SQL(
                        "INSERT INTO {} SELECT 1, %s WHERE NOT EXISTS (SELECT 1 FROM {} WHERE "
                        "substring(wrapped_key FROM 1 FOR 1) = '\\x00'::bytea) ON CONFLICT DO NOTHING"
                    ).format(self.master_table, self.table),
                    (sealed,),
                )
        except PersistenceError as error:
            if isinstance(error.__cause__, psycopg.errors.ReadOnlySqlTransaction):
                return False  # a hot standby: reading commands go on; a writer checks again
            raise
        return True

    def wrapped_sample(self) -> tuple[UUID, bytes] | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT conversation, wrapped_key FROM {} WHERE substring(wrapped_key FROM 1 FOR 1) = '\\x01'::bytea LIMIT 1"
                ).format(self.table)
            )
            row = curs.fetchone()
        return (row["conversation"], bytes(row["wrapped_key"])) if row else None

    def erased(self) -> set[UUID]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT conversation FROM {} WHERE wrapped_key IS NULL").format(self.table))
            rows = curs.fetchall()
        return {r["conversation"] for r in rows}

    def erase(self, originator_id: UUID, at: datetime) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                SQL(
                    "INSERT INTO {} VALUES (%s, NULL, %s) ON CONFLICT (conversation) DO UPDATE SET "
                    "wrapped_key = NULL, erased_at = COALESCE({}.erased_at, excluded.erased_at)"
                ).format(self.table, Identifier(KEYS_TABLE)),
                (originator_id, at),
            )

    def counts(self) -> tuple[int, int, int]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT count(*) FILTER (WHERE substring(wrapped_key FROM 1 FOR 1) = '\\x01'::bytea) AS wrapped, "
                    "count(*) FILTER (WHERE substring(wrapped_key FROM 1 FOR 1) = '\\x00'::bytea) AS plain, "
                    "count(*) FILTER (WHERE wrapped_key IS NULL) AS erased FROM {}"
                ).format(self.table)
            )
            row = curs.fetchone()
        assert row is not None  # an aggregate without GROUP BY returns one row
        return int(row["wrapped"]), int(row["plain"]), int(row["erased"])

    def rewrap(self, change: Callable[[UUID, bytes], bytes], sealed: bytes | None, also: Callable[[Any], None]) -> int:
        with self.datastore.transaction(commit=True) as curs:
            # EXCLUSIVE: another process's key insert (ROW EXCLUSIVE) waits for this transaction,
            # then reads the check row as it left it; readers go on
            curs.execute(SQL("LOCK TABLE {}, {} IN EXCLUSIVE MODE").format(self.table, self.master_table))
            curs.execute(SQL("SELECT conversation, wrapped_key FROM {} WHERE wrapped_key IS NOT NULL").format(self.table))
            rows = curs.fetchall()
            update = SQL("UPDATE {} SET wrapped_key = %s WHERE conversation = %s").format(self.table)
            for r in rows:  # each written as it is made: a failure part-way rolls back the ones before
                curs.execute(update, (change(r["conversation"], bytes(r["wrapped_key"])), r["conversation"]))
            if sealed is None:
                curs.execute(SQL("DELETE FROM {}").format(self.master_table))
            else:
                curs.execute(
                    SQL("INSERT INTO {} VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed").format(
                        self.master_table
                    ),
                    (sealed,),
                )
            also(curs)
        return len(rows)

    def scrub(self) -> None:
        with self.datastore.get_connection() as conn:
            autocommit = conn.autocommit
            conn.autocommit = True  # VACUUM cannot run inside a transaction
            try:
                conn.execute(SQL("VACUUM FULL {}").format(self.table))
            finally:
                conn.autocommit = autocommit
