"""The newest hash of each conversation a process wrote (`ChainHeadCache`), so that its next append
to the hash chain (`adapters.store.chain`) need not read the previous hash."""

from __future__ import annotations

from contextlib import suppress
from uuid import UUID

from adapters.store.lru import LRU


class ChainHeadCache:
    """Each conversation's newest committed (version, hash), kept by the process that wrote
    it, so the next append need not read the previous hash. A row of the chain never changes
    once committed, so a kept hash stays true; `adapters.store.lru.LRU` keeps at most `size`
    conversations. Only hashes of committed transactions are put here."""

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
