"""The summaries a process wrote in the live generation (`SummaryCache`), so the next append need not read
them. One of `ViewsCache`'s caches."""

from __future__ import annotations

import contextlib
from typing import TypeVar
from uuid import UUID

from adapters.store.lru import LRU
from adapters.views.recent_rows import WrittenRowsCache
from projections.summary_rows import Summary

K = TypeVar("K")
V = TypeVar("V")


class SummaryCache:
    """The summaries this process wrote in the live generation, by conversation. A kept summary is used only
    at the version just before the events applied; else it is read. An append on a kept summary of a
    dropped generation fails its view statement and rolls back to the savepoint; the next read catches
    up. Keeps at most `size` conversations (`lru.LRU`)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._kept: LRU[UUID, tuple[Summary, WrittenRowsCache | None, str | None]] = LRU(maxsize=size)

    def get(self, cid: UUID, version: int) -> Summary | None:
        """Returns the kept summary of `cid` when it is at `version`, else None."""
        kept = _kept(self._kept, cid)
        return kept[0] if kept is not None and kept[0].version == version else None

    def rows(self, cid: UUID, summary: Summary) -> WrittenRowsCache | None:
        """Returns the rows kept with `summary` (`WrittenRowsCache`), None when none are."""
        kept = _kept(self._kept, cid)
        return kept[1] if kept is not None and kept[0] is summary else None

    def written(self, cid: UUID, body: str) -> Summary | None:
        """Returns the kept summary of `cid` when `body` is the very JSON it was written as, else None."""
        kept = _kept(self._kept, cid)
        return kept[0] if kept is not None and kept[2] is not None and kept[2] == body else None

    def put(self, cid: UUID, summary: Summary, rows: WrittenRowsCache | None = None, body: str | None = None) -> None:
        """Keeps `summary`, written by a committed transaction, with its newest rows and its JSON (`body`)."""
        self._kept.put(cid, (summary, rows, body))

    def forget(self, cid: UUID) -> None:
        """Forgets the kept summary of `cid` (the store no longer trusts what it kept of it)."""
        with contextlib.suppress(KeyError):
            self._kept.get(cid, evict=True)

    def holds(self, cid: UUID) -> bool:
        """Says whether a summary of `cid` is kept."""
        return _kept(self._kept, cid) is not None

    def clear(self) -> None:
        """Forgets every kept summary (after a rebuild or an erasure in this process)."""
        self._kept = LRU(maxsize=self.size)  # a fresh one: what the old one kept is dropped at once


def _kept(cache: LRU[K, V], key: K) -> V | None:
    """Returns what `cache` keeps under `key`, None if nothing."""
    try:
        return cache.get(key)
    except KeyError:
        return None
