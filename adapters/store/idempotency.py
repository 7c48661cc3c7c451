"""`Idempotency-Key`: a key reserved before its request runs, then its first response, kept in
the store's own database (draft-ietf-httpapi-idempotency-key-header).

The keys are kept by the store's `IdempotencyKeys` port (`adapters.store.ports`; each backend's
table or dict under `adapters.backends`). A request with a key first reserves it (`reserve`): one
atomic insert, unless the key is kept already, of the key with its request's fingerprint
(`body_hash`), status 0 and, as `response`, the reservation (`{"in_flight_until": <unix seconds>,
"by": <random hex>}`). Only the request whose insert took the key runs; every other one gets the row back: a 422 when its fingerprint differs, a 409
(request in progress) while the first is in flight, the kept response once it is done. The
first then keeps its response in the row (`finish`), or, where it failed, deletes the
reservation (`release`), so a retry runs again: only a successful response (200) is kept, a
refused request (4xx, 5xx) runs again when it is retried. Both are compare-and-set on the
reservation, so they never touch a row another request holds.

A reservation that is neither finished nor released (its process was killed) expires after
IN_FLIGHT_SECONDS: the next request with the key takes it over (a compare-and-set on the
expired reservation, so only one does) and runs. The time is the servers' clock (`time.time()`); serve
processes on one store should keep their clocks in step. Stored responses are not expired.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from hashlib import sha256

import orjson

MAX_KEY = 255
IN_FLIGHT = 0
"""The status of a reserved key whose request has not answered yet."""
IN_FLIGHT_SECONDS = 60.0
"""A reservation expires this many seconds after it was made: a request with the key then runs again."""


@dataclass(frozen=True)
class StoredResponse:
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


def reservation(fingerprint: str, now: float, seconds: float = IN_FLIGHT_SECONDS) -> StoredResponse:
    """Returns a new reservation of a key for a request with `fingerprint`, made at `now`."""
    until = round(now + seconds, 3)
    return StoredResponse(fingerprint, IN_FLIGHT, orjson.dumps({"in_flight_until": until, "by": secrets.token_hex(8)}).decode())
