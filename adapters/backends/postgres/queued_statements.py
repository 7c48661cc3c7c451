"""A cursor whose statements run on a thread of their own (`QueuedStatements`): the server writes a
rebuild's page while the fold goes on."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class QueuedStatements:
    """A cursor whose statements run in order on a thread of their own, over one connection (`connect()`). A
    write returns at once. A read (`fetchone`, `fetchall`) waits for its statement and all before.
    `commit()` ends the current transaction. `close()` waits for all and raises the first error. After an
    error, queued statements are skipped and the next read raises it too. `begin`: the statements that
    begin a transaction."""

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
        """Ends the transaction of the statements queued so far, without waiting. It first waits for the
        transaction before to end, raising its error. So at most two transactions are held; memory stays
        flat."""
        if self._committed is not None:
            self._committed.result()
        self._committed = self._put(None, None)

    def close(self) -> None:
        """Waits until every statement ran, stops the thread, and raises the first error."""
        done = self._put(None, None)  # the last transaction ends too
        self._queue.put(None)
        self._thread.join()
        done.result()
