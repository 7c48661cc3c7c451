"""A conversation's overview (a point per message, segment, decision, undecided card, edit, cut, erasure)
and its pictures, kept per conversation in this process (`Overviews`)."""

from __future__ import annotations

from collections.abc import Callable
from threading import Lock
from typing import Any

from adapters.service.common import opened_read_only
from adapters.service.conversations import stored_id
from adapters.service.timeline import OverviewCache, OverviewPoint
from adapters.store.application import ConversationStore
from adapters.views.overview_rows import OverviewRows
from adapters.views.readmodels import ReadModels
from domain.events import ConversationEvent, conversation_uuid
from projections.audit import initial as audit_initial
from projections.overview import Overview

KEPT = 64
"""The most folds, and the most pictures, kept (the oldest is dropped first)."""


class Overviews:
    """The overviews of one store's conversations. `events(name)` returns a conversation's events and raises
    UnknownConversation. `active_rules()` returns the live rule set. Thread-safe."""

    def __init__(
        self,
        store: ConversationStore,
        read_models: Callable[[], ReadModels],
        events: Callable[[str], list[ConversationEvent]],
        active_rules: Callable[[], str],
    ) -> None:
        self.store, self._read_models, self._events, self._active_rules = store, read_models, events, active_rules
        self._kept: dict[tuple[str, str], OverviewCache] = {}
        self._drawn: dict[tuple[str, int, int, Any], str] = {}
        """The overview read model's pictures drawn, by (conversation, generation, version, draw)."""
        self._lock = Lock()
        self._rows: OverviewRows | None = None

    def points(self, name: str, rules: str | None) -> list[OverviewPoint]:
        """See `Chatrecord.overview`."""
        return self._fold(name, rules).points

    def drawn(self, name: str, draw: Callable[[list[OverviewPoint] | Overview], str], rules: str | None) -> str:
        """See `Chatrecord.overview_drawn`."""
        key = stored_id(self.store, name)
        uuid = conversation_uuid(key)
        newest = next(iter(self.store.events.get(uuid, desc=True, limit=1)), None)
        if newest is None:
            self._events(name)  # raises UnknownConversation
        models = self._read_models()
        live = models.live_pointer()
        rule_set = rules or live.rules
        model = (
            self._overview_rows(models).read(
                uuid, live.generation, live.rules, newest.originator_version, keep=not opened_read_only(self.store)
            )
            if newest is not None and rule_set == live.rules
            else None
        )
        if model is None:
            kept = self._fold(name, rule_set)
            drawn = kept.drawn.get(draw)
            if drawn is None:
                drawn = kept.drawn[draw] = draw(kept.points)
            return drawn
        token = (key, live.generation, model.version, draw)
        drawn = self._drawn.get(token)
        if drawn is None:
            drawn = draw(model)
            with self._lock:
                if len(self._drawn) >= KEPT:
                    self._drawn.pop(next(iter(self._drawn)))
                self._drawn[token] = drawn
        return drawn

    def _overview_rows(self, models: ReadModels) -> OverviewRows:
        if self._rows is None:
            self._rows = OverviewRows(models.storage, self.store)
        return self._rows

    def _fold(self, name: str, rules: str | None) -> OverviewCache:
        rule_set = rules or self._active_rules()
        key = stored_id(self.store, name)
        uuid = conversation_uuid(key)
        head = next(iter(self.store.events.get(uuid, desc=True, limit=1)), None)
        if head is None:
            self._events(name)  # raises UnknownConversation
            return OverviewCache(0, audit_initial(), [])
        kept = self._kept.get((key, rule_set))
        if kept is not None and kept.version == head.originator_version:
            return kept
        if kept is not None and kept.version < head.originator_version:
            after = list(self.store.events.get(uuid, gt=kept.version))
            fresh = kept.extend(after, rule_set) if after and after[0].originator_version == kept.version + 1 else None
        else:
            fresh = None
        if fresh is None:  # the first request, or a log that is not the one kept: the whole log
            fresh = OverviewCache.of(self._events(name), rule_set)
        with self._lock:
            if len(self._kept) >= KEPT and (key, rule_set) not in self._kept:
                self._kept.pop(next(iter(self._kept)))
            self._kept[(key, rule_set)] = fresh
        return fresh
