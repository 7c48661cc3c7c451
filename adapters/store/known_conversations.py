"""What a writer keeps of each conversation between its commands (`KnownConversations`), behind
one `forget`.

Per conversation, as this process's own last append left it: the history index's version and
card outcome count (`counts`) and its newest rows (`records`, `IndexRecordsCache`), which let the
next command decide without reading the index (`domain.history_index.AssumedHistory`). The
other things a process keeps of a conversation (the cached state, the chain's last hash, the
views' head) belong to their own objects; `forget` drops them too, so a conversation that
another writer moved is dropped everywhere at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any
from uuid import UUID

from adapters.store.known_records import IndexPuts, IndexRecordsCache
from adapters.store.lru import LRU
from domain.events import ConversationEvent

SIZE = 4096
"""The most conversations kept (the least recently used go first)."""


class KnownConversations:
    """Each conversation's index as this process's last append left it.

    `forgets`: the other keepers' drops of one conversation (the chain heads', the views', the
    aggregate cache's eviction), each called by `forget` with the conversation's UUID.
    """

    def __init__(self, forgets: Sequence[Callable[[UUID], None]] = (), size: int = SIZE) -> None:
        self._counts: LRU[UUID, tuple[int, int]] = LRU(maxsize=size)
        self.records = IndexRecordsCache(size)
        """The newest segment records and user messages of each conversation's index."""
        self._forgets = tuple(forgets)

    def counts(self, cid: UUID) -> tuple[int, int] | None:
        """Returns (version, card outcome count) of the index of `cid` after this process's last
        append, None when not known."""
        try:
            return self._counts.get(cid)
        except KeyError:
            return None

    def appended(
        self,
        cid: UUID,
        state: Any,
        events: Iterable[ConversationEvent],
        counts: tuple[int, int],
        puts: IndexPuts | None = None,
    ) -> None:
        """Follows an append of `events` onto `state` (the aggregate's state before them) that
        left the index at `counts` (version, card outcome count); `puts`: the rows it wrote
        (`IndexRecordsCache.appended`)."""
        self._counts.put(cid, counts)
        self.records.appended(cid, state, events, puts)

    def counted(self, cid: UUID, counts: tuple[int, int] | None) -> None:
        """Keeps `counts` for `cid` after an append whose rows are not followed (a batch): its
        records are dropped, so nothing is assumed of them. `counts` None: not known (counts
        kept of an older version stay; `Decider.assume` uses none but the current version's)."""
        if counts is not None:
            self._counts.put(cid, counts)
        self.records.evict(cid)

    def forget(self, cid: UUID) -> None:
        """Drops everything this process keeps of `cid`: its counts and records here, and
        through `forgets` its cached state, chain head and views' head."""
        with suppress(KeyError):
            self._counts.get(cid, evict=True)
        self.records.evict(cid)
        for forget in self._forgets:
            forget(cid)
