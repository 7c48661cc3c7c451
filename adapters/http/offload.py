"""The hot routes' one hop from the event loop to a thread that may wait on the store. The chat's routes
(`POST /v1/lines`, `GET …/turn`) are `async def` with async dependencies. They hand the store's work to
`offload`: one hop through a `ThreadPoolExecutor` and one `call_soon_threadsafe` back. The request's
context variables go along, as anyio's hop carries them."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

THREADS = 40
"""Store calls a process runs at once, as many as anyio's default thread limit the sync routes had."""

_pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="chatrecord-http")

T = TypeVar("T")


async def offload(work: Callable[[], T]) -> T:
    """Runs `work` on a store thread and returns or raises what it does; the event loop serves others
    meanwhile."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_pool, context.run, work)
