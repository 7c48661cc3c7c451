"""The read models as rows in the store's own database, current per conversation.

The writer applies its events to its conversation's rows in the transaction that stores them
(`apply_inline`), under a savepoint; a failing view never stops the write. Each summary row holds the
version of the last event applied. An event is never applied twice. A gap is filled from the
conversation's own log (`apply`). Every read compares the summary's version with the log's first and
fills a gap, so a turn never reads rows older than its log.

`rebuild(rules)` folds the whole log into a new generation, then folds what came meanwhile and switches
the pointer under the exclusive lock. `diff(rules)` compares with another rule set and writes nothing.
This module holds the reads (`ReadModels`). The rest: `live_rows` (apply), `views_cache` (caches),
`log_fold`, `rebuild`, `rule_diff`, `summary_cache`, `row_state`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from uuid import UUID

from adapters.store.application import ConversationStore
from adapters.store.store_views import ViewsWritten
from adapters.views import rule_diff
from adapters.views.caches import SEPARATOR, BlocksCache
from adapters.views.gc_pause import gc_paused
from adapters.views.held_rows import NEWEST_ENTRIES, NEWEST_OUTCOMES, TurnRowsCache, seeded
from adapters.views.live_rows import LiveRows
from adapters.views.log_fold import Progress, ViewOutOfStep
from adapters.views.ports import NeedsSnapshot, ReadMoved, ViewStorage
from adapters.views.rebuild import RebuildReport, Rebuilds
from adapters.views.row_bodies import decode_turn_bodies
from adapters.views.row_state import _state, turn_rows_state
from adapters.views.rule_diff import ConversationDiff
from adapters.views.storage_reads import Pointer, TurnInputRows, TurnRows
from adapters.views.summary_cache import _kept
from adapters.views.turn_starts import TurnStarts, turn_starts
from adapters.views.views_cache import ViewsCache
from domain.errors import UnknownConversation, shown_id
from domain.events import ConversationEvent, conversation_uuid
from projections import turn
from projections.card_outcomes import held_outcomes
from projections.notes import NoteOf, note_of
from projections.page_line import PageCheck, check_slot, every_page
from projections.rules import resolve
from projections.run_record import RunRecord
from projections.summary_rows import Summary, TurnMark
from projections.transcript import Transcript
from projections.turn import NoTurnYet, TurnInput, TurnState
from projections.turn_notes import TurnNotes, turn_notes

T = TypeVar("T")


def _bodies(joined: str) -> list[str]:
    """Returns the row bodies a statement joined by SEPARATOR (none for the empty string)."""
    return joined.split(SEPARATOR) if joined else []


class ReadModels:
    """The row read models of a ConversationStore, in the store's own database. The store's own are the
    views it was built with (`StoreViews`). Another on the same store reads and rebuilds; its rows catch
    up at each read. `rows` (`LiveRows`) keeps them current; `cache` (`ViewsCache`) is what this process
    keeps to skip reads."""

    def __init__(
        self, store: ConversationStore, storage: ViewStorage, reopen: Callable[[ConversationStore], ViewStorage] | None = None
    ) -> None:
        self.store = store
        self.storage = storage
        self.reopen = reopen
        """Hands out the view storage of a store opened anew (a rebuild's worker process opens
        its own); None: a rebuild folds in this process only."""
        self.cache = ViewsCache()
        self.rows = LiveRows(store, storage, self.cache)

    # ------------------------------------------------------------ writing (`LiveRows`)

    def apply(self, aggregate_id: UUID, events: Sequence[ConversationEvent] | None = None) -> Summary | None:
        """Brings one conversation's rows up to its log (`LiveRows.apply`); returns the summary after it."""
        return self.rows.apply(aggregate_id, events)

    def apply_inline(self, curs: Any, aggregate_id: UUID, events: Sequence[ConversationEvent], written: ViewsWritten) -> None:
        """Applies `events` in the transaction of `curs` that saves them (`LiveRows.apply_inline`)."""
        self.rows.apply_inline(curs, aggregate_id, events, written)

    def inline_committed(self, written: ViewsWritten) -> None:
        """Keeps what `apply_inline` wrote once its transaction committed (`LiveRows.inline_committed`)."""
        self.rows.inline_committed(written)

    def catch_up(self, progress: Progress | None = None) -> int:
        """Brings every conversation's rows up to its log; returns how many were behind."""
        return self.rows.catch_up(progress)

    def erase(self, conversation: str) -> bool:
        """Folds the conversation's rows anew from its log once its key is gone, forgetting all
        this process kept (`LiveRows.erase`). Returns False when the store does not hold it."""
        return self.rows.erase(conversation)

    def forget(self, cid: UUID) -> None:
        """Forgets everything this process kept of a conversation's rows. Called when its log is not the one
        they were kept of (a restored or failed-over database)."""
        self.cache.forget(cid)

    def forget_all(self) -> None:
        """Forgets everything this process kept of every conversation's rows."""
        self.cache.forget_all()

    def active_rules(self) -> str:
        """Returns the rule set of the live tables."""
        return self.rows.live_pointer().rules

    def live_pointer(self) -> Pointer:
        """Returns the live generation's pointer, as it is now (one read)."""
        return self.rows.live_pointer()

    # ------------------------------------------------------------ reads

    def _read(
        self,
        conversation: str,
        read: Callable[[Any, Summary, str], T],
        newest: int | None = None,
        kept_at: int | None = None,
        known: BlocksCache | None = None,
    ) -> T:
        """Returns `read(rows, summary, rules)` for a conversation whose rows first catch up with its log.

        With `newest` (a turn read), the backend may read the summary, the log's version, the entries and
        outcomes in one statement. A read needing a second statement is repeated in one REPEATABLE READ
        snapshot (`ViewStorage.reading`). Entries and outcomes are not read when the summary is at
        `kept_at`. With `known`, the events' topics since and the rows from `last_user` on are read too
        (`BlocksCache.placement`). A read whose tables a rebuild dropped reads again. Raises
        UnknownConversation for a conversation the store does not hold."""
        key = conversation_uuid(conversation)
        snapshot = newest is None  # a turn read tries one statement first, in no transaction
        for _ in range(4):
            kept_live = self.cache.pointer
            held = _kept(self.cache.held, key) if newest == NEWEST_OUTCOMES and kept_live is not None else None
            if held is not None and kept_live is not None and held.generation != kept_live.generation:
                held = None
            try:
                with self.storage.reading(snapshot) as curs:  # one snapshot: summary, entries, outcomes, transcript
                    fetched = (
                        self.storage.turn_rows(
                            curs,
                            key,
                            kept_live.generation,
                            newest,
                            kept_at,
                            NEWEST_ENTRIES,
                            known.version if known is not None else None,
                            known.last_user if known is not None else 0,
                            held.version if held is not None else None,
                        )
                        if newest is not None and kept_live is not None
                        else None
                    )
                    live: Pointer | None
                    if fetched is not None and fetched.matches:  # one statement (PostgreSQL)
                        live, logged = fetched.live, fetched.logged
                        summary = (
                            (self.cache.summaries.written(key, fetched.summary) or Summary.model_validate_json(fetched.summary))
                            if fetched.summary is not None
                            else None
                        )
                        placement = (
                            known.placement(
                                live.generation, summary.version, fetched.topics, fetched.tail, fetched.since_tip, summary.refolds
                            )
                            if known is not None and summary is not None
                            else None
                        )
                        rows = (
                            self.storage.rows(curs, live.generation, key)
                            if fetched.skipped
                            else self.storage.prefetched_rows(
                                curs,
                                live.generation,
                                key,
                                *self._held_or_read(key, fetched, held, summary, newest),
                                newest or 0,
                                summary,
                                placement,
                            )
                        )
                        rows.tip = fetched.tip
                    else:
                        live = fetched.live if fetched is not None else self.storage.pointer(curs)
                        assert live is not None
                        rows = self.storage.rows(curs, live.generation, key)
                        summary = rows.summary()
                        logged = self.storage.log_version(curs, key)
                    self.cache.take_live(live)
                    if logged == 0:
                        raise UnknownConversation(
                            f"no conversation {shown_id(conversation)} in the store; check the id or ingest it first"
                        )
                    if summary is not None and summary.version >= logged:
                        return read(rows, summary, live.rules)
            except NeedsSnapshot:  # the one statement did not answer it: read it all in one snapshot
                snapshot = True
                continue
            except ReadMoved:
                self.cache.lose_live()  # a rebuild elsewhere, or an append meanwhile: read the live pointer next
                continue
            self.apply(key)
        raise ViewOutOfStep(
            f"the read models of {shown_id(conversation)} cannot catch up with its log; "
            f"run: chatrecord rebuild --rules {self.active_rules()}"
        )

    def _held_or_read(
        self, key: UUID, fetched: TurnRows, held: TurnRowsCache | None, summary: Summary | None, newest: int | None
    ) -> tuple[str | tuple[str, ...], str | tuple[str, ...]]:
        """Returns the newest entries' and card outcomes' bodies of a turn read's statement, each oldest
        first and joined by SEPARATOR. Takes the held ones (`TurnRowsCache`) where the statement left
        them unread; else holds those it read."""
        if fetched.held and held is not None:
            return held.entries, held.outcomes
        if summary is not None and newest == NEWEST_OUTCOMES:
            fresh = seeded(fetched.live.generation, summary, fetched.entries, fetched.outcomes, NEWEST_ENTRIES, newest)
            if fresh is not None:
                self.cache.held.put(key, fresh)
                return fresh.entries, fresh.outcomes  # the string objects held: their hashes kept
            with contextlib.suppress(KeyError):
                self.cache.held.get(key, evict=True)
        return fetched.entries, fetched.outcomes

    def summary(self, conversation: str) -> Summary:
        """Returns a conversation's summary (bookkeeping, view context, latest turn)."""
        return self._read(conversation, lambda rows, summary, rules: summary)

    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnNotes:
        """Returns what the chat adds to its transcript for the next model call: the page line and each note
        with its place.

        Reads the summary, the newest entries (NEWEST_ENTRIES; older ones only when the notes reach
        them), the newest card outcomes (the notes' budget + 1) and the messages beside the notes. Its
        cost does not grow with the history. An unchanged conversation (same summary version, rule set
        and page check) is answered from `ViewsCache.notes` after one statement. Raises
        UnknownConversation for a conversation the store does not hold."""

        check = check_slot(can_see_page)

        def read(rows: Any, summary: Summary, rules: str) -> TurnNotes:
            live = self.cache.pointer
            cid = conversation_uuid(conversation)
            key = (live.generation if live else 0, rules, check)
            kept = self.cache.notes(cid, key) if check is not None else None
            if kept is not None and kept[0] == (summary.version, summary.refolds) and kept[1] == rows.tip:
                return kept[2]
            rule_set = resolve(rules)
            # the entries as read (validated where stored), decoded one by one as the notes ask;
            # a body decoded and rendered before is not again (`NotesCache`)
            entries = rows.entries(self.cache.rendered.entry, NEWEST_ENTRIES, len(summary.seqs))
            record = RunRecord.model_construct(entries=entries, dropped=summary.dropped)
            newest = rows.outcomes(newest=rule_set.max_notes + 1, decode=self.cache.rendered.outcome)
            messages_at, block_ends = rows.placement_reads(summary.length, self.cache.messages)
            note = self._note_of(can_see_page)
            notes = turn_notes(
                summary.conversation or conversation,
                summary.version,
                summary.kind,
                summary.view,
                record,
                newest,
                summary.outcomes,
                summary.length,
                messages_at,
                block_ends,
                rule_set,
                can_see_page,
                note,
            )
            if check is not None:  # in place of the notes of an earlier version: those are read no more
                self.cache.keep_notes(cid, key, ((summary.version, summary.refolds), rows.tip, notes))
            if rows.placement is not None and live is not None:
                self.cache.known.put(
                    cid,
                    BlocksCache.of(
                        rows.placement, live.generation, summary.version, summary.last_user, rows.tip, summary.refolds
                    ),
                )
            return notes

        cid = conversation_uuid(conversation)
        kept_at = self.cache.notes_at(cid, check) if check is not None else None
        return self._read(conversation, read, newest=NEWEST_OUTCOMES, kept_at=kept_at, known=_kept(self.cache.known, cid))

    def turn_starts(self, conversation: str, message: int) -> TurnStarts:
        """Returns which events started the turns of user message `message` (`TurnStarts`). Read from the
        `turns` table in one snapshot; costs the conversation's turns, not its events. Raises
        UnknownConversation for a conversation the store does not hold."""
        return self._read(conversation, lambda rows, summary, rules: turn_starts(rows, summary, rules, message))

    def state(self, conversation: str) -> TurnState | None:
        """Returns the conversation's read models after its last event, None for a conversation
        the store does not hold. Reads its whole transcript and card outcomes."""
        try:
            return self._read(conversation, lambda rows, summary, rules: _state(rows, summary))
        except UnknownConversation:
            return None

    def snapshot(self, conversation: str) -> tuple[Summary, str, TurnState]:
        """Returns the summary row, the live rule set and the folded rows, read in one snapshot after the
        rows caught up (`verify_rows`' input). Raises UnknownConversation for a conversation the store
        does not hold."""
        return self._read(conversation, lambda rows, summary, rules: (summary, rules, _state(rows, summary)))

    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnInput:
        """Returns the input of the conversation's latest turn, as that turn saw it. From the rows when they
        still hold it (`Summary.turn_intact`; on PostgreSQL in one statement), else from the log up to
        the turn. The garbage collector is paused meanwhile (`gc_paused`). Raises UnknownConversation for
        a conversation the store does not hold. Raises NoTurnYet when no turn has started."""

        def read(rows: Any, summary: Summary, rules: str) -> TurnInput:
            if summary.turn is None:
                raise NoTurnYet(f"conversation {shown_id(conversation)} has no user message or retry yet, so no turn to build")
            note = self._note_of(can_see_page)
            if summary.turn.version == summary.version:
                with gc_paused():
                    return turn.turn_input(
                        _state(rows, summary), summary.turn.message, summary.turn.at, rules, can_see_page, note
                    )
            if summary.turn_intact:
                with gc_paused():
                    state = turn_rows_state(rows, summary, self.cache.messages, self.cache.rendered)
                    return turn.turn_input(state, summary.turn.message, summary.turn.at, rules, can_see_page, note)
            events = self.store.events(conversation, up_to_version=summary.turn.version)
            return turn.build_turn_input(events, rules, can_see_page)

        built = self._turn_input_in_one(conversation, can_see_page)
        return built if built is not None else self._read(conversation, read)

    def _turn_input_in_one(self, conversation: str, can_see_page: PageCheck) -> TurnInput | None:
        """Returns the latest turn's input from one statement (`ViewStorage.turn_input_rows`, autocommit).
        None unless the backend reads so, the live generation is known, the summary is current and the
        turn is intact in the rows."""
        live = self.cache.pointer
        if live is None or not self.storage.reads_turn_in_one:
            return None
        key = conversation_uuid(conversation)
        try:
            with self.storage.reading(False) as curs:
                got = self.storage.turn_input_rows(curs, key, live.generation)
        except ReadMoved:
            self.cache.lose_live()
            return None
        if got is None or not got.matches or got.summary is None or got.messages is None:
            if got is not None and not got.matches:
                self.cache.take_live(got.live)
            return None
        summary = self.cache.summaries.written(key, got.summary) or Summary.model_validate_json(
            got.summary
        )  # not decoded again after its append
        mark = summary.turn
        if mark is None or not summary.turn_intact or summary.version < got.logged:
            return None
        self.cache.take_live(got.live)
        with gc_paused():
            return self._turn_input_of(got, summary, mark, str(key), can_see_page)

    def _turn_input_of(
        self, got: TurnInputRows, summary: Summary, mark: TurnMark, cid: str, can_see_page: PageCheck
    ) -> TurnInput:
        """Returns the input of the turn `mark` from the rows `got` read of it (`_turn_input_in_one`)."""
        assert got.messages is not None and got.entries is not None and got.outcomes is not None  # read together
        messages, entries, outcomes = decode_turn_bodies(  # each body once per process, as the turn read does
            _bodies(got.messages),
            _bodies(got.entries),
            _bodies(got.outcomes),
            self.storage.texts,
            cid,
            self.cache.messages,
            self.cache.rendered,
        )
        state = TurnState.model_construct(
            transcript=Transcript(kind=summary.kind, messages=messages),
            record=RunRecord.model_construct(entries=entries, dropped=mark.dropped),
            outcomes=held_outcomes(outcomes),
            view=summary.view,
        )
        return turn.turn_input(state, mark.message, mark.at, got.live.rules, can_see_page, self._note_of(can_see_page))

    def _note_of(self, can_see_page: PageCheck) -> NoteOf:
        """Returns what renders a note under `can_see_page`: a caching one (`NotesCache.note`) where the
        check has a slot, else `note_of`."""
        check = check_slot(can_see_page)
        return self.cache.rendered.note(check) if check is not None else note_of

    # ------------------------------------------------------------ rule sets

    def rebuild_workers(self, stop: int, workers: int | None = None) -> int:
        """Returns how many processes a rebuild up to notification `stop` uses (`Rebuilds.rebuild_workers`).
        Raises ValueError for `workers` outside 1 to MOST_WORKERS."""
        return Rebuilds(self.store, self.storage, self.cache.take_live, self.reopen).rebuild_workers(stop, workers)

    def rebuild(
        self,
        rules: str,
        progress: Progress | None = None,
        workers: int | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> RebuildReport:
        """Folds the whole log under `rules` into a new generation, makes it live and drops the old one.
        Returns what it did; raises as `Rebuilds.rebuild`."""
        return Rebuilds(self.store, self.storage, self.cache.take_live, self.reopen).rebuild(rules, progress, workers, guard)

    def diff(self, rules: str) -> list[ConversationDiff]:
        """Returns, per conversation in start order, the entries and latest-turn notes that differ between
        the live rule set and `rules`. Writes nothing. Raises UnknownRuleSet for an unknown id."""
        return rule_diff.diff(self, rules)
