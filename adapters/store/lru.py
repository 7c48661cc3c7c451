"""`LRU`: the library's `eventsourcing.application.LRUCache` interface (`get` raising KeyError,
`get(key, evict=True)`, `put` answering what it evicted) on an `OrderedDict`, whose reordering
runs in C. The library's cache moves its links in Python on every hit, and a turn read asks
the process's caches once per entry, card outcome and note (docs/benchmarks.md, "Figures moved
from docstrings")."""

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


class Generations(Generic[K, V]):
    """At most about `maxsize` items in two generations of plain dicts: an item is kept in the
    young one; when that holds `maxsize // 2` items it becomes the old one (the old one before it
    is dropped); an item found in the old one moves to the young one. What is asked for often
    stays, as in an LRU, and a hit costs one dict look-up: no lock and no reordering, for the
    caches a turn read asks about a hundred times (its decoded bodies and rendered notes).
    Between threads the worst a race does is drop an item (it is made again): every item kept
    here is a pure function of its key."""

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
