"""The newest hash of each conversation a process wrote, so its next append need not read it."""

from __future__ import annotations

from contextlib import suppress
from uuid import UUID

from adapters.store.lru import LRU


class ChainHeadCache:
    """Each conversation's newest committed (version, hash), kept by the process that wrote it.
    Committed chain rows never change, so a kept hash stays true. At most `size` conversations."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._kept: LRU[UUID, tuple[int, bytes]] = LRU(maxsize=size)

    def get(self, key: UUID) -> tuple[int, bytes] | None:
        """Returns the kept (version, hash) of conversation `key`, None if none."""
        try:
            return self._kept.get(key)
        except KeyError:
            return None

    def clear(self) -> None:
        """Forgets every kept hash (as a process that opens the store anew)."""
        self._kept = LRU(maxsize=self.size)  # a fresh one: what the old one kept is dropped at once

    def forget(self, key: UUID) -> None:
        """Drops the kept hash of conversation `key` (the next append reads it)."""
        with suppress(KeyError):
            self._kept.get(key, evict=True)

    def remember(self, heads: dict[UUID, tuple[int, bytes]]) -> None:
        """Keeps `heads` (from `_seal`, after its transaction committed)."""
        for key, head in heads.items():
            self._kept.put(key, head)
