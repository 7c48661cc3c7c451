"""The summaries a process wrote in the live generation (`SummaryCache`), so that the next append to a
conversation need not read its summary (one of the caches of `adapters.views.views_cache.ViewsCache`)."""

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
    """The summaries this process wrote in the live generation, by conversation, so the next append
    to a conversation need not read its summary. A kept summary is used only when its version is the
    one just before the events being applied: any other writer's append (or a failed view)
    leaves a different version, and the summary is read. A rebuild that switches generations
    drops the old tables, so an append that used a kept summary of a dropped generation fails its
    view statement, rolls back to the views' savepoint, and the next read catches up.
    `adapters.store.lru.LRU` keeps at most `size` conversations."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._kept: LRU[UUID, tuple[Summary, WrittenRowsCache | None, str | None]] = LRU(maxsize=size)

    def get(self, cid: UUID, version: int) -> Summary | None:
        """Returns the kept summary of `cid` when it is at `version`, else None."""
        kept = _kept(self._kept, cid)
        return kept[0] if kept is not None and kept[0].version == version else None

    def rows(self, cid: UUID, summary: Summary) -> WrittenRowsCache | None:
        """Returns the rows kept with `summary` (`WrittenRowsCache`, as the transaction that wrote that
        summary left them), None when none are kept with it."""
        kept = _kept(self._kept, cid)
        return kept[1] if kept is not None and kept[0] is summary else None

    def written(self, cid: UUID, body: str) -> Summary | None:
        """Returns the kept summary of `cid` when `body` is the very JSON it was written as (a turn
        read after this process's append reads back the summary it wrote: not decoded again),
        else None."""
        kept = _kept(self._kept, cid)
        return kept[0] if kept is not None and kept[2] is not None and kept[2] == body else None

    def put(self, cid: UUID, summary: Summary, rows: WrittenRowsCache | None = None, body: str | None = None) -> None:
        """Keeps `summary` (written by a committed transaction), with the newest rows it wrote and
        the JSON it was written as (`body`, where known)."""
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
