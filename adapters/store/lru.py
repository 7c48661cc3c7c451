"""`LRU`: the library's `LRUCache` interface on an `OrderedDict`, whose reordering runs in C. Why: see
docs/benchmarks.md, "Figures moved from docstrings"."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
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
        """Returns the item under `key`, now the most recent; with `evict` removes it. Raises KeyError
        when none is kept."""
        with self._lock:
            if evict:
                return self._items.pop(key)
            value = self._items[key]
            self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> tuple[Any, Any]:
        """Keeps `value` under `key`; returns the key and value evicted, (None, None) if none."""
        with self._lock:
            items = self._items
            items[key] = value
            items.move_to_end(key)
            if len(items) > self.maxsize:
                return items.popitem(last=False)
        return None, None

    def __len__(self) -> int:
        return len(self._items)


class Generations(Generic[K, V]):
    """At most about `maxsize` items in two generations of dicts, without locks. An item goes into the
    young one. At `maxsize // 2` items it becomes old; the old one is dropped. A hit in the old one
    moves the item to the young one. A race can drop an item, so every item must be a pure function
    of its key."""

    __slots__ = ("half", "_young", "_old")

    def __init__(self, maxsize: int) -> None:
        self.half = max(1, maxsize // 2)
        self._young: dict[K, V] = {}
        self._old: dict[K, V] = {}

    def get(self, key: K, default: V | None = None) -> V | None:
        """Returns the item kept under `key`, `default` if none."""
        value: V = self._young.get(key, _MISSING)
        if value is _MISSING:
            value = self._old.get(key, _MISSING)
            if value is _MISSING:
                return default
            self.put(key, value)
        return value

    def put(self, key: K, value: V) -> None:
        """Keeps `value` under `key`."""
        young = self._young
        young[key] = value
        if len(young) >= self.half:
            self._old, self._young = young, {}

    def drop_where(self, dropped: Callable[[K], bool]) -> None:
        """Drops the items whose key is `dropped` (a scan of every key: for rare forgetting)."""
        self._young = {k: v for k, v in self._young.items() if not dropped(k)}
        self._old = {k: v for k, v in self._old.items() if not dropped(k)}

    def any_where(self, found: Callable[[K], bool]) -> bool:
        """Says whether an item's key is `found`."""
        return any(found(k) for k in (*self._young, *self._old))

    def __len__(self) -> int:
        return len(self._young) + len(self._old)


_MISSING: Any = object()
