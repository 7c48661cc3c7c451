"""How the store's writes try again: a conflicting append after a jittered, growing wait
(`backoff`; `WriteConflict` when every try conflicted), a write whose connection was lost
until a server accepts it (`reconnecting`; `PrimaryGone` past the time). Which of its driver's
errors is a lost connection the backend says (`StorePorts.connection_lost`): the store knows no
driver."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from eventsourcing.persistence import InterfaceError, OperationalError

from domain.errors import ChatrecordError


class WriteConflict(ChatrecordError):
    """Raised by `ConversationStore.handle` when every try to append a command's events
    conflicted with another writer's append to the same conversation. Nothing of the command
    was stored; sending it again is safe (a repeat returns the first result). The HTTP
    service answers it with 503 `write-conflict` (`adapters.http.problems`)."""


BACKOFF_BASE = 0.01
"""Seconds: the first retry of a conflicting append waits up to this long, doubling per try."""
BACKOFF_CAP = 0.5
"""Seconds: no wait between tries is longer."""


def backoff(attempt: int) -> float:
    """Returns the seconds to wait after try `attempt` (1, 2, …) conflicted: a random time up
    to BACKOFF_BASE·2^(attempt-1), at most BACKOFF_CAP ("full jitter", so writers that
    collided once do not collide again in step).

    Why `handle` does not use the library's `eventsourcing.utils.retry` here (the PostgreSQL
    append does, for a lost connection, where a fixed wait is right): `retry` sleeps
    `wait · (1 ± 5 %)` after every failed try, one wait fixed when the function is decorated.
    That cannot give this growing, fully random wait, which the README documents ("up to
    10 ms, 20 ms, 40 ms, … at most 0.5 s"); with a near-constant wait, writers that conflicted
    once try again in step and conflict again. The rest would fit (re-raising after the last
    try, dropping the cached state before raising), but not the wait.
    """
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


class PrimaryGone(ChatrecordError):
    """Raised by `ConversationStore.handle` and `handle_batch` when the connection to the
    database was lost and no server accepted the write again within the store's
    `WRITE_RETRY_SECONDS` (CHATRECORD_WRITE_RETRY_SECONDS): the primary died and no standby was
    promoted in time, or every host of CHATRECORD_DATABASE_URL is down. The write may or may not
    be stored (a commit whose answer was lost); sending it again is safe, as a line recorded before
    is a repeat. The HTTP service answers it with 503 `store-unavailable`."""


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


def reconnecting(method: Write) -> Write:
    """Makes a write of the store (`handle`, `handle_batch`) try again, every RECONNECT_WAIT s,
    while its connection is lost (the store's `connection_lost`), for up to the store's `retry_seconds`:
    through a multi-host CHATRECORD_DATABASE_URL (`target_session_attrs=read-write`), libpq
    connects to whichever host is the primary once a standby was promoted. Each try decides
    anew from the database, so a commit whose answer was lost comes back as a repeat (the
    line's idempotency), never as a second copy. Raises PrimaryGone past the time.

    Why a loop of its own: on a dead server the library's PostgresDatastore raises its
    OperationalError (the driver's error as its cause) and psycopg_pool drops the broken
    connection and connects again in the background, waiting 1 s, 2 s, 4 s, … between tries; a
    caller meanwhile waits up to the pool's timeout (POSTGRES_CONNECT_TIMEOUT, 5 s) and gets
    PoolTimeout. The PostgreSQL recorder's own `retry` (CONNECTION_ATTEMPTS tries 0.2 s apart)
    covers a blip, not a promotion that takes seconds."""

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
