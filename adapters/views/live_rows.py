"""The read models' rows kept current with the log (`LiveRows`, held by `ReadModels`). It makes the pointer
and first generation once, applies a conversation's events in their own transaction (`apply_inline`) or
from its log (`apply`), and folds a conversation anew after its erasure."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple
from uuid import UUID

from adapters.store.application import ConversationStore
from adapters.store.store_views import ViewsWritten
from adapters.views.held_rows import NEWEST_ENTRIES, NEWEST_OUTCOMES, advanced
from adapters.views.log_fold import Progress, fold_into, fold_log, refold
from adapters.views.ports import ViewStorage
from adapters.views.storage_reads import Pointer
from adapters.views.summary_cache import _kept
from adapters.views.views_cache import ViewsCache
from domain.events import ConversationEvent, conversation_uuid
from projections.rules import DEFAULT_RULE_SET, resolve
from projections.summary_rows import Summary

log = logging.getLogger("chatrecord")


class Written(NamedTuple):
    """What `LiveRows.apply_inline` wrote of one conversation in a transaction; kept once it commits.
    Fields: the generation, the summary after and before (`start`: its version, 0 for none), the newest
    rows (`WrittenRowsCache`), the summary's JSON where the backend made it, and the append document's
    views section (None: not written into one)."""

    generation: int
    summary: Summary | None
    recent: Any
    summary_json: str | None
    start: int
    views: dict[str, Any] | None


class LiveRows:
    """The rows of a ConversationStore's read models in the store's database (`storage`), kept current with
    its log. `cache` is what this process keeps of them, shared with `ReadModels`' reads."""

    def __init__(self, store: ConversationStore, storage: ViewStorage, cache: ViewsCache) -> None:
        self.store = store
        self.storage = storage
        self.cache = cache
        self._ensure()

    # ------------------------------------------------------------ set-up

    def _ensure(self) -> None:
        """Creates the pointer and the first generation once. A store of the previous layout gets its views
        rebuilt from the log, with a notice."""
        with self.storage.transaction(write=False) as curs:
            live = self.storage.pointer(curs)
        if live is not None:
            self.cache.take_live(live)
            return
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            live = self.storage.pointer(curs)
            created = live is None  # only the process that made the tables folds the log into them
            if live is None:
                old_rules, old_tables = self.storage.old_tables(curs)
                live = Pointer(1, resolve(old_rules or DEFAULT_RULE_SET).id, 2)
                self.storage.create(curs, 1)
                self.storage.set_pointer(curs, live)
                for table in old_tables:
                    self.storage.drop_table(curs, table)
                if old_tables:
                    log.warning(
                        "chatrecord: the read models of the previous version were dropped; "
                        "they are rebuilt from the log as rows now"
                    )
        self.cache.take_live(live)
        if created and self.store.max_notification_id():  # a store of the previous version
            fold_log(self.store, self.storage, live.generation, live.rules, 0, None)

    def active_rules(self) -> str:
        """Returns the rule set of the live tables."""
        return self._pointer().rules

    def live_pointer(self) -> Pointer:
        """Returns the live generation's pointer, as it is now (one read)."""
        return self._pointer()

    def _pointer(self) -> Pointer:
        with self.storage.transaction(write=False) as curs:
            live = self.storage.pointer(curs)
        assert live is not None
        self.cache.take_live(live)
        return live

    # ------------------------------------------------------------ writing

    def apply(self, aggregate_id: UUID, events: Sequence[ConversationEvent] | None = None) -> Summary | None:
        """Brings one conversation's rows up to its log: `events` (just saved) where they follow
        the summary, else what the log holds after the summary. Returns the summary after it."""
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=False)
            live = self.storage.pointer(curs)
            assert live is not None
            rows = self.storage.rows(curs, live.generation, aggregate_id)
            summary: Summary | None = rows.summary()
            version = summary.version if summary else 0
            if events and events[-1].originator_version <= version:
                return summary
            if not events or events[0].originator_version != version + 1:
                todo: Iterable[ConversationEvent] = self.store.events.get(aggregate_id, gt=version or None)
            else:
                todo = events
            after = fold_into(rows, summary, todo, resolve(live.rules))
            if after is not None and after is not summary:
                rows.put_summary(after)
            return after

    def apply_inline(self, curs: Any, aggregate_id: UUID, events: Sequence[ConversationEvent], written: ViewsWritten) -> None:
        """Applies `events` to their conversation's rows in the transaction of `curs`, under a savepoint.
        Notes the summary it wrote in `written`; `inline_committed` keeps it after the commit. A view
        that cannot apply them leaves its rows as they were; the events are still stored and the next
        read catches up. A failure with the kept pointer and summary is tried once more with both read
        from the database. Events that do not follow the summary (a gap) are left to the next read."""
        if not events:
            return
        for fresh in (False, True) if self.storage.shared else (False,):
            if self._apply_inline(curs, aggregate_id, events, fresh, written):
                return

    def _apply_inline(
        self, curs: Any, aggregate_id: UUID, events: Sequence[ConversationEvent], fresh: bool, written: ViewsWritten
    ) -> bool:
        """One try of `apply_inline`; `fresh` reads the pointer and summary instead of using the
        kept ones. Returns False when the views' savepoint failed and a fresh try is left."""
        written.pop(aggregate_id, None)
        failed: list[Exception] = []

        def on_failure(error: Exception) -> bool:
            self._inline_failed(error, written)
            failed.append(error)
            return not fresh  # True: tried again with the live pointer, so nothing to warn of yet

        with self.storage.savepoint(curs, on_failure=on_failure) as point:
            self.storage.lock(point, exclusive=False)
            live = None if fresh else self.cache.pointer
            summary = self.cache.summaries.get(aggregate_id, events[0].originator_version - 1) if live is not None else None
            if live is None or summary is None:
                live, body = self.storage.pointer_and_summary(point, aggregate_id, live.generation if live else 0)
                assert live is not None
                self.cache.take_live(live)
                summary = None
            rows = self.storage.rows(point, live.generation, aggregate_id, buffered=True)
            recent = self.cache.summaries.rows(aggregate_id, summary) if summary is not None else None
            if summary is None:
                summary = Summary.model_validate_json(body) if body is not None else rows.summary()
            rows.prime(recent, summary)  # the rows the append that wrote the kept summary left: not read again
            rows.prefetch(events)  # what the fold will read, at once where it can
            if events[0].originator_version != (summary.version if summary else 0) + 1:
                return True
            after = fold_into(rows, summary, events, resolve(live.rules))
            if after is not None:
                rows.put_summary(after)
            rows.flush()  # the writes go out together
            done = rows.appended()
            if done.bodies:  # the entries and card outcomes written: the turn read after need not decode them
                self.cache.rendered.written(done.bodies)
            for body, message in done.messages:  # nor the messages (nor open their texts)
                self.cache.messages.put(str(aggregate_id), body, message)
            written[aggregate_id] = Written(
                live.generation, after, done.recent, done.summary_json, summary.version if summary else 0, done.views
            )
        return not failed or fresh

    def _inline_failed(self, error: Exception, written: ViewsWritten) -> None:
        """After a view statement failed, forgets the pointer, the kept summaries and `written`. The next
        write reads them."""
        written.clear()
        self.cache.lose_live()

    def inline_committed(self, written: ViewsWritten) -> None:
        """Called by the store once the transaction `written` belongs to has committed. Keeps its summaries
        (`SummaryCache`: generation, summary, newest rows per conversation), so the next append need not
        read them. Follows the held entries and card outcomes (`TurnRowsCache`) through the append's
        document, so the next turn read need not read them either."""
        for aggregate_id, w in written.items():
            live = self.cache.pointer
            if w.summary is not None and live is not None and w.generation == live.generation:
                self.cache.summaries.put(aggregate_id, w.summary, w.recent, w.summary_json)
            held = _kept(self.cache.held, aggregate_id)
            if held is not None:
                after = advanced(held, w.generation, w.start, w.views, w.summary, NEWEST_ENTRIES, NEWEST_OUTCOMES)
                if after is None:
                    with contextlib.suppress(KeyError):  # gone meanwhile (another thread's read or append)
                        self.cache.held.get(aggregate_id, evict=True)
                else:
                    self.cache.held.put(aggregate_id, after)

    def catch_up(self, progress: Progress | None = None) -> int:
        """Brings every conversation's rows up to its log; returns how many conversations
        had events to apply."""
        behind = 0
        for conversation in self.store.conversation_ids():
            key = conversation_uuid(conversation)
            with self.storage.transaction(write=False) as curs:
                live = self.storage.pointer(curs)
                assert live is not None
                summary = self.storage.rows(curs, live.generation, key).summary()
                logged = self.storage.log_version(curs, key)
            if (summary.version if summary else 0) < logged:
                self.apply(key)
                behind += 1
        return behind

    # ------------------------------------------------------------ erasure

    def erase(self, conversation: str) -> bool:
        """Deletes the conversation's live rows and folds them again from its log (`log_fold.refold`), whose
        texts now read as erased. An unreadable log (`UnreadableEvent`) leaves them deleted. Returns False
        when the store does not hold the conversation. A generation a rebuild is building is not live:
        the rebuild folds the conversation again at its switch (`Rebuilds.rebuild`), and once it has
        switched, this call's shared lock waits for it and folds the new generation's rows."""
        key = conversation_uuid(conversation)
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=False)
            live = self.storage.pointer(curs)
            assert live is not None
            if not self.storage.log_version(curs, key):
                return False
            self.cache.forget_all()
            refold(self.store, self.storage, curs, live.generation, live.rules, key)  # unreadable: rows stay dropped
        return True
