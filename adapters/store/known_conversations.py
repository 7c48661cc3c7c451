"""What a writer keeps of each conversation between its commands, behind one `forget`."""

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
    """Each conversation's index as this process's last append left it. `forgets` are the other caches'
    drops, each called by `forget` with the conversation's UUID."""

    def __init__(self, forgets: Sequence[Callable[[UUID], None]] = (), size: int = SIZE) -> None:
        self._counts: LRU[UUID, tuple[int, int]] = LRU(maxsize=size)
        self.records = IndexRecordsCache(size)
        """The newest segment records and user messages of each conversation's index."""
        self._forgets = tuple(forgets)

    def counts(self, cid: UUID) -> tuple[int, int] | None:
        """Returns (version, card outcome count) after this process's last append; None when not known."""
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
        """Follows an append of `events` onto `state` that left the index at `counts`; `puts`: its rows."""
        self._counts.put(cid, counts)
        self.records.appended(cid, state, events, puts)

    def counted(self, cid: UUID, counts: tuple[int, int] | None) -> None:
        """Keeps `counts` for `cid` after a batch's append; its records are dropped. None: not known."""
        if counts is not None:
            self._counts.put(cid, counts)
        self.records.evict(cid)

    def forget(self, cid: UUID) -> None:
        """Drops everything this process keeps of `cid`, here and through `forgets`."""
        with suppress(KeyError):
            self._counts.get(cid, evict=True)
        self.records.evict(cid)
        for forget in self._forgets:
            forget(cid)
