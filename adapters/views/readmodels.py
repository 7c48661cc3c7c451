"""The read models as rows in the store's own database, current per conversation.

Chosen design (in the events' own transaction, tracked by the conversation's version): the
writer applies its events to its own conversation's rows in the transaction that stores them
(`apply_inline`, run by the store's recorder before its insert takes the events table's lock),
under a savepoint, so a view that cannot apply them never stops the write. Each head row
carries the version of the last event applied; an event whose version is not the next one is
never applied twice, and a gap (a store a plain library recorder wrote, or a view that failed)
is filled from that conversation's own log (`apply`). Every read first compares the head's
version with the log's (one index lookup) and fills a gap the same way, so a turn never reads a
record older than its log and never folds another conversation's events.

`rebuild(rules)` folds the whole log, page by page, into a new generation's tables with the
same fold (`projections.row_fold.apply_to_rows`), then, under the exclusive lock, folds what was stored
meanwhile and switches the pointer. `diff(rules)` compares the live rows with a fold under
another rule set and writes nothing.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import LRUCache
from pydantic import TypeAdapter

from adapters.backends import view_storage_for
from adapters.processes import end_with
from adapters.store.application import ConversationStore, ViewsWritten
from adapters.store.serialization import UnreadableEvent, originator_uuid
from adapters.views.caches import SEPARATOR, KeptMessages, KnownBlocks, RenderedNotes, known_conversations
from adapters.views.conversation_rows import TABLES, PrefetchedRows, RecentRows, decode_messages, table_names
from adapters.views.storage import NeedsSnapshot, Pointer, ReadMoved, SQLViewStorage, TurnInputRows, ViewStorage
from domain.errors import ChatrecordError, UnknownConversation, shown_id
from domain.events import ConversationEvent, conversation_uuid
from projections import turn
from projections.card_outcomes import CardOutcome, CardOutcomes
from projections.notes import note_of
from projections.page_line import PageCheck, check_slot, every_page
from projections.row_fold import Head, TurnMark, apply_to_rows
from projections.rules import DEFAULT_RULE_SET, RULE_SET_IDS, RuleSet, resolve
from projections.run_record import Entry, RunRecord
from projections.transcript import Transcript
from projections.turn import NoTurnYet, TurnInput, TurnState
from projections.turn_notes import TurnNotes, turn_notes

log = logging.getLogger("chatrecord")
T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
Progress = Callable[[int, int], None]
RecordChange = tuple[str, dict[str, Any] | None, dict[str, Any] | None]

RECORD_FIELDS = ("ending", "tools", "written", "waiting", "decision", "undecided")
"""The parts of a run record entry `diff` compares."""

PAGE = 2000
"""Notifications a rebuild reads and writes per transaction."""

KEPT_HEADS = 1024
"""The heads a rebuild keeps between its pages (the conversations it wrote last)."""

PARTS_FROM = 10_000
"""The events a log must hold before a rebuild folds it in worker processes by itself
(`ReadModels.rebuild_workers`): below, starting them costs more than they save."""
MAX_WORKERS = 4
"""The most worker processes a rebuild starts by itself (one per CPU up to this)."""
MOST_WORKERS = 32
"""The most worker processes a rebuild may be asked for: each opens its own connections to the
server, and a log has at most 256 parts (the last byte of a conversation's UUID)."""
MOST_OF_A_PART = 2 / 3
"""The largest share of a log's events one part may hold for a rebuild to fold it in parts by
itself: beyond, the other processes have too little to fold to make up for the CPU they take
from the one with the most (measured in docs/benchmarks.md: two processes on 2 CPUs fold 20
even conversations 1.6x as fast as one, a 60/40 split no faster, one conversation slower)."""

NEWEST_OUTCOMES = max(resolve(rules).max_notes for rules in RULE_SET_IDS) + 1
"""The card outcomes a turn read fetches with its head: enough for any rule set's notes."""
NEWEST_ENTRIES = 2 * NEWEST_OUTCOMES
"""The run record entries a turn read reads at first (on PostgreSQL with its head): the notes
take the newest until their budget is full, skipping entries of empty steps; a read that
reaches older ones reads them in one more statement (`adapters.views.conversation_rows.SQLRows.entries`,
`adapters.views.conversation_rows.PrefetchedRows.entries`)."""


class ViewOutOfStep(ChatrecordError):
    """Raised when a conversation's events cannot be applied to its rows in order (an event
    is missing from the log); `chatrecord rebuild` folds the rows anew."""


class RebuildWorkerFailed(ChatrecordError):
    """Raised when a worker process of a rebuild (`ReadModels.rebuild`'s `workers`) failed or
    ended before it folded its part; the message names its error. The live tables stay as
    they were; the next rebuild drops the half-written generation."""


UNSWITCHED = "nothing was switched: the live read models are as they were"
"""What a failed rebuild's message ends with (`RebuildWorkerFailed`)."""


class RebuildInterrupted(ChatrecordError):
    """Raised when an interrupt (Ctrl-C, SIGTERM) stopped a rebuild before it switched: its
    half-built tables were dropped and the live read models are as they were."""


class RebuildSuperseded(ChatrecordError):
    """Raised when a rebuild finishes after a later rebuild has already switched over; the
    later one stays live and the superseded generation is dropped."""


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did: the rule set now live and the one it replaced, how many
    conversations (the unreadable ones included) and events it folded, the tables of the new
    generation and those dropped."""

    rules: str
    conversations: int
    events: int
    old_rules: str
    tables: tuple[str, ...]
    generation: int = 0
    dropped: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    """The conversations (their UUIDs) whose logs could not be read or folded to the end: their
    rows stop before the event that failed, and reading them says why (one line each was logged)."""
    workers: int = 1
    """The processes that folded the log up to the rebuild's start (this one included)."""


@dataclass(frozen=True)
class ConversationDiff:
    """How one conversation reads under another rule set: the run record entries that change
    (segment, entry before, entry after; None where a side has no entry) and the notes of its
    latest turn that go away or come in."""

    conversation: str
    records_changed: list[RecordChange] = field(default_factory=list)
    notes_removed: list[str] = field(default_factory=list)
    notes_added: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Returns True when a record entry or a note differs."""
        return bool(self.records_changed or self.notes_removed or self.notes_added)


def fold_into(rows: Any, head: Head | None, events: Iterable[ConversationEvent], rules: RuleSet) -> Head | None:
    """Applies `events` (one conversation's, in order) to its rows and returns the head after
    them; events at or below the head's version are skipped. Raises ViewOutOfStep on a gap."""
    for event in events:
        version = head.version if head else 0
        if event.originator_version <= version:
            continue
        if event.originator_version != version + 1:
            raise ViewOutOfStep(
                f"event {event.originator_version} of conversation {event.originator_id} does not follow "
                f"the read models' version {version}; run: chatrecord rebuild"
            )
        head = apply_to_rows(rows, head or Head(), event, rules)
    return head


class HeadCache:
    """The heads this process wrote in the live generation, by conversation, so the next append
    to a conversation need not read its head. A kept head is used only when its version is the
    one just before the events being applied: any other writer's append (or a failed view)
    leaves a different version, and the head is read. A rebuild that switches generations
    drops the old tables, so an append that used a kept head of a dropped generation fails its
    view statement, rolls back to the views' savepoint, and the next read catches up.
    The library's `LRUCache` keeps at most `size` conversations."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._kept: LRUCache[UUID, tuple[Head, RecentRows | None]] = LRUCache(maxsize=size)

    def get(self, cid: UUID, version: int) -> Head | None:
        """Returns the kept head of `cid` when it is at `version`, else None."""
        kept = _kept(self._kept, cid)
        return kept[0] if kept is not None and kept[0].version == version else None

    def rows(self, cid: UUID, head: Head) -> RecentRows | None:
        """Returns the rows kept with `head` (`RecentRows`, as the transaction that wrote that
        head left them), None when none are kept with it."""
        kept = _kept(self._kept, cid)
        return kept[1] if kept is not None and kept[0] is head else None

    def put(self, cid: UUID, head: Head, rows: RecentRows | None = None) -> None:
        """Keeps `head` (written by a committed transaction), with the newest rows it wrote."""
        self._kept.put(cid, (head, rows))

    def forget(self, cid: UUID) -> None:
        """Forgets the kept head of `cid` (the store no longer trusts what it kept of it)."""
        with contextlib.suppress(KeyError):
            self._kept.get(cid, evict=True)

    def clear(self) -> None:
        """Forgets every kept head (after a rebuild or an erasure in this process)."""
        self._kept = LRUCache(maxsize=self.size)  # the library's clear() only resets its links


def notes_cache(size: int = 1024) -> LRUCache[tuple[Any, ...], TurnNotes]:
    """Returns the cache of the turn notes this process read, keyed by (conversation,
    generation, head version, rule set, page check): a conversation's notes change only with
    its head's version, so a kept answer stays true until its next event (or a rebuild, which
    starts a new generation). Notes hold labels, never a text."""
    return LRUCache(maxsize=size)


def _kept(cache: LRUCache[K, V], key: K) -> V | None:
    """Returns what `cache` keeps under `key`, None if nothing."""
    try:
        return cache.get(key)
    except KeyError:
        return None


class ReadModels:
    """The row read models of a ConversationStore, in the store's own database. The store's
    own are the views it is built with (`ConversationStore(views=ReadModels)`, which the
    composition root `adapters.bootstrap` does once per store; `StoreViews` is what the store
    calls); another built on the same store reads and rebuilds, and its rows catch up from the
    log at each read."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.storage: ViewStorage = view_storage_for(store)
        self._live: Pointer | None = None
        self.heads = HeadCache()
        self.notes = notes_cache()
        self.kept_at: LRUCache[tuple[UUID, Any], int] = LRUCache(maxsize=1024)
        """The head version of each (conversation, page check) whose notes `notes` keeps, so a
        turn read of an unchanged conversation reads only its head (`turn_rows`' `kept_at`)."""
        self.known: LRUCache[UUID, KnownBlocks] = known_conversations()
        """What each conversation's last turn read learned of its transcript rows (`KnownBlocks`)."""
        self.rendered = RenderedNotes()
        self.messages = KeptMessages()
        """The transcript messages turn reads decoded, by row body (dropped by `erase`)."""
        self._ensure()

    def forget(self, cid: UUID) -> None:
        """Forgets what this process kept of a conversation's rows (its head, what its last turn
        read knew of its transcript): the store found its log not to be the one they were
        kept of (a database restored or failed over to another history)."""
        self.heads.forget(cid)
        with contextlib.suppress(KeyError):
            self.known.get(cid, evict=True)

    # ------------------------------------------------------------ set-up

    def _ensure(self) -> None:
        """Creates the pointer and the first generation once; a store of the previous version
        (one JSON row per conversation) gets its views rebuilt from the log, with a notice."""
        with self.storage.transaction(write=False) as curs:
            live = self.storage.pointer(curs)
        if live is not None:
            self._set_live(live)
            return
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            live = self.storage.pointer(curs)
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
        self._set_live(live)
        if self.store.max_notification_id():
            self._fold_log(live.generation, live.rules, 0, None)

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
        self._set_live(live)
        return live

    # ------------------------------------------------------------ writing

    def apply(self, aggregate_id: UUID, events: Sequence[ConversationEvent] | None = None) -> Head | None:
        """Brings one conversation's rows up to its log: `events` (just saved) where they follow
        the head, else what the log holds after the head. Returns the head after it."""
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=False)
            live = self.storage.pointer(curs)
            assert live is not None
            rows = self.storage.rows(curs, live.generation, aggregate_id)
            head: Head | None = rows.head()
            version = head.version if head else 0
            if events and events[-1].originator_version <= version:
                return head
            if not events or events[0].originator_version != version + 1:
                todo: Iterable[ConversationEvent] = self.store.events.get(aggregate_id, gt=version or None)
            else:
                todo = events
            after = fold_into(rows, head, todo, resolve(live.rules))
            if after is not None and after is not head:
                rows.put_head(after)
            return after

    def apply_inline(self, curs: Any, aggregate_id: UUID, events: Sequence[ConversationEvent], written: ViewsWritten) -> None:
        """Applies `events`, being saved in the transaction of `curs`, to their conversation's
        rows in that same transaction, noting the head it wrote in `written` (the transaction's,
        made by the store: `inline_committed` keeps its heads once it committed), under a savepoint: a view that cannot apply them (a bug,
        or data an old version accepted) leaves its rows as they were and the events are still
        stored; the next read of the conversation tries again from its log. When that fails
        with the pointer and head this process kept (a rebuild elsewhere switched generations
        and dropped the tables it took as live), it is tried once more, in a new savepoint, with
        the live pointer and head read from the database. Events that do not follow the head (a
        gap) are left to the next read too."""
        if not events:
            return
        for fresh in (False, True) if self.storage.shared else (False,):
            if self._apply_inline(curs, aggregate_id, events, fresh, written):
                return

    def _apply_inline(
        self, curs: Any, aggregate_id: UUID, events: Sequence[ConversationEvent], fresh: bool, written: ViewsWritten
    ) -> bool:
        """One try of `apply_inline`; `fresh` reads the pointer and head instead of using the
        kept ones. Returns False when the views' savepoint failed and a fresh try is left."""
        written.pop(aggregate_id, None)
        failed: list[Exception] = []

        def on_failure(error: Exception) -> bool:
            self._inline_failed(error, written)
            failed.append(error)
            return not fresh  # True: tried again with the live pointer, so nothing to warn of yet

        with self.storage.savepoint(curs, on_failure=on_failure) as point:
            self.storage.lock(point, exclusive=False)
            live = None if fresh else self._live
            head = self.heads.get(aggregate_id, events[0].originator_version - 1) if live is not None else None
            if live is None or head is None:
                live, body = self.storage.pointer_and_head(point, aggregate_id, live.generation if live else 0)
                assert live is not None
                self._set_live(live)
                head = None
            rows = self.storage.rows(point, live.generation, aggregate_id, buffered=True)
            prime = getattr(rows, "prime", None)
            if prime is not None:  # the rows the append that wrote the kept head left: not read again
                prime(self.heads.rows(aggregate_id, head) if head is not None else None)
            getattr(rows, "prefetch", lambda events: None)(events)  # what the fold will read, at once where it can
            if head is None:
                head = Head.model_validate_json(body) if body is not None else rows.head()
            if events[0].originator_version != (head.version if head else 0) + 1:
                return True
            after = fold_into(rows, head, events, resolve(live.rules))
            if after is not None:
                rows.put_head(after)
            getattr(rows, "flush", lambda: None)()  # the writes go out together
            written[aggregate_id] = (live.generation, after, getattr(rows, "recent", lambda: None)())
        return not failed or fresh

    def _set_live(self, live: Pointer) -> None:
        """Takes `live` as the live pointer; the kept heads go when its generation is new."""
        if self._live is None or self._live.generation != live.generation:
            self.heads.clear()
        self._live = live

    def _inline_failed(self, error: Exception, written: ViewsWritten) -> None:
        """After a view statement failed (e.g. a rebuild elsewhere dropped the tables this
        process took as live): forget the pointer, the kept heads and what the transaction
        wrote (`written`); the next write reads them."""
        written.clear()
        self._live = None
        self.heads.clear()

    def inline_committed(self, written: ViewsWritten) -> None:
        """Called by the store once the transaction `apply_inline` wrote `written` in has
        committed: keeps the heads it wrote (`HeadCache`, one per conversation of the
        transaction: (generation, head, newest rows)), so the next append need not read them."""
        for aggregate_id, (generation, head, recent) in written.items():
            if head is not None and self._live is not None and generation == self._live.generation:
                self.heads.put(aggregate_id, head, recent)

    def catch_up(self, progress: Progress | None = None) -> int:
        """Brings every conversation's rows up to its log; returns how many conversations
        had events to apply."""
        behind = 0
        for conversation in self.store.conversation_ids():
            key = conversation_uuid(conversation)
            with self.storage.transaction(write=False) as curs:
                live = self.storage.pointer(curs)
                assert live is not None
                head = self.storage.rows(curs, live.generation, key).head()
                logged = self.storage.log_version(curs, key)
            if (head.version if head else 0) < logged:
                self.apply(key)
                behind += 1
        return behind

    # ------------------------------------------------------------ reads

    def _read(
        self,
        conversation: str,
        read: Callable[[Any, Head, str], T],
        newest: int | None = None,
        kept_at: int | None = None,
        known: KnownBlocks | None = None,
    ) -> T:
        """Returns `read(rows, head, rules)` for a conversation, its rows caught up with its log
        first. With `newest` (a turn read: the card outcomes it needs), the backend may read the
        head, the log's version, the entries and those outcomes in one statement (on
        PostgreSQL prepared, in autocommit while that one statement answers the read; a read
        that needs another is read again in one REPEATABLE READ snapshot, `ViewStorage.reading`:
        every read sees one version of the conversation); the entries and outcomes not, when the head is
        at version `kept_at` (`read` has that version's answer kept; the rows read them should
        it need them after all); with `known` (what an earlier turn read kept of the transcript
        rows), also the topics of the events since and the rows from its `last_user` on, so
        placing the notes need not read the rows again (`KnownBlocks.placement`). A read whose
        tables a rebuild elsewhere dropped reads again. Raises UnknownConversation for a
        conversation the store does not hold."""
        key = conversation_uuid(conversation)
        snapshot = newest is None  # a turn read tries one statement first, in no transaction
        for _ in range(4):
            try:
                with self.storage.reading(snapshot) as curs:  # one snapshot: head, entries, outcomes, transcript
                    fetched = (
                        self.storage.turn_rows(
                            curs,
                            key,
                            self._live.generation,
                            newest,
                            kept_at,
                            NEWEST_ENTRIES,
                            known.version if known is not None else None,
                            known.last_user if known is not None else 0,
                        )
                        if newest is not None and self._live is not None
                        else None
                    )
                    live: Pointer | None
                    if fetched is not None and fetched.matches:  # one statement (PostgreSQL)
                        assert isinstance(self.storage, SQLViewStorage)  # the storage that reads them so
                        live, logged = fetched.live, fetched.logged
                        head = Head.model_validate_json(fetched.head) if fetched.head is not None else None
                        placement = (
                            known.placement(live.generation, head.version, fetched.topics, fetched.tail, fetched.since_tip)
                            if known is not None and head is not None
                            else None
                        )
                        rows = (
                            self.storage.rows(curs, live.generation, key)
                            if fetched.skipped
                            else PrefetchedRows(
                                curs,
                                table_names(live.generation, self.storage.schema),
                                str(key),
                                self.storage.p,
                                fetched.entries,
                                fetched.outcomes,
                                newest or 0,
                                self.storage.texts,
                                self.storage.run,
                                head,
                                placement,
                            )
                        )
                        rows.tip = fetched.tip
                    else:
                        live = fetched.live if fetched is not None else self.storage.pointer(curs)
                        assert live is not None
                        rows = self.storage.rows(curs, live.generation, key)
                        head = rows.head()
                        logged = self.storage.log_version(curs, key)
                    self._set_live(live)
                    if logged == 0:
                        raise UnknownConversation(
                            f"no conversation {shown_id(conversation)} in the store; check the id or ingest it first"
                        )
                    if head is not None and head.version >= logged:
                        return read(rows, head, live.rules)
            except NeedsSnapshot:  # the one statement did not answer it: read it all in one snapshot
                snapshot = True
                continue
            except ReadMoved:
                self._live = None  # a rebuild elsewhere, or an append meanwhile: read the live pointer next
                continue
            self.apply(key)
        raise ViewOutOfStep(f"the read models of {shown_id(conversation)} cannot catch up with its log; run: chatrecord rebuild")

    def head(self, conversation: str) -> Head:
        """Returns a conversation's head (bookkeeping, view context, latest turn)."""
        return self._read(conversation, lambda rows, head, rules: head)

    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnNotes:
        """Returns what the chat adds to its transcript for the next model call: the page line
        and each note with its place. Reads the head, the newest run record entries
        (NEWEST_ENTRIES; the older of the at most 200 kept only when the notes reach past them),
        the newest card outcomes (the notes' budget + 1) and the transcript messages the notes
        stand beside (each decoded once per row body, `KeptMessages`): its cost does not grow
        with the history. A read of a conversation
        that has not changed since this process last read it (same head version, rule set and
        page check, where the check is `every_page` or a `PageFilter`) is answered from
        `notes_cache` after the one statement that finds the head's version.

        Raises UnknownConversation for a conversation the store does not hold."""

        check = check_slot(can_see_page)

        def read(rows: Any, head: Head, rules: str) -> TurnNotes:
            key = (
                conversation_uuid(conversation),
                self._live.generation if self._live else 0,
                head.version,
                rows.tip,
                rules,
                check,
            )
            kept = _kept(self.notes, key) if check is not None else None
            if kept is not None:
                return kept
            rule_set = resolve(rules)
            # the entries as read (validated where stored), decoded one by one as the notes ask;
            # a body decoded and rendered before is not again (`RenderedNotes`)
            entries = rows.entries(self.rendered.entry, NEWEST_ENTRIES, len(head.seqs))
            record = RunRecord.model_construct(entries=entries, dropped=head.dropped)
            newest = rows.outcomes(newest=rule_set.max_notes + 1, decode=self.rendered.outcome)
            messages_at, block_ends = rows.placement_reads(head.length, self.messages)
            note = self.rendered.note(check) if check is not None else note_of
            notes = turn_notes(
                head.conversation or conversation,
                head.version,
                head.kind,
                head.view,
                record,
                newest,
                head.outcomes,
                head.length,
                messages_at,
                block_ends,
                rule_set,
                can_see_page,
                note,
            )
            if check is not None:
                self.notes.put(key, notes)
                self.kept_at.put((key[0], check), head.version)
            if isinstance(rows, PrefetchedRows) and self._live is not None:
                self.known.put(
                    key[0], KnownBlocks.of(rows.placement, self._live.generation, head.version, head.last_user, rows.tip)
                )
            return notes

        cid = conversation_uuid(conversation)
        kept_at = _kept(self.kept_at, (cid, check)) if check is not None else None
        return self._read(conversation, read, newest=NEWEST_OUTCOMES, kept_at=kept_at, known=_kept(self.known, cid))

    def state(self, conversation: str) -> TurnState | None:
        """Returns the conversation's read models after its last event, None for a conversation
        the store does not hold. Reads its whole transcript and card outcomes."""
        try:
            return self._read(conversation, lambda rows, head, rules: _state(rows, head))
        except UnknownConversation:
            return None

    def snapshot(self, conversation: str) -> tuple[Head, str, TurnState]:
        """Returns the conversation's head row, the live rule set and its rows folded together
        (whole transcript, entries and outcomes), all read in one snapshot after its rows caught
        up with its log: what `adapters.views.verify_rows` holds against a fold of the log.
        Raises UnknownConversation for a conversation the store does not hold."""
        return self._read(conversation, lambda rows, head, rules: (head, rules, _state(rows, head)))

    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnInput:
        """Returns the input of the conversation's latest turn (its latest user message, retry
        or edit), as that turn saw it: from the rows when they still hold what that turn saw
        (`Head.turn_intact`, `turn_rows_state`: its cost is what the input holds; on PostgreSQL
        in one statement, `_turn_input_in_one`), else from its log up to the turn. The
        collector's collections are paused while it is built from rows (`collections_paused`). Raises
        UnknownConversation for a conversation the store does not hold, NoTurnYet when no turn
        has started yet."""

        def read(rows: Any, head: Head, rules: str) -> TurnInput:
            if head.turn is None:
                raise NoTurnYet(f"conversation {shown_id(conversation)} has no user message or retry yet, so no turn to build")
            if head.turn.version == head.version:
                with collections_paused():
                    return turn.turn_input(_state(rows, head), head.turn.message, head.turn.at, rules, can_see_page)
            if head.turn_intact:
                with collections_paused():
                    return turn.turn_input(turn_rows_state(rows, head), head.turn.message, head.turn.at, rules, can_see_page)
            events = self.store.events(conversation, up_to_version=head.turn.version)
            return turn.build_turn_input(events, rules, can_see_page)

        built = self._turn_input_in_one(conversation, can_see_page)
        return built if built is not None else self._read(conversation, read)

    def _turn_input_in_one(self, conversation: str, can_see_page: PageCheck) -> TurnInput | None:
        """Returns the latest turn's input from the rows of one statement
        (`ViewStorage.turn_input_rows`: the pointer, the head, the log's version and that turn's
        rows, in autocommit), where the backend reads them so, the live generation is known,
        the head is up to date with the log and the turn is intact in the rows
        (`turn_rows_state` of the same rows); else None (the caller reads as before)."""
        live = self._live
        if live is None or not self.storage.reads_turn_in_one:
            return None
        key = conversation_uuid(conversation)
        try:
            with self.storage.reading(False) as curs:
                got = self.storage.turn_input_rows(curs, key, live.generation)
        except ReadMoved:
            self._live = None
            return None
        if got is None or not got.matches or got.head is None or got.messages is None:
            if got is not None and not got.matches:
                self._set_live(got.live)
            return None
        head = Head.model_validate_json(got.head)
        mark = head.turn
        if mark is None or not head.turn_intact or head.version < got.logged:
            return None
        self._set_live(got.live)
        with collections_paused():
            return self._turn_input_of(got, head, mark, str(key), can_see_page)

    def _turn_input_of(self, got: TurnInputRows, head: Head, mark: TurnMark, cid: str, can_see_page: PageCheck) -> TurnInput:
        """Returns the input of the turn `mark` from the rows `got` read of it (`_turn_input_in_one`)."""
        assert got.messages is not None and got.entries is not None and got.outcomes is not None  # read together
        state = TurnState.model_construct(
            transcript=Transcript(kind=head.kind, messages=decode_messages(_bodies(got.messages), self.storage.texts, cid)),
            record=RunRecord.model_construct(
                entries=_ENTRIES.validate_json(f"[{got.entries.replace(SEPARATOR, ',')}]"), dropped=mark.dropped
            ),
            outcomes=CardOutcomes.model_construct(outcomes=_OUTCOMES.validate_json(f"[{got.outcomes.replace(SEPARATOR, ',')}]")),
            view=head.view,
        )
        return turn.turn_input(state, mark.message, mark.at, got.live.rules, can_see_page)

    # ------------------------------------------------------------ erasure

    def erase(self, conversation: str) -> bool:
        """Deletes the conversation's rows in the live tables and folds them again from its log,
        whose texts read as erased once its key is gone, so no view keeps a text of it (a log
        that cannot be read back, `UnreadableEvent`, leaves them deleted). Returns False when
        the store does not hold the conversation."""
        key = conversation_uuid(conversation)
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=False)
            live = self.storage.pointer(curs)
            assert live is not None
            if not self.storage.log_version(curs, key):
                return False
            rows = self.storage.rows(curs, live.generation, key)
            rows.clear()
            self.heads.clear()
            self.notes = notes_cache()
            self.messages.clear()
            self.known = known_conversations()
            try:
                after = fold_into(rows, None, self.store.events.get(key), resolve(live.rules))
            except UnreadableEvent:
                rows.clear()  # its rows stay dropped: a read says why its log cannot be read
                return True
            if after is not None:
                rows.put_head(after)
        return True

    # ------------------------------------------------------------ rule sets

    def _fold_log(
        self,
        generation: int,
        rules: str,
        start: int,
        stop: int | None,
        progress: Progress | None = None,
        curs: Any = None,
        unreadable: set[UUID] | None = None,
        part: tuple[int, int] | None = None,
    ) -> tuple[int, set[UUID]]:
        """Folds the notifications after `start` (up to `stop`) into `generation`, a page of
        PAGE per transaction (or all in `curs`); returns how many events and which conversations.
        `generation` holds only what folds of the log from its start wrote into it (a new
        generation's tables are written by no other writer). Without `curs`, where the backend
        writes on a thread of its own (`ViewStorage.queued`), a page is written while the next is
        folded, and the heads written are kept (`KEPT_HEADS`) so that the next page need not read them.
        Without `curs`, where the backend `reads_ahead`, the next page is read on a thread of its
        own while this one is folded (the wait for the server's answer overlaps the fold); and
        unless something else froze objects, what the process held before is frozen (`gc.freeze`)
        until the fold ends, so that the collections of the fold's garbage do not scan it.
        A conversation whose event cannot be read or folded (`_fold_page`) is left where it
        stopped, and added to `unreadable`: one conversation's damaged log stops no other's.
        With `part` (part, parts), only the conversations of that part (`part_of`) are read
        and folded (`select_notifications_to_fold`): a worker of `_fold_in_parts`."""
        rule_set, folded, seen = resolve(rules), 0, set()
        unreadable = set() if unreadable is None else unreadable
        total = stop or self.store.max_notification_id()
        queued = self.storage.queued() if curs is None else None
        kept: LRUCache[UUID, Head | None] | None = LRUCache(maxsize=KEPT_HEADS) if queued is not None else None

        to_fold = getattr(self.store.recorder, "select_notifications_to_fold", None)

        def read(after: int) -> Sequence[Any]:
            if to_fold is not None:
                folded: Sequence[Any] = to_fold(after, PAGE, stop, part)
                return folded
            assert part is None, "a backend that folds in parts reads them"
            return self.store.recorder.select_notifications(after, PAGE, stop=stop, inclusive_of_start=False)

        ahead = (
            ThreadPoolExecutor(1, thread_name_prefix="chatrecord-rebuild-reads")
            if curs is None and self.storage.reads_ahead
            else None
        )
        following: Future[Sequence[Any]] | None = None
        frozen = curs is None and gc.get_freeze_count() == 0  # else whoever froze them keeps them frozen
        if frozen:
            gc.freeze()  # what lived before the fold is not searched for cycles again and again during it
        try:
            page = read(start)
            while page:
                if ahead is not None and len(page) == PAGE:  # the next page is read while this one is folded
                    following = ahead.submit(read, page[-1].id)
                if queued is not None:
                    seen.update(self._fold_page(queued, generation, rule_set, page, kept, unreadable))
                    queued.commit()
                elif curs is None:
                    with self.storage.transaction(write=True) as own:
                        seen.update(self._fold_page(own, generation, rule_set, page, unreadable=unreadable))
                else:
                    seen.update(self._fold_page(curs, generation, rule_set, page, unreadable=unreadable))
                folded += len(page)
                start = page[-1].id
                if progress:
                    progress(start, max(total, start))
                if len(page) < PAGE:
                    break
                page, following = (following.result() if following is not None else read(start)), None
        except BaseException:
            if queued is not None:
                with contextlib.suppress(Exception):
                    queued.close()
            raise
        finally:
            if ahead is not None:
                ahead.shutdown(wait=True, cancel_futures=True)
            if frozen:
                gc.unfreeze()
        if queued is not None:
            queued.close()  # every page written and committed, or the first error raised
        return folded, seen

    def _fold_page(
        self,
        curs: Any,
        generation: int,
        rules: RuleSet,
        page: Sequence[Any],
        kept: LRUCache[UUID, Head | None] | None = None,
        unreadable: set[UUID] | None = None,
    ) -> set[UUID]:
        """Decodes the page's notifications in order and folds each event, once, into its
        conversation's rows, which hold their writes until the page is folded (`BufferedRows`):
        an event is dropped as soon as it is applied. A conversation whose head is behind the
        page's first event of it is filled from its own log first. With `kept` (the heads the
        fold wrote, by conversation), a kept head is not read, nor the head of a conversation
        whose first event here is its first (`_fold_log`: none yet); the heads written are
        kept. A conversation whose event here cannot be read back (UnreadableEvent) or folded
        (another ChatrecordError) gets none of this page's rows and no more of them at all: it is
        added to `unreadable` (with one line logged), whose conversations are passed over.
        Returns the conversations."""
        folding: dict[UUID, list[Any]] = {}  # conversation: [rows, head read, head now]
        decode = self.store.mapper.to_domain_event
        unreadable = set() if unreadable is None else unreadable
        for notification in page:
            if unreadable and originator_uuid(notification.originator_id) in unreadable:
                continue
            try:
                event = decode(notification)
                key = event.originator_id
                held = folding.get(key)
                if held is None:
                    rows = self.storage.rows(curs, generation, key, buffered=True)
                    head = _kept(kept, key) if kept is not None else None
                    if head is None and not (kept is not None and event.originator_version == 1):
                        head = rows.head()
                    held = folding[key] = [rows, head, head]
                rows, _, head = held
                version = head.version if head is not None else 0
                if event.originator_version == version + 1:  # `fold_into` of one event, without its loop
                    held[2] = apply_to_rows(rows, head or Head(), event, rules)
                elif event.originator_version > version:  # a gap: filled from the conversation's own log
                    missed = self.store.events.get(key, gt=version or None, lte=event.originator_version)
                    held[2] = fold_into(rows, head, missed, rules)
            except ChatrecordError as error:
                key = originator_uuid(notification.originator_id)
                unreadable.add(key)
                folding.pop(key, None)  # none of this page's rows: they stop where an earlier page left them
                log.warning(
                    "chatrecord: the read models of conversation %s stop before version %s: %s",
                    key,
                    notification.originator_version,
                    error,
                )
        for key, (rows, read, head) in folding.items():
            if head is not None and head is not read:
                rows.put_head(head)
            getattr(rows, "flush", lambda: None)()
            if kept is not None and head is not None:
                kept.put(key, head)
        return set(folding)

    def rebuild_workers(self, stop: int, workers: int | None = None) -> int:
        """Returns the processes a rebuild of the log up to notification `stop` (its events)
        folds it in: `workers` where given; else one per CPU this process may use, at most
        MAX_WORKERS, for a log of at least PARTS_FROM events whose conversations spread over the
        parts (no part holds more than MOST_OF_A_PART of the events, counted by the server,
        `count_notifications_by_part`; a log of one long conversation is folded by one process).
        1 where the backend cannot fold in parts (`ViewStorage.folds_in_parts`: SQLite, memory) or
        the system cannot fork. Raises ValueError for `workers` outside 1 to MOST_WORKERS."""
        _check_workers(workers)
        if not self.storage.folds_in_parts or not hasattr(os, "fork"):
            return 1
        if workers is not None:
            return workers
        if stop < PARTS_FROM:
            return 1
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        parts = max(1, min(cpus, MAX_WORKERS))
        if parts > 1:
            sizes = self.store.recorder.count_notifications_by_part(stop, parts)  # type: ignore[attr-defined]  # a recorder that folds in parts
            if max(sizes) > MOST_OF_A_PART * sum(sizes):
                return 1
        return parts

    def rebuild(
        self,
        rules: str,
        progress: Progress | None = None,
        workers: int | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> RebuildReport:
        """Folds the whole event log under `rules` into a new generation's tables, then makes
        it live and drops the old ones; returns what it did. The log up to the rebuild's start
        is folded in `rebuild_workers(stop, workers)` processes, each its own conversations
        (`_fold_in_parts`; `progress` follows this process's part); what was stored meanwhile,
        by this process under the exclusive lock. Raises UnknownRuleSet for an unknown id,
        RebuildSuperseded when a later rebuild switched first, RebuildWorkerFailed when a
        worker process failed, ValueError for `workers` outside 1 to MOST_WORKERS.
        An interrupt (KeyboardInterrupt) before the switch drops the new generation's tables
        (its workers stopped first; `guard()` is entered around the drop, so that a second
        interrupt does not cut it) and raises RebuildInterrupted, which names them."""
        target = resolve(rules).id
        _check_workers(workers)  # before a generation is made
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            old = self.storage.pointer(curs)
            assert old is not None
            generation = old.next
            self.storage.set_pointer(curs, Pointer(old.generation, old.rules, generation + 1))
            self.storage.create(curs, generation)
        try:
            return self._rebuild_into(generation, old, target, progress, workers)
        except KeyboardInterrupt:
            with guard():
                dropped = self._drop_unswitched(generation)
            raise RebuildInterrupted(
                f"rebuild under {target}: "
                + (f"the half-built tables views_g{generation}_* were dropped; " if dropped else "")
                + f"{UNSWITCHED} ({old.rules}); run it again to rebuild"
            ) from None

    def _drop_unswitched(self, generation: int) -> bool:
        """Drops `generation`'s tables unless it went live (an interrupt after the switch
        committed); returns True when it dropped them."""
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            now = self.storage.pointer(curs)
            if now is not None and now.generation == generation:
                return False
            self.storage.drop(curs, generation)
            return True

    def _rebuild_into(
        self, generation: int, old: Pointer, target: str, progress: Progress | None, workers: int | None
    ) -> RebuildReport:
        """`rebuild`'s fold into the new `generation` (made already) and its switch."""
        stop = self.store.max_notification_id()
        unreadable: set[UUID] = set()
        parts = self.rebuild_workers(stop or 0, workers)
        seen: set[UUID]
        if not stop:
            events, seen = 0, set()
        elif parts > 1:
            events, seen = self._fold_in_parts(generation, target, stop, parts, progress, unreadable)
        else:
            events, seen = self._fold_log(generation, target, 0, stop, progress, unreadable=unreadable)
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            now = self.storage.pointer(curs)
            assert now is not None
            if now.generation != old.generation:
                self.storage.drop(curs, generation)
                raise RebuildSuperseded(f"a later rebuild switched to generation {now.generation} first")
            more, also = self._fold_log(generation, target, stop, None, curs=curs, unreadable=unreadable)
            self.storage.set_pointer(curs, Pointer(generation, target, now.next))
            dropped: list[str] = []
            for stale in sorted(self.storage.generations(curs) - {generation}):
                self.storage.drop(curs, stale)
                dropped.extend(f"views_g{stale}_{t}" for t in (*TABLES, *self.storage.overview_tables))
        self._set_live(Pointer(generation, target, now.next))
        return RebuildReport(
            rules=target,
            conversations=len(seen | also | unreadable),
            events=events + more,
            old_rules=old.rules,
            tables=tuple(f"views_g{generation}_{t}" for t in (*TABLES, *self.storage.overview_tables)),
            generation=generation,
            dropped=tuple(dropped),
            unreadable=tuple(sorted(str(key) for key in unreadable)),
            workers=parts,
        )

    def _fold_in_parts(
        self, generation: int, rules: str, stop: int, parts: int, progress: Progress | None, unreadable: set[UUID]
    ) -> tuple[int, set[UUID]]:
        """Folds the notifications up to `stop` into `generation` in `parts` processes: this
        one folds part 0 (`_fold_log` with `part`, calling `progress`), `parts` - 1 forked
        workers (`_fold_part`) the others, each with its own store and connections, into the
        same new tables (no two write a conversation's rows). A conversation's events are all
        in its part, in their order, so each is folded as one process would fold it. Returns
        the events folded and the conversations, and adds the workers' unreadable ones to
        `unreadable`. Raises RebuildWorkerFailed when a worker failed or ended without an
        answer; the workers still running are then stopped (SIGTERM), as when this one fails."""
        context = multiprocessing.get_context("fork")
        workers: list[tuple[Any, Any]] = []
        try:
            for part in range(1, parts):
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(
                    target=_fold_part,
                    name=f"chatrecord-rebuild-{part}-of-{parts}",
                    daemon=True,
                    args=(self.store, generation, rules, stop, (part, parts), sender, os.getpid()),
                )
                with warnings.catch_warnings():  # Python 3.12+ warns of fork in a process with threads: the
                    warnings.simplefilter("ignore", DeprecationWarning)  # worker touches none of their objects
                    process.start()
                sender.close()
                workers.append((process, receiver))
            folded, seen = self._fold_log(generation, rules, 0, stop, progress, unreadable=unreadable, part=(0, parts))
            for process, receiver in workers:
                try:
                    answer = receiver.recv()
                except EOFError:
                    process.join()
                    raise RebuildWorkerFailed(
                        f"rebuild worker {process.name} ended (exit code {process.exitcode}) "
                        f"before it folded its part of the log; {UNSWITCHED}"
                    ) from None
                if isinstance(answer, str):
                    raise RebuildWorkerFailed(f"rebuild worker {process.name} failed: {answer}; {UNSWITCHED}")
                count, its_seen, its_unreadable = answer
                folded += count
                seen |= its_seen
                unreadable |= its_unreadable
            return folded, seen
        finally:
            for process, receiver in workers:
                receiver.close()
                if process.is_alive():
                    process.terminate()
                process.join()

    def diff(self, rules: str) -> list[ConversationDiff]:
        """Returns, per conversation in the order they started, which run record entries and
        which notes of its latest turn differ between the live rule set and `rules`. Writes
        nothing. Raises UnknownRuleSet for an unknown id."""
        target = resolve(rules)
        live = self.active_rules()
        diffs = []
        for conversation in self.store.conversation_ids():
            before = self.state(conversation)
            if before is None:
                continue
            log_events = self.store.events(conversation)
            after = TurnState()
            for event in log_events:
                after = turn.apply(after, event, target)
            diffs.append(_diff(conversation, before, live, log_events, after, target))
        return diffs


def _check_workers(workers: int | None) -> None:
    """Raises ValueError for a number of worker processes outside 1 to MOST_WORKERS."""
    if workers is not None and not 1 <= workers <= MOST_WORKERS:
        raise ValueError(f"a rebuild folds in 1 to {MOST_WORKERS} worker processes, not {workers}")


def part_of(conversation: UUID, parts: int) -> int:
    """Returns which of `parts` worker processes of a rebuild folds `conversation`: the last
    byte of its UUID modulo `parts` (0 <= part < parts), as the recorder's
    `select_notifications_to_fold` chooses on the server."""
    return conversation.bytes[15] % parts


def _fold_part(
    store: ConversationStore, generation: int, rules: str, stop: int, part: tuple[int, int], answer: Any, parent: int
) -> None:
    """A forked worker of `ReadModels._fold_in_parts`: opens the store anew (its own pool and
    data keys; the parent's connections are never touched here), folds its `part` of the log up
    to `stop` into `generation` and sends (events, conversations, unreadable ones) through the
    pipe end `answer`, or one line naming its error. Ends with the process that started it
    (`adapters.processes.end_with`)."""
    end_with(parent)
    own: ConversationStore | None = None
    try:
        own = type(store)(env=dict(store.env))
        unreadable: set[UUID] = set()
        folded, seen = ReadModels(own)._fold_log(generation, rules, 0, stop, unreadable=unreadable, part=part)
        answer.send((folded, seen, unreadable))
    except BaseException as error:  # noqa: BLE001 - told to the parent, which raises it
        answer.send(f"{type(error).__name__}: {error}")
    finally:
        answer.close()
        if own is not None:
            own.close()


_ENTRIES = TypeAdapter(tuple[Entry, ...])
_OUTCOMES = TypeAdapter(tuple[CardOutcome, ...])


def _bodies(joined: str) -> list[str]:
    """Returns the row bodies a statement joined by SEPARATOR (none for the empty string)."""
    return joined.split(SEPARATOR) if joined else []


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector's automatic collections (`gc.disable`) while a read
    builds many objects at once (a turn input of 20,000 messages makes about 60,000), where
    it was enabled: each collection walks the young objects again and again as they grow
    (measured: about a third of `turn_input`'s time at 10,000 segments, docs/benchmarks.md,
    issue 25). Reference counting frees everything as before; the collector runs again from
    the next allocation after. Where another thread paused it too, the first to end enables
    it again (a collection then runs sooner, nothing is wrong)."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _state(rows: Any, head: Head) -> TurnState:
    """Returns the folded read models of a conversation from its rows (whole transcript)."""
    return TurnState.model_construct(
        transcript=Transcript(kind=head.kind, messages=rows.messages()),
        record=RunRecord(
            entries=rows.entries(), dropped=head.dropped, follow=head.follow, open_waits=head.open_waits, pending=head.pending
        ),
        outcomes=CardOutcomes(outcomes=rows.outcomes(), open_cards=head.open_cards, approval=head.approval),
        view=head.view,
    )


def turn_rows_state(rows: Any, head: Head) -> TurnState:
    """Returns the read models as the latest turn saw them, from rows that still hold them
    (`head.turn_intact`): the first `turn.length` transcript messages, the entries of versions
    up to `turn.version` after those set aside for it, the card outcomes recorded up to
    `turn.version`, the view context (only a turn changes it). Only what `turn_input` reads
    is set (no continuation bookkeeping)."""
    mark = head.turn
    assert mark is not None and head.turn_intact
    read = getattr(rows, "turn_rows", None)
    if read is not None:  # one statement
        messages, entries, outcomes = read(mark.length, mark.version)
    else:
        messages = rows.messages()[: mark.length]
        entries = (*rows.aside(), *(e for e in rows.entries() if e.seq <= mark.version))
        outcomes = tuple(o for o in rows.outcomes() if o.seq[0] <= mark.version)
    return TurnState.model_construct(
        transcript=Transcript(kind=head.kind, messages=messages),
        record=RunRecord.model_construct(entries=entries, dropped=mark.dropped),
        outcomes=CardOutcomes.model_construct(outcomes=outcomes),
        view=head.view,
    )


def _diff(
    conversation: str,
    before: TurnState,
    before_rules: str,
    events: Sequence[ConversationEvent],
    after: TurnState,
    after_rules: RuleSet,
) -> ConversationDiff:
    old = {e.segment: e.to_json() for e in before.record.entries}
    new = {e.segment: e.to_json() for e in after.record.entries}
    records: list[RecordChange] = []
    for segment in [*old, *(s for s in new if s not in old)]:
        was, now = old.get(segment), new.get(segment)
        if was is None or now is None or any(was[f] != now[f] for f in RECORD_FIELDS):
            records.append((segment, was, now))
    notes_before, notes_after = _notes(events, before_rules), _notes(events, after_rules)
    return ConversationDiff(
        conversation=conversation,
        records_changed=records,
        notes_removed=[n for n in notes_before if n not in notes_after],
        notes_added=[n for n in notes_after if n not in notes_before],
    )


def _notes(events: Sequence[ConversationEvent], rules: RuleSet | str) -> tuple[str, ...]:
    try:
        return turn.build_turn_input(events, rules).notes
    except NoTurnYet:
        return ()
