"""Python's cyclic garbage collector paused while a read folds a whole log or builds many objects.
`gc_paused` is the process's one pauser. A fold keeps many objects alive but makes no reference cycles,
so reference counting frees them. Figures: docs/benchmarks.md, "Figures moved from docstrings". Threads
share the collector, so it is restored after the last overlapping read."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_held = [0, False]
"""How many `gc_paused` blocks are running, and whether the collector was on before the first."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Runs the block with the cyclic garbage collector off; reference counting still frees what it drops.
    Nested and concurrent blocks are counted. The last block to end turns it on again, if it was on."""
    with _lock:
        if _held[0] == 0:
            _held[1] = gc.isenabled()
            gc.disable()
        _held[0] += 1
    try:
        yield
    finally:
        with _lock:
            _held[0] -= 1
            if _held[0] == 0 and _held[1]:
                gc.enable()
