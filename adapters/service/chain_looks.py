"""Looks at conversations' hash chains from the use cases (`ChainLooks`). It holds this process's verdicts
where the store keeps no position (a read-only file, a standby). It stores each look's findings for every
process (`kept_verdicts`)."""

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
        """Returns the break stored for the conversation under `key` (named `name`) as found. None where
        none is stored or the store keeps no chain. One row read, no hash recomputed."""
        recorder = self._recorder
        stored = recorder.broken_chain(conversation_uuid(key)) if recorder is not None else None
        return from_broken(stored, name) if stored is not None else None

    def look(self, key: str, name: str, full: bool, by: str) -> Verdict | None:
        """Returns the verdict of the chain of the conversation under `key` (named `name`); see
        `Chatrecord.chain`. None on a store without a chain, or for a conversation it does not hold."""
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
        """Stores these verdicts for the next look of any process (`kept_verdicts`), by `by`, in one
        transaction.

        An ok verdict that recomputed every hash stores its head as the verified position and deletes the
        break. A break is stored and deletes the position. Without `positions`, breaks only. A read-only
        SQLite file or a refusing store (a standby; one line logged) keeps none. Returns True when a
        verdict was stored."""
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
        """Returns `verdict` held to what the store keeps of its conversation (`kept_verdicts.held`).
        `cut_off` where an ok chain ends below a version once held. Call before `keep`. A look against a
        heads file (`against`) that matched is not held to a cut such a look stored (`cleared_by_heads`)."""
        recorder = self._recorder
        if verdict is None or not verdict.ok or recorder is None:
            return verdict
        key = verdict.originator_id
        broken = recorder.broken_chain(key)
        if against is not None and cleared_by_heads(verdict, head_version, broken, against):
            broken = None
        return held(verdict, recorder.verified_position(key), broken)
