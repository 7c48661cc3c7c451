"""A look at conversations' hash chains from the use cases, and what it keeps: `ChainLooks`, handed
the store (`store()` returns it, opened on first use), holds the verdicts this process made where the store keeps no position (a read-only
file, a standby) and stores what each look found for every process (`adapters.store.kept_verdicts`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from threading import Lock

from adapters.service.common import opened_read_only
from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder
from adapters.store.kept_verdicts import broken_of, cleared_by_heads, from_broken, from_position, held, position_of
from adapters.store.verify import Verdict, chain_verdict, verify_after
from domain.events import conversation_uuid

log = logging.getLogger("chatrecord")

KEPT = 256
"""The most ok verdicts kept in this process (the oldest is dropped first)."""


class ChainLooks:
    """The chain looks of one store. Thread-safe: the HTTP service's handlers run on several threads."""

    def __init__(self, store: Callable[[], ConversationStore]) -> None:
        self._store = store
        self._kept: dict[str, Verdict] = {}
        """The last ok verdict of each conversation's chain this process made where the store kept no position."""
        self._broken: set[str] = set()
        """The conversations whose last look here found the chain broken: the next recomputes all."""
        self._lock = Lock()

    @property
    def store(self) -> ConversationStore:
        return self._store()

    @property
    def _recorder(self) -> ChainedRecorder | None:
        recorder = self.store.recorder
        return recorder if isinstance(recorder, ChainedRecorder) else None

    def stored(self, key: str, name: str) -> Verdict | None:
        """Returns the break stored for the conversation stored under `key` (named `name`) as
        it was found (`from_broken`), None where none is stored or the store keeps no chain: one
        read of one row, no hash recomputed (a turn read's check)."""
        recorder = self._recorder
        stored = recorder.broken_chain(conversation_uuid(key)) if recorder is not None else None
        return from_broken(stored, name) if stored is not None else None

    def look(self, key: str, name: str, full: bool, by: str) -> Verdict | None:
        """Returns the verdict of the chain of the conversation stored under `key` (named `name`),
        None on a store that keeps no chain or (with a chain) for a conversation it does not
        hold; see `Chatrecord.chain`."""
        recorder = self._recorder
        stored = recorder.broken_chain(conversation_uuid(key)) if recorder is not None else None
        verdict: Verdict | None
        unkept = False  # an ok verdict whose head no stored position holds: this process keeps it
        if stored is not None and not full:  # shown as found: no position or kept head is trusted after a break
            verdict = from_broken(stored, name)
        else:
            kept: Verdict | None = None
            position = recorder.verified_position(conversation_uuid(key)) if recorder is not None else None
            if recorder is not None and not full and key not in self._broken:
                kept = from_position(position, name) if position is not None else self._kept.get(key)
                unkept = position is None and kept is not None
            verdict = (
                verify_after(recorder, kept) if kept is not None and recorder is not None else chain_verdict(self.store, key)
            )
            verdict = held(verdict, position, stored)  # a full look never clears a cut it cannot see
            kept_now = self.keep([verdict], by)
            unkept = unkept or (kept is None and not kept_now)
        if verdict is None and recorder is not None:
            return None  # no such conversation: the caller says so
        with self._lock:
            if verdict is not None and verdict.ok and unkept:
                if len(self._kept) >= KEPT and key not in self._kept:
                    self._kept.pop(next(iter(self._kept)))
                self._kept[key] = verdict
            else:
                self._kept.pop(key, None)
            if verdict is not None and verdict.ok:
                self._broken.discard(key)
            else:  # a broken chain the store did not keep is recomputed in full at the next look
                self._broken.add(key)
        return verdict

    def keep(self, found: Iterable[Verdict | None], by: str, positions: bool = True) -> bool:
        """Stores what these verdicts found for the next look of any process
        (`adapters.store.kept_verdicts`): the head of each ok one that recomputed every hash as
        its conversation's verified position (deleting a stored break), and each break a look
        found as its conversation's stored break (deleting its position), all by `by`, in one
        transaction. A SQLite file opened read-only keeps none, nor does a store that refuses the
        write (a standby; one line logged). Without `positions`, breaks only (a read that
        checks in passing: `audit`, `export`). Returns True when a verdict was stored."""
        recorder = self._recorder
        if recorder is None or opened_read_only(self.store):
            return False
        verdicts = [v for v in found if v is not None]
        heads = [p for p in (position_of(v, by) for v in verdicts) if p is not None] if positions else []
        broken = [b for b in (broken_of(v, by) for v in verdicts) if b is not None]
        if not heads and not broken:
            return False
        try:
            recorder.keep_verdicts(heads, broken)
        except Exception as error:  # noqa: BLE001 - a store it cannot write (a standby, a read-only file): not kept
            log.warning("chatrecord: the chain's verdicts were not stored: %s", error)
            return False
        return True

    def held(self, verdict: Verdict | None, head_version: int | None = None, against: str | None = None) -> Verdict | None:
        """Returns `verdict` as `adapters.store.kept_verdicts.held` holds it to what the store
        keeps of its conversation (its verified position, its stored break): `cut_off` where an
        ok chain ends below a version the store once held. Read before `keep` stores it. A look
        against a heads file (`against`: what it stores as, its line's `head_version`) that
        matched the chain is not held to a cut such a look stored (`cleared_by_heads`)."""
        recorder = self._recorder
        if verdict is None or not verdict.ok or recorder is None:
            return verdict
        key = verdict.originator_id
        broken = recorder.broken_chain(key)
        if against is not None and cleared_by_heads(verdict, head_version, broken, against):
            broken = None
        return held(verdict, recorder.verified_position(key), broken)
