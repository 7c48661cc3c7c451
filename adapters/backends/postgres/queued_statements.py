"""A cursor whose statements run on a thread of their own (`QueuedStatements`), so the server
writes a rebuild's page while the fold goes on with the next."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class QueuedStatements:
    """A cursor whose statements run in the order given on a thread of their own, over one
    connection (`connect()`, a context manager), so the server writes a rebuild's page while
    this thread folds the next. A write returns at once; a read (`fetchone`, `fetchall`)
    waits for its own statement, and so for every statement before it. `commit()` ends the
    transaction the statements so far are in (the next statement begins one). `close()` waits
    for all of them and raises the first error; after an error the statements still queued
    are not run and the next read raises it too (the transaction was rolled back). `begin`: the
    statements that begin a transaction."""

    def __init__(self, connect: Callable[[], Any], begin: tuple[str, ...] = ("BEGIN",)) -> None:
        self._connect = connect
        self._begin = begin
        self._queue: queue.SimpleQueue[tuple[str | None, Any, Future[Any]] | None] = queue.SimpleQueue()
        self._last: Future[Any] | None = None
        self._committed: Future[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="chatrecord-rebuild-writes", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failed: BaseException | None = None
        try:
            with self._connect() as conn, conn.cursor() as curs:  # an autocommit connection of the pool
                begun = False
                while (item := self._queue.get()) is not None:
                    sql, params, done = item
                    if failed is not None:
                        done.set_exception(failed)
                        continue
                    try:
                        if sql is None:
                            if begun:
                                curs.execute("COMMIT")
                            begun = False
                            done.set_result(None)
                            continue
                        if not begun:
                            for statement in self._begin:
                                curs.execute(statement)
                            begun = True
                        curs.execute(sql, params)
                        done.set_result(curs.fetchall() if curs.description is not None else None)
                    except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
                        failed = error
                        done.set_exception(error)
                        if begun and not conn.closed:
                            curs.execute("ROLLBACK")
                        begun = False
        except BaseException as error:  # noqa: BLE001 - no connection: every statement fails
            while (item := self._queue.get()) is not None:
                item[2].set_exception(error)

    def _put(self, sql: str | None, params: Any) -> Future[Any]:
        done: Future[Any] = Future()
        self._queue.put((sql, params, done))
        self._last = done
        return done

    def execute(self, sql: str, params: Any = ()) -> QueuedStatements:
        self._put(sql, params)
        return self

    def fetchall(self) -> list[Any]:
        assert self._last is not None
        return self._last.result() or []

    def fetchone(self) -> Any:
        rows = self.fetchall()
        return rows[0] if rows else None

    def commit(self) -> None:
        """Ends the transaction of the statements queued so far, without waiting for it; but
        first waits until the transaction before it has ended (raising its error, if any), so
        that at most two transactions' statements are held, however far the caller gets ahead
        of the database: a rebuild's memory stays the same whatever the log's length."""
        if self._committed is not None:
            self._committed.result()
        self._committed = self._put(None, None)

    def close(self) -> None:
        """Waits until every statement ran, stops the thread, and raises the first error."""
        done = self._put(None, None)  # the last transaction ends too
        self._queue.put(None)
        self._thread.join()
        done.result()
