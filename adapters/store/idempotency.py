"""`Idempotency-Key`: a key reserved before its request runs, then its first response, kept in
the store's own database (draft-ietf-httpapi-idempotency-key-header).

Table `chatrecord_idempotency(key, body_hash, status, response)`, made once (`CREATE TABLE IF
NOT EXISTS`; on PostgreSQL under an advisory lock, so processes starting together do not race).
A request with a key first reserves it (`reserve`): one INSERT … ON CONFLICT DO NOTHING RETURNING of the
key with its request's fingerprint (`body_hash`), status 0 and, as `response`, the reservation
(`{"in_flight_until": <unix seconds>, "by": <random hex>}`). Only the request whose INSERT
took the key runs; every other one gets the row back: a 422 when its fingerprint differs, a 409
(request in progress) while the first is in flight, the kept response once it is done. The
first then keeps its response in the row (`finish`), or, where it failed, deletes the
reservation (`release`), so a retry runs again: only a successful response (200) is kept, a
refused request (4xx, 5xx) runs again when it is retried. Both are compare-and-set on the
reservation, so they never touch a row another request holds.

A reservation that is neither finished nor released (its process was killed) expires after
IN_FLIGHT_SECONDS: the next request with the key takes it over (an UPDATE on the expired
reservation, so only one does) and runs. The time is the servers' clock (`time.time()`); serve
processes on one store should keep their clocks in step. Kept responses are not expired.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256
from typing import Any

import orjson

TABLE = "chatrecord_idempotency"
MAX_KEY = 255
IN_FLIGHT = 0
"""The status of a reserved key whose request has not answered yet."""
IN_FLIGHT_SECONDS = 60.0
"""A reservation expires this many seconds after it was made: a request with the key then runs again."""


@dataclass(frozen=True)
class Kept:
    """What is kept for a key: the request's fingerprint (`body_hash`), the status (IN_FLIGHT
    while reserved) and the response's JSON (the reservation while in flight)."""

    body_hash: str
    status: int
    response: str

    @property
    def in_flight(self) -> bool:
        return self.status == IN_FLIGHT

    def expired(self, now: float) -> bool:
        """Whether this is a reservation past its time (`now` in unix seconds)."""
        if not self.in_flight:
            return False
        try:
            return float(orjson.loads(self.response)["in_flight_until"]) <= now
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return True


def body_hash(*parts: bytes) -> str:
    """Returns 64 hex of the sha256 of the request's parts."""
    digest = sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def reservation(fingerprint: str, now: float, seconds: float = IN_FLIGHT_SECONDS) -> Kept:
    """Returns a new reservation of a key for a request with `fingerprint`, made at `now`."""
    until = round(now + seconds, 3)
    return Kept(fingerprint, IN_FLIGHT, orjson.dumps({"in_flight_until": until, "by": secrets.token_hex(8)}).decode())


class IdempotencyKeys:
    """The keys of one store: `get`, `reserve`, `finish`, `release`."""

    clock: Callable[[], float] = staticmethod(time.time)
    seconds: float = IN_FLIGHT_SECONDS

    def get(self, key: str) -> Kept | None:
        raise NotImplementedError

    def reserve(self, key: str, fingerprint: str) -> tuple[Kept, bool]:
        """Reserves `key` for a request with `fingerprint`, atomically, in the store. Returns
        (the reservation, True) when this request has the key and runs, else (what is kept for
        the key, False): another request's reservation in flight, or a kept response."""
        raise NotImplementedError

    def finish(self, key: str, reserved: Kept, kept: Kept) -> Kept:
        """Keeps `kept` in place of the reservation `reserved`; returns what is kept for the key
        (another request's, where the reservation expired and was taken over)."""
        raise NotImplementedError

    def release(self, key: str, reserved: Kept) -> None:
        """Deletes the reservation `reserved` (its request failed), unless it was taken over."""
        raise NotImplementedError


class SQLIdempotencyKeys(IdempotencyKeys):
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

    def reserve(self, key: str, fingerprint: str) -> tuple[Kept, bool]:
        p = self.param
        for _ in range(3):  # a row deleted or taken over between the statements: look again
            now = self.clock()
            mine = reservation(fingerprint, now, self.seconds)
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(
                    f"INSERT INTO {self.table} (key, body_hash, status, response) VALUES ({p}, {p}, {p}, {p}) "
                    "ON CONFLICT (key) DO NOTHING RETURNING key",
                    (key, mine.body_hash, mine.status, mine.response),
                )
                if curs.fetchone() is not None:
                    return mine, True
            found = self.get(key)
            if found is None:
                continue
            if not found.expired(now):
                return found, False
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(
                    f"UPDATE {self.table} SET body_hash = {p}, response = {p} "
                    f"WHERE key = {p} AND status = {p} AND response = {p} RETURNING key",
                    (mine.body_hash, mine.response, key, IN_FLIGHT, found.response),
                )
                if curs.fetchone() is not None:
                    return mine, True
        found = self.get(key)
        return (found, False) if found is not None else (reservation(fingerprint, self.clock(), 0.0), False)

    def finish(self, key: str, reserved: Kept, kept: Kept) -> Kept:
        p = self.param
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                f"UPDATE {self.table} SET body_hash = {p}, status = {p}, response = {p} "
                f"WHERE key = {p} AND status = {p} AND response = {p} RETURNING key",
                (kept.body_hash, kept.status, kept.response, key, IN_FLIGHT, reserved.response),
            )
            if curs.fetchone() is not None:
                return kept
        return self.get(key) or kept

    def release(self, key: str, reserved: Kept) -> None:
        p = self.param
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                f"DELETE FROM {self.table} WHERE key = {p} AND status = {p} AND response = {p}",
                (key, IN_FLIGHT, reserved.response),
            )


COLUMNS = "(key TEXT PRIMARY KEY, body_hash TEXT NOT NULL, status INTEGER NOT NULL, response TEXT NOT NULL)"
