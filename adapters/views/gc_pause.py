"""Python's cyclic garbage collector paused while a read folds a whole log or builds many
objects at once (the one pauser of the process: `gc_paused`).

A fold of a conversation's log allocates some objects per event (the decoded events, the
folds' states) and keeps many of them alive until it ends: each time the allocations pass
the collector's threshold it traverses the young objects that survive, and every few times
all of them (a large share of a long fold's time: docs/benchmarks.md, "Figures moved from
docstrings"), while the objects it makes hold no reference cycles and are freed by their
reference counts. `gc_paused` switches the collector
off for such a read and back on after it, as it was before the first of the reads that
overlap (threads of one process share the collector).
"""

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
    """Runs the block with the cyclic garbage collector off (reference counting still frees
    what the block drops); on again when the last of the blocks running in this process ends,
    where it was on when the first began. Nested and concurrent blocks are counted."""
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
