"""How the store's writes try again. A conflicting append waits a jittered, growing time (`backoff`);
`WriteConflict` when all conflict. A write with a lost connection retries until a server accepts it
(`reconnecting`); `PrimaryGone` past the time. The backend says which driver error is a lost
connection (`StorePorts.connection_lost`)."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from eventsourcing.persistence import InterfaceError, OperationalError

from domain.errors import ChatrecordError


class WriteConflict(ChatrecordError):
    """Raised by `handle` when every try conflicted with another writer's append. Nothing was stored;
    sending it again is safe. HTTP answers 503 `write-conflict`."""


BACKOFF_BASE = 0.01
"""Seconds: the first retry of a conflicting append waits up to this long, doubling per try."""
BACKOFF_CAP = 0.5
"""Seconds: no wait between tries is longer."""


# Not the library's `retry`: it sleeps one fixed wait (±5 %), so writers that conflicted once
# would try again in step and conflict again.
def backoff(attempt: int) -> float:
    """Returns the seconds to wait after try `attempt` (1, 2, …) conflicted. A random time up to
    BACKOFF_BASE·2^(attempt-1), at most BACKOFF_CAP ("full jitter")."""
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


class PrimaryGone(ChatrecordError):
    """Raised by `handle` and `handle_batch` when the connection was lost past `WRITE_RETRY_SECONDS`.
    The write may or may not be stored; sending it again is safe. HTTP answers 503
    `store-unavailable`."""


RECONNECT_WAIT = 0.25
"""Seconds between the tries of a write whose connection was lost (`reconnecting`)."""


Write = TypeVar("Write", bound=Callable[..., Any])


class Reconnects(Protocol):
    """What `reconnecting` reads and counts on the store whose write it tries again."""

    retry_seconds: float
    reconnects: int

    def connection_lost(self, error: BaseException) -> bool:
        """Says whether `error` is a lost connection, as the store's backend words its driver's."""
        ...


# A loop of its own: the PostgreSQL recorder's `retry` (tries 0.2 s apart) covers a blip, and the
# pool reconnects in the background while a caller gets PoolTimeout; a promotion takes seconds.
def reconnecting(method: Write) -> Write:
    """Retries a write every RECONNECT_WAIT s while its connection is lost, up to `retry_seconds`. A
    multi-host CHATRECORD_DATABASE_URL reaches a promoted standby. Each try decides anew, so a
    commit whose answer was lost comes back as a repeat. Raises PrimaryGone past the time."""

    @functools.wraps(method)
    def call(self: Reconnects, *args: Any, **kwargs: Any) -> Any:
        deadline: float | None = None
        while True:
            try:
                return method(self, *args, **kwargs)
            except (InterfaceError, OperationalError) as error:
                if self.retry_seconds <= 0 or not self.connection_lost(error):
                    raise
                now = time.monotonic()
                deadline = now + self.retry_seconds if deadline is None else deadline
                if now >= deadline:
                    raise PrimaryGone(
                        f"no server of the store accepted the write for {self.retry_seconds:g} s "
                        f"(CHATRECORD_WRITE_RETRY_SECONDS) after its connection was lost: {error}; it may or "
                        "may not be stored, and sending it again is safe (a line recorded before is a repeat)"
                    ) from error
                self.reconnects += 1
                time.sleep(min(RECONNECT_WAIT, deadline - now))

    return call  # type: ignore[return-value]
