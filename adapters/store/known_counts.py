"""Each conversation's (version, card outcome count) as this process's last append left its
history index (`KnownCounts`), so the next command can decide without reading the index."""

from __future__ import annotations

from contextlib import suppress
from uuid import UUID

from adapters.store.lru import LRU


class KnownCounts:
    """Each conversation's (version, card outcome count) as this process's last append left
    its index; `adapters.store.lru.LRU` keeps at most `size` conversations."""

    def __init__(self, size: int = 4096) -> None:
        self._kept: LRU[UUID, tuple[int, int]] = LRU(maxsize=size)

    def get(self, key: UUID) -> tuple[int, int] | None:
        """Returns the kept (version, count) of conversation `key`, None if none."""
        try:
            return self._kept.get(key)
        except KeyError:
            return None

    def put(self, key: UUID, known: tuple[int, int]) -> None:
        self._kept.put(key, known)

    def evict(self, key: UUID) -> None:
        with suppress(KeyError):
            self._kept.get(key, evict=True)
