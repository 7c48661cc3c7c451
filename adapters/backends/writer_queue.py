"""The queue of one process's writers to one SQLite file: first come, first served. It replaces the
pool's writer lock, where a writer could lose the race again and again. A writer waits for its
ticket outside the pool. It gives up only when the queue has not moved for `patience` seconds (the
file's lock timeout)."""

from __future__ import annotations

import threading
import time

from eventsourcing.persistence import ConnectionUnavailableError


class WriterQueue:
    """A fair (FIFO) turn for writers, each waiting while the queue keeps moving. `acquire()` blocks
    until every earlier writer released its turn. It raises `ConnectionUnavailableError` when no
    turn was released for `patience` seconds. `release()` ends the turn. Not reentrant."""

    def __init__(self, patience: float) -> None:
        self.patience = patience
        self._moved = threading.Condition()
        self._next = 0  # the ticket the next writer takes
        self._serving = 0  # the ticket whose writer may write now
        self._given_up: set[int] = set()

    @property
    def waiting(self) -> int:
        """The number of writers holding or waiting for a turn (those that gave up not counted)."""
        with self._moved:
            return self._next - self._serving - len(self._given_up)

    def acquire(self) -> None:
        with self._moved:
            ticket = self._next
            self._next += 1
            seen = self._serving
            deadline = time.monotonic() + self.patience
            while self._serving != ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._given_up.add(ticket)
                    raise ConnectionUnavailableError(
                        f"Timed out waiting for the writer ahead (no write ended for {self.patience:g} s)"
                    )
                self._moved.wait(left)
                if self._serving != seen:  # the queue moved: wait the full patience again
                    seen = self._serving
                    deadline = time.monotonic() + self.patience

    def release(self) -> None:
        with self._moved:
            self._serving += 1
            while self._serving in self._given_up:
                self._given_up.discard(self._serving)
                self._serving += 1
            self._moved.notify_all()
