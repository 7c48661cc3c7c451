"""`Idempotency-Key`: the first response to a key, kept in the store's own database.

Table `chatrecord_idempotency(key, body_hash, status, response)`, made once (`CREATE TABLE IF
NOT EXISTS`; on PostgreSQL under an advisory lock, so processes starting together do not race).
A key is kept with the sha256 of its request's body and the JSON of its first successful
response; a later request with the key gets that response again, or a 422 when its body differs.
Two requests racing with one key both run (the line's own digest makes the second a repeat),
and both answer with the response stored first. Only a successful response is kept: a request
that was refused (4xx, 5xx) runs again when it is retried. Keys are not expired.
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import sha256
from typing import Any

TABLE = "chatrecord_idempotency"
MAX_KEY = 255


@dataclass(frozen=True)
class Kept:
    """The first response to a key: the body's hash, the status and the response's JSON."""

    body_hash: str
    status: int
    response: str


def body_hash(*parts: bytes) -> str:
    """Returns 64 hex of the sha256 of the request's parts."""
    digest = sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


class IdempotencyKeys:
    """The kept responses of one store: `get(key)` and `keep(key, kept)`."""

    def get(self, key: str) -> Kept | None:
        raise NotImplementedError

    def keep(self, key: str, kept: Kept) -> Kept:
        """Keeps `kept` unless the key is kept already; returns what is kept for the key."""
        raise NotImplementedError


class SQLKeys(IdempotencyKeys):
    """The table in the store's SQLite file or PostgreSQL schema: `table` its (qualified)
    name, `param` the driver's placeholder, `create` the statements that make it."""

    def __init__(self, datastore: Any, table: str, param: str, create: list[str]) -> None:
        self.datastore, self.table, self.param = datastore, table, param
        with datastore.transaction(commit=True) as curs:
            for statement in create:
                curs.execute(statement)

    def get(self, key: str) -> Kept | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(f"SELECT body_hash, status, response FROM {self.table} WHERE key = {self.param}", (key,))
            row = curs.fetchone()
        return Kept(row["body_hash"], int(row["status"]), row["response"]) if row else None

    def keep(self, key: str, kept: Kept) -> Kept:
        p = self.param
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                f"INSERT INTO {self.table} (key, body_hash, status, response) VALUES ({p}, {p}, {p}, {p}) "
                "ON CONFLICT (key) DO NOTHING",
                (key, kept.body_hash, kept.status, kept.response),
            )
        return self.get(key) or kept


COLUMNS = "(key TEXT PRIMARY KEY, body_hash TEXT NOT NULL, status INTEGER NOT NULL, response TEXT NOT NULL)"
