"""The hot routes' one hop from the event loop to a thread that may wait on the store. The chat's routes
(`POST /v1/lines`, `GET …/turn`) hand the store's work to `offload`: the work goes on a queue that
store threads take from, and its outcome comes back with one `call_soon_threadsafe`. The request's
context variables go along, as anyio's hop carries them.

The queue and threads are this module's own, not a `ThreadPoolExecutor`: the executor's future (a
lock and a condition), its locks per submit and asyncio's chaining of the two futures cost a line
more CPU than the store's work needs (issue 37); here a hop is a queue put and a thread's wake-up,
and the way back one callback on the loop."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

THREADS = 40
"""Store calls a process runs at once, as many as anyio's default thread limit the sync routes had."""

T = TypeVar("T")
Job = tuple[contextvars.Context, Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop]


class StoreThreads:
    """Up to `size` daemon threads taking jobs from one queue. A job claims an idle thread, or starts one
    while fewer than `size` run; with `size` busy it waits on the queue for the first to finish."""

    def __init__(self, size: int) -> None:
        self.size, self.jobs, self.threads, self.idle = size, SimpleQueue[Job](), 0, 0
        self.lock = threading.Lock()

    def put(self, job: Job) -> None:
        """Queues `job` for an idle thread, or for one it starts."""
        with self.lock:
            if self.idle:
                self.idle -= 1
                start = False
            else:
                start = self.threads < self.size
                self.threads += start
        if start:
            threading.Thread(target=self.work, name=f"chatrecord-http_{self.threads}", daemon=True).start()
        self.jobs.put(job)

    def work(self) -> None:
        """Runs jobs for good; each outcome is handed to its future on its loop."""
        while True:
            context, call, future, loop = self.jobs.get()
            result = None
            try:
                result = context.run(call)
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting request as it is
                loop.call_soon_threadsafe(settle, future, None, error)
            else:
                loop.call_soon_threadsafe(settle, future, result, None)
            del context, call, future, loop, result  # nothing of a request held while waiting
            with self.lock:
                self.idle += 1


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Hands a job's outcome to its future, unless the request was cancelled meanwhile."""
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_threads = StoreThreads(THREADS)


async def offload(work: Callable[[], T]) -> T:
    """Runs `work` on a store thread and returns or raises what it does; the event loop serves others
    meanwhile."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    _threads.put((contextvars.copy_context(), work, future, loop))
    return await future
