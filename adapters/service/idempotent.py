"""The Idempotency-Key flow (draft-ietf-httpapi-idempotency-key-header): a request sent with a
key runs once, and a retry with the key gets the first response.

`run_once(keys, key, fingerprint, work)` reserves the key before anything runs
(`IdempotencyKeys.reserve`), runs `work`, then keeps its response in place of the reservation
(`finish`), or, where `work` raised, deletes the reservation (`release`), so a retry runs again:
only a response `work` returns is kept. A request that finds the key taken gets what is kept:
KeyReused where its fingerprint differs, KeyInFlight while the first is running, the kept
response (`Replayed`) once it is done. The storage of the keys is the store's
(`adapters.store.idempotency`); the entrypoint says what a fingerprint is and how each outcome is
answered (HTTP: `adapters.http.app`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Generic, TypeVar

from adapters.store.idempotency import IN_FLIGHT_SECONDS, StoredResponse
from adapters.store.ports import IdempotencyKeys
from domain.errors import ChatrecordError

Result = TypeVar("Result")


@dataclass(frozen=True)
class FirstRun(Generic[Result]):
    """What `work` returned where this request ran: its result and the response kept for the key."""

    result: Result
    response: str


@dataclass(frozen=True)
class Replayed:
    """The response kept for the key from its first request (its status and text)."""

    status: int
    response: str


class KeyReused(ChatrecordError):
    """Raised when the key was sent before with another fingerprint (`kept`); nothing ran."""

    def __init__(self, kept: str, fingerprint: str) -> None:
        self.kept, self.fingerprint = kept, fingerprint
        super().__init__("this Idempotency-Key was sent before with another request")


class KeyInFlight(ChatrecordError):
    """Raised while the first request with the key is still running; nothing ran. A reservation
    its server left when it stopped expires after `seconds`."""

    def __init__(self, seconds: float = IN_FLIGHT_SECONDS) -> None:
        self.seconds = seconds
        super().__init__(
            "a request with this Idempotency-Key is still being processed; "
            f"retry after it answers (a reservation left by a stopped server expires after {seconds:.0f} s)"
        )


def run_once(
    keys: IdempotencyKeys,
    key: str,
    fingerprint: str,
    work: Callable[[], tuple[Result, str]],
    also: Collection[str] = (),
) -> FirstRun[Result] | Replayed:
    """Runs `work` (which returns its result and the response to keep, 200) once for `key`: see
    the module. `fingerprint` is what the request is kept with; a kept one in `also` is taken as
    the same request too (one kept by an earlier way of fingerprinting). Raises KeyReused,
    KeyInFlight, or what `work` raised (the key released)."""
    reserved, mine = keys.reserve(key, fingerprint)  # before anything runs
    if not mine:
        return _kept(reserved, fingerprint, also)
    try:
        result, response = work()
    except BaseException:
        keys.release(key, reserved)  # only a response work returned is kept: a retry runs again
        raise
    # kept, unless the reservation expired and another request took the key over
    keys.finish(key, reserved, StoredResponse(fingerprint, 200, response))
    return FirstRun(result, response)


def _kept(kept: StoredResponse, fingerprint: str, also: Collection[str]) -> Replayed:
    if kept.body_hash != fingerprint and kept.body_hash not in also:
        raise KeyReused(kept.body_hash, fingerprint)
    if kept.in_flight:
        raise KeyInFlight()
    return Replayed(kept.status, kept.response)
