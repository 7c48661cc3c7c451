"""`LRU`: the library's `eventsourcing.application.LRUCache` interface (`get` raising KeyError,
`get(key, evict=True)`, `put` answering what it evicted) on an `OrderedDict`, whose reordering
runs in C. The library's cache moves its links in Python on every hit; a turn read asks the
process's caches about a hundred times (each entry and card outcome decoded, each note
rendered), so that bookkeeping was a visible share of a read's CPU time (issue 25)."""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `maxsize` items, the least recently asked for or kept going first. Safe to share
    between threads (one lock, held only while the dict changes)."""

    __slots__ = ("maxsize", "_items", "_lock")

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = Lock()

    def get(self, key: K, *, evict: bool = False) -> V:
        """Returns the item kept under `key` (now the most recent), or with `evict` removes it;
        raises KeyError when none is kept."""
        with self._lock:
            if evict:
                return self._items.pop(key)
            value = self._items[key]
            self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> tuple[Any, Any]:
        """Keeps `value` under `key` (the most recent); returns the key and value it evicted to
        make room, (None, None) if none."""
        with self._lock:
            items = self._items
            items[key] = value
            items.move_to_end(key)
            if len(items) > self.maxsize:
                return items.popitem(last=False)
        return None, None

    def __len__(self) -> int:
        return len(self._items)
