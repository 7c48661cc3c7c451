"""`Idempotency-Key`: a key reserved before its request runs, then its first response.

`reserve` is one atomic insert of the key, `body_hash`, status 0 and the reservation
`{"in_flight_until": <unix seconds>, "by": <random hex>}`. Only the request that took the key runs.
Others get 422 when the fingerprint differs, 409 while in flight, else the kept response. `finish`
keeps a 200 response; `release` deletes a failed one's reservation (compare-and-set). An abandoned
reservation expires after IN_FLIGHT_SECONDS (`time.time()`); stored responses do not."""

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
    """What is kept for a key: `body_hash`, the status (IN_FLIGHT while reserved) and the response's JSON."""

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
