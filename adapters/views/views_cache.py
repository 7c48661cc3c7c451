"""What one process remembers of the read models to skip reads (`ViewsCache`), with one `forget` per
conversation and one `forget_all`.

Per conversation, by UUID: written summaries with their rows (`SummaryCache`), held entries and outcomes
(`TurnRowsCache`), transcript blocks (`BlocksCache`), turn notes with their version, and decoded messages
(`MessagesCache`). Per process: the live pointer and decoded entries and outcomes with their notes
(`NotesCache`; labels, never a text).

A cache never decides a claim: each kept thing is checked against a read or write before use.
`forget(cid)` runs when the store distrusts a conversation (a restored or failed-over database).
`forget_all` runs after an erasure here and when a rebuild switched."""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from typing import Any
from uuid import UUID

from adapters.store.lru import LRU
from adapters.views.caches import BlocksCache, MessagesCache, NotesCache, known_conversations
from adapters.views.held_rows import TurnRowsCache
from adapters.views.storage_reads import Pointer
from adapters.views.summary_cache import SummaryCache, _kept
from projections.turn_notes import TurnNotes

CONVERSATIONS = 1024
"""Conversations whose turn notes, their summary versions and held rows a process keeps."""
NOTES_PER_CONVERSATION = 8
"""Turn notes kept per conversation (one per generation, rule set and page check read)."""

NotesKey = tuple[int, str, Hashable]
"""(generation, rule set, page check slot) of a conversation's kept turn notes."""
KeptNotes = tuple[tuple[int, int], bytes | None, TurnNotes]
"""Turn notes with the summary's (version, folds in place) and the chain's hash they were read at,
((version, refolds), tip, notes): a conversation's notes change only with its summary's version or
a fold of its rows in place (an erasure's), so a kept answer stays true until its next event
(or a rebuild, which starts a new generation). One per key: the notes of a newer version
replace the older, which no read asks for again (a cache of every version kept hundreds of dead
answers, tens of thousands of objects the collector walked at each full collection). Notes hold
labels, never a text."""


class ViewsCache:
    """Everything the read models of one store keep in this process (see the module's text)."""

    def __init__(self) -> None:
        self.pointer: Pointer | None = None
        """The live pointer as this process last read it; None: read it next."""
        self.summaries = SummaryCache()
        self.held: LRU[UUID, TurnRowsCache] = LRU(maxsize=CONVERSATIONS)
        self.known: LRU[UUID, BlocksCache] = known_conversations()
        self._notes: LRU[UUID, dict[NotesKey, KeptNotes]] = LRU(maxsize=CONVERSATIONS)
        self._notes_at: LRU[UUID, dict[Hashable, int]] = LRU(maxsize=CONVERSATIONS)
        self.messages = MessagesCache()
        """The transcript messages turn reads decoded, by conversation and row body."""
        self.rendered = NotesCache()

    # ------------------------------------------------------------ the turn notes

    def notes(self, cid: UUID, key: NotesKey) -> KeptNotes | None:
        """Returns the turn notes kept of `cid` under `key`, None if none."""
        kept = _kept(self._notes, cid)
        return kept.get(key) if kept is not None else None

    def every_notes(self, cid: UUID) -> list[KeptNotes]:
        """Returns every turn notes kept of `cid`, under any key."""
        kept = _kept(self._notes, cid)
        return list(kept.values()) if kept is not None else []

    def notes_at(self, cid: UUID, check: Hashable) -> int | None:
        """Returns the summary version of the turn notes of `cid` last kept under page check `check`."""
        kept = _kept(self._notes_at, cid)
        return kept.get(check) if kept is not None else None

    def keep_notes(self, cid: UUID, key: NotesKey, notes: KeptNotes) -> None:
        """Keeps `notes` of `cid` under `key`, in place of the notes of an earlier version."""
        kept = _kept(self._notes, cid) or {}
        if key not in kept and len(kept) >= NOTES_PER_CONVERSATION:
            kept.clear()
        kept[key] = notes
        self._notes.put(cid, kept)
        at = _kept(self._notes_at, cid) or {}
        if key[2] not in at and len(at) >= NOTES_PER_CONVERSATION:
            at.clear()
        at[key[2]] = notes[0][0]
        self._notes_at.put(cid, at)

    def drop_notes(self) -> None:
        """Forgets every conversation's kept turn notes, not the versions they were read at."""
        self._notes = LRU(maxsize=CONVERSATIONS)

    # ------------------------------------------------------------ the live pointer

    def take_live(self, live: Pointer) -> None:
        """Takes `live` as the live pointer. A new generation forgets all. After `lose_live`, the summaries
        and held rows of the pointer before go."""
        if self.pointer is not None and self.pointer.generation != live.generation:
            self.forget_all()
        elif self.pointer is None:
            self._drop_written()
        self.pointer = live

    def lose_live(self) -> None:
        """Forgets the live pointer, the kept summaries and held rows; the next write and read read them.
        Called when a view statement failed or a read found its tables moved."""
        self.pointer = None
        self._drop_written()

    def _drop_written(self) -> None:
        self.summaries.clear()
        self.held = LRU(maxsize=CONVERSATIONS)

    # ------------------------------------------------------------ forgetting

    def forget(self, cid: UUID) -> None:
        """Forgets everything kept of conversation `cid`."""
        self.summaries.forget(cid)
        _evict(self.held, cid)
        _evict(self.known, cid)
        _evict(self._notes, cid)
        _evict(self._notes_at, cid)
        self.messages.forget(str(cid))

    def forget_all(self) -> None:
        """Forgets everything kept, of every conversation, and the live pointer."""
        self.pointer = None
        self._drop_written()
        self.known = known_conversations()
        self._notes = LRU(maxsize=CONVERSATIONS)
        self._notes_at = LRU(maxsize=CONVERSATIONS)
        self.messages.clear()
        self.rendered = NotesCache()

    def holds(self, cid: UUID) -> list[str]:
        """Returns the names of the caches that keep something of `cid` (none after `forget`)."""
        kept: dict[str, Any] = {
            "heads": self.summaries.holds(cid),
            "held": _kept(self.held, cid),
            "known": _kept(self.known, cid),
            "notes": _kept(self._notes, cid),
            "notes_at": _kept(self._notes_at, cid),
            "messages": self.messages.holds(str(cid)),
        }
        return sorted(name for name, value in kept.items() if value)


def _evict(cache: LRU[UUID, Any], cid: UUID) -> None:
    with contextlib.suppress(KeyError):
        cache.get(cid, evict=True)
