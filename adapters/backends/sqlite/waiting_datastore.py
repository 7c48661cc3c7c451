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
    """The library's SQLite connection pool, retrying a new connection while the file is locked.
    Switching a fresh file to WAL fails at once with "database is locked" while another process
    opens it. It tries until the lock timeout has passed."""

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
    """The library's SQLite datastore, with writing transactions that begin IMMEDIATE. The process's
    writers queue first come, first served (`WriterQueue`) while the queue moves. The pool waits up
    to the lock timeout for a free connection. Taking the write lock first lets a read-then-write
    transaction wait instead of failing."""

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
