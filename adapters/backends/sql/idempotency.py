"""The kept idempotency keys in a SQL table (`SQLIdempotencyKeys`): `chatrecord_idempotency(key, body_hash,
status, response)`. The protocol is `adapters.store.idempotency`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.backends.sql.dialect import Dialect
from adapters.store.idempotency import IN_FLIGHT, StoredResponse, reservation
from adapters.store.ports import IdempotencyKeys

TABLE = "chatrecord_idempotency"
COLUMNS = "(key TEXT PRIMARY KEY, body_hash TEXT NOT NULL, status INTEGER NOT NULL, response TEXT NOT NULL)"


def create_statements(dialect: Dialect) -> list[str]:
    """Returns the statement that makes the table where it is missing."""
    return [f"CREATE TABLE IF NOT EXISTS {dialect.table(TABLE)} {COLUMNS}"]


class SQLIdempotencyKeys(IdempotencyKeys):
    """The table in the store's database (`datastore`, the library's). `create`: the statements that make
    it, which a backend may wrap in a lock. Every statement is built once, here."""

    def __init__(self, datastore: Any, dialect: Dialect, create: Sequence[str]) -> None:
        self.datastore, self.create_statements = datastore, list(create)
        table, p = dialect.table(TABLE), dialect.param
        self.select = f"SELECT body_hash, status, response FROM {table} WHERE key = {p}"
        self.insert = (
            f"INSERT INTO {table} (key, body_hash, status, response) VALUES ({dialect.params(4)}) "
            "ON CONFLICT (key) DO NOTHING RETURNING key"
        )
        self.take_over = f"UPDATE {table} SET body_hash = {p}, response = {p} WHERE key = {p} AND status = {p} AND response = {p} RETURNING key"
        self.keep = (
            f"UPDATE {table} SET body_hash = {p}, status = {p}, response = {p} "
            f"WHERE key = {p} AND status = {p} AND response = {p} RETURNING key"
        )
        self.delete = f"DELETE FROM {table} WHERE key = {p} AND status = {p} AND response = {p}"

    def create(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            for statement in self.create_statements:
                curs.execute(statement)

    def get(self, key: str) -> StoredResponse | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self.select, (key,))
            row = curs.fetchone()
        return StoredResponse(row["body_hash"], int(row["status"]), row["response"]) if row else None

    def reserve(self, key: str, fingerprint: str) -> tuple[StoredResponse, bool]:
        for _ in range(3):  # a row deleted or taken over between the statements: look again
            now = self.clock()
            mine = reservation(fingerprint, now, self.seconds)
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(self.insert, (key, mine.body_hash, mine.status, mine.response))
                if curs.fetchone() is not None:
                    return mine, True
            found = self.get(key)
            if found is None:
                continue
            if not found.expired(now):
                return found, False
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(self.take_over, (mine.body_hash, mine.response, key, IN_FLIGHT, found.response))
                if curs.fetchone() is not None:
                    return mine, True
        found = self.get(key)
        return (found, False) if found is not None else (reservation(fingerprint, self.clock(), 0.0), False)

    def finish(self, key: str, reserved: StoredResponse, kept: StoredResponse) -> StoredResponse:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self.keep, (kept.body_hash, kept.status, kept.response, key, IN_FLIGHT, reserved.response))
            if curs.fetchone() is not None:
                return kept
        return self.get(key) or kept

    def release(self, key: str, reserved: StoredResponse) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self.delete, (key, IN_FLIGHT, reserved.response))
