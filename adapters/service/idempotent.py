"""The Idempotency-Key flow (draft-ietf-httpapi-idempotency-key-header): a keyed request runs once; a retry
gets the first response.

`run_once` reserves the key (`IdempotencyKeys.reserve`), runs `work`, then keeps its response (`finish`).
Where `work` raised, it releases the key (`release`), so a retry runs again. A request finding the key
taken gets KeyReused (other fingerprint), KeyInFlight (still running) or the kept response (`Replayed`).
The store keeps the keys; the entrypoint defines fingerprints and answers."""

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
    """Runs `work` once for `key` and keeps its response; see the module. `fingerprint` identifies the
    request; one kept in `also` counts as the same. Raises KeyReused, KeyInFlight, or what `work` raised,
    the key released."""
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
