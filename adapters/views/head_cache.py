"""What a process keeps of the rows it wrote and the notes it read: the heads it wrote in the
live generation (`HeadCache`), so that the next append to a conversation need not read its
head, and the turn notes by head version (`notes_cache`)."""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar
from uuid import UUID

from adapters.store.lru import LRU
from adapters.views.recent_rows import RecentRows
from projections.row_head import Head
from projections.turn_notes import TurnNotes

K = TypeVar("K")
V = TypeVar("V")


class HeadCache:
    """The heads this process wrote in the live generation, by conversation, so the next append
    to a conversation need not read its head. A kept head is used only when its version is the
    one just before the events being applied: any other writer's append (or a failed view)
    leaves a different version, and the head is read. A rebuild that switches generations
    drops the old tables, so an append that used a kept head of a dropped generation fails its
    view statement, rolls back to the views' savepoint, and the next read catches up.
    `adapters.store.lru.LRU` keeps at most `size` conversations."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._kept: LRU[UUID, tuple[Head, RecentRows | None, str | None]] = LRU(maxsize=size)

    def get(self, cid: UUID, version: int) -> Head | None:
        """Returns the kept head of `cid` when it is at `version`, else None."""
        kept = _kept(self._kept, cid)
        return kept[0] if kept is not None and kept[0].version == version else None

    def rows(self, cid: UUID, head: Head) -> RecentRows | None:
        """Returns the rows kept with `head` (`RecentRows`, as the transaction that wrote that
        head left them), None when none are kept with it."""
        kept = _kept(self._kept, cid)
        return kept[1] if kept is not None and kept[0] is head else None

    def written(self, cid: UUID, body: str) -> Head | None:
        """Returns the kept head of `cid` when `body` is the very JSON it was written as (a turn
        read after this process's append reads back the head it wrote: not decoded again),
        else None."""
        kept = _kept(self._kept, cid)
        return kept[0] if kept is not None and kept[2] is not None and kept[2] == body else None

    def put(self, cid: UUID, head: Head, rows: RecentRows | None = None, body: str | None = None) -> None:
        """Keeps `head` (written by a committed transaction), with the newest rows it wrote and
        the JSON it was written as (`body`, where known)."""
        self._kept.put(cid, (head, rows, body))

    def forget(self, cid: UUID) -> None:
        """Forgets the kept head of `cid` (the store no longer trusts what it kept of it)."""
        with contextlib.suppress(KeyError):
            self._kept.get(cid, evict=True)

    def clear(self) -> None:
        """Forgets every kept head (after a rebuild or an erasure in this process)."""
        self._kept = LRU(maxsize=self.size)  # a fresh one: what the old one kept is dropped at once


def notes_cache(size: int = 1024) -> LRU[tuple[Any, ...], tuple[tuple[int, int], bytes | None, TurnNotes]]:
    """Returns the cache of the turn notes this process read, keyed by (conversation,
    generation, rule set, page check), each kept with the head version and its folds in place
    (`Head.refolds`) and the chain hash it was read at, ((version, refolds), tip, notes): a
    conversation's notes change only with its head's version or a fold of its rows in place
    (an erasure's), so a kept answer stays true until its next event (or a rebuild, which
    starts a new generation). One per key: the notes of a newer version replace the older, which no
    read asks for again (a cache of every version kept hundreds of dead answers, tens of
    thousands of objects the collector walked at each full collection). Notes hold labels,
    never a text."""
    return LRU(maxsize=size)


def _kept(cache: LRU[K, V], key: K) -> V | None:
    """Returns what `cache` keeps under `key`, None if nothing."""
    try:
        return cache.get(key)
    except KeyError:
        return None
