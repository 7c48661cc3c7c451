"""The library's SQLite datastore whose writers wait their turn (`WaitingSQLiteDatastore`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
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


class WaitingConnectionPool(es_sqlite.SQLiteConnectionPool):
    """The library's SQLite connection pool whose new connection is tried again while the file
    is locked: a new connection switches a fresh file to WAL (the library's `PRAGMA
    journal_mode=WAL`), which SQLite refuses at once with "database is locked", whatever the
    busy timeout, while another process opening the same file holds it. Tries until the lock
    timeout has passed. `_create_connection` is the library's hook for a pool's connections
    (abstract in `eventsourcing.persistence.ConnectionPool`: "subclasses should implement")."""

    def _create_connection(self) -> es_sqlite.SQLiteConnection:
        limit = float(self.lock_timeout or 5)
        waited, pause = 0.0, 0.005
        while True:
            try:
                return super()._create_connection()
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or waited >= limit:
                    raise
            time.sleep(pause)
            waited, pause = waited + pause, min(pause * 2, 0.1)


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
        made = self.pool  # the library's, not used yet: the same pool whose connections wait
        self.pool = WaitingConnectionPool(
            db_name=made.db_name,
            lock_timeout=made.lock_timeout,
            pool_size=made.pool_size,
            max_overflow=made.max_overflow,
            pool_timeout=made.pool_timeout,
            max_age=made.max_age,
            pre_ping=made.pre_ping,
        )
        self.writers = WriterQueue(patience=wait)
        """The process's writers to this file, in the order they came."""

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
