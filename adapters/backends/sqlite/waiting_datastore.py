"""The library's SQLite datastore whose writers wait their turn (`WaitingSQLiteDatastore`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from eventsourcing import sqlite as es_sqlite
from eventsourcing.persistence import OperationalError

from adapters.backends.writer_queue import WriterQueue


class _ImmediateTransaction(es_sqlite.SQLiteTransaction):
    """A writing transaction that takes the file's write lock when it begins."""

    def __enter__(self) -> es_sqlite.SQLiteCursor:
        cursor = self.connection.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise OperationalError(e) from e
        return cursor


class WaitingSQLiteDatastore(es_sqlite.SQLiteDatastore):
    """The library's SQLite datastore, except that a writing transaction begins IMMEDIATE and
    the process's writers queue first come, first served (`WriterQueue`), each for as long as
    the queue moves, instead of racing for the pool's writer lock for at most 5 s; the pool
    waits up to the lock timeout (not 5 s) for a free connection.

    Under the library's plain BEGIN, a transaction that reads before it writes (as the
    read models' catch-up does) cannot wait for another process's write: SQLite
    refuses to upgrade its read at once with "database is locked", whatever the lock timeout.
    Taking the write lock first makes every writer wait up to the lock timeout instead.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        wait = float(kwargs.get("lock_timeout") or es_sqlite.SQLITE3_DEFAULT_LOCK_TIMEOUT)
        kwargs.setdefault("pool_timeout", wait)
        super().__init__(*args, **kwargs)
        self.pool._create_connection = self._connect_waiting(self.pool._create_connection)  # type: ignore[method-assign]  # the library's pool has no hook
        self.writers = WriterQueue(patience=wait)
        """The process's writers to this file, in the order they came."""

    def _connect_waiting(self, create: Callable[[], Any]) -> Callable[[], Any]:
        """Returns the pool's `create` tried again while the file is locked: a new connection
        switches a fresh file to WAL (the library's `PRAGMA journal_mode=WAL`), which SQLite
        refuses at once with "database is locked", whatever the busy timeout, while another
        process opening the same file holds it. Tries until the lock timeout has passed."""
        limit = float(self.pool.lock_timeout or 5)

        def connect() -> Any:
            waited, pause = 0.0, 0.005
            while True:
                try:
                    return create()
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) or waited >= limit:
                        raise
                time.sleep(pause)
                waited, pause = waited + pause, min(pause * 2, 0.1)

        return connect

    @contextmanager
    def get_connection(self, *, commit: bool) -> Iterator[es_sqlite.SQLiteConnection]:
        """Yields a connection from the pool; one for writing only in the writer's turn."""
        if not commit:
            with super().get_connection(commit=False) as conn:
                yield conn
            return
        self.writers.acquire()
        try:
            with super().get_connection(commit=True) as conn:
                yield conn
        finally:
            self.writers.release()

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[es_sqlite.SQLiteCursor]:
        begin = _ImmediateTransaction if commit else es_sqlite.SQLiteTransaction
        with self.get_connection(commit=commit) as conn, begin(conn, commit=commit) as curs, curs:
            yield curs
