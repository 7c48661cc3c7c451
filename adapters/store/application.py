"""The conversation store: an eventsourcing Application over the Conversation aggregate.

Thin: `handle` loads a conversation, lets the command decide, saves the events. Everything
else (backend, serialisation) is configuration; see `adapters.store.settings`.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, cast
from uuid import UUID

import psycopg
from eventsourcing.application import AggregateNotFoundError, Application, LRUCache, ProcessingEvent
from eventsourcing.persistence import EventStore, IntegrityError, InterfaceError, OperationalError, Recording
from eventsourcing.utils import get_topic
from psycopg_pool import PoolTimeout

from adapters.backends import backend_of
from adapters.store.chain import ChainBroken, ChainedRecorder
from adapters.store.crypto import refuse_texts
from adapters.store.idempotency import IdempotencyKeys
from adapters.store.keys import DataKeys
from adapters.store.serialization import SERIALIZATION_ENV, PydanticMapper, originator_uuid
from adapters.store.sql_history import AssumptionFailed, HistoryTables, KnownRecords
from domain.conversation import (
    Conversation,
    ConversationSnapshot,
    History,
    project_conversation,
    recorded_segment,
)
from domain.errors import ChatrecordError
from domain.events import ConversationErased, ConversationEvent, ConversationStarted, conversation_uuid
from domain.history_index import AssumedHistory, NotKnown

DEFAULT_SNAPSHOT_INTERVAL = 100
DEFAULT_MAX_ATTEMPTS = 20


class Command(Protocol):
    """What `ConversationStore.handle` accepts: one input line, ready to decide.

    Optional attributes let a repeat return the first result: `digest`, the `source` its events
    carry (the ingester's line digest), and `segment`, the segment id a segment line records.
    """

    @property
    def conversation(self) -> str:
        """The chat's id of the conversation the command is for (read-only: a frozen command qualifies)."""
        ...

    def decide(self, state: Conversation | None, history: History) -> list[ConversationEvent]: ...


ViewsWritten = dict[UUID, Any]
"""What the views wrote in one transaction of the store, by conversation (`StoreViews.apply_inline`
fills it): the store makes one per transaction and hands it back once that has committed."""


class StoreViews(Protocol):
    """The views a ConversationStore keeps current as it saves, given to it at construction
    (`ConversationStore(views=...)`; `adapters.views.readmodels.ReadModels` is the store's)."""

    def apply(self, aggregate_id: UUID, events: Sequence[ConversationEvent]) -> object:
        """Applies `events`, just saved by a recorder that cannot write in their transaction,
        in a transaction of their own."""
        ...

    def apply_inline(self, curs: Any, aggregate_id: UUID, events: Sequence[ConversationEvent], written: ViewsWritten) -> None:
        """Applies `events`, being saved in the transaction of `curs`, in that transaction; notes
        what it wrote in `written`, the transaction's."""
        ...

    def inline_committed(self, written: ViewsWritten) -> None:
        """Called once the transaction whose views wrote `written` has committed."""
        ...

    def forget(self, cid: UUID) -> None:
        """Drops what the views keep of conversation `cid` (the store no longer trusts what it kept)."""
        ...


@dataclass(frozen=True)
class HandleResult:
    """What `handle` did. `appended` holds the events this call stored (empty for a repeat);
    `events` is `appended`, or for a repeat the events that recorded it first (the events of
    the same line digest, else the SegmentReturned of the same segment id); `state` is the conversation afterwards (None if it never started); `position` the
    notification id of the last appended event; `attempts` how many tries it took."""

    conversation: str
    appended: tuple[ConversationEvent, ...]
    events: tuple[ConversationEvent, ...]
    state: Conversation | None
    position: int | None
    attempts: int
    read_after: str | None = None
    """The write's read-after position, set by the service where it reads from standbys
    (`adapters.api.Chatrecord.position`); None otherwise."""

    @property
    def repeated(self) -> bool:
        """Returns True when nothing was appended because the input was recorded before."""
        return not self.appended


class WriteConflict(ChatrecordError):
    """Raised by `ConversationStore.handle` when every try to append a command's events
    conflicted with another writer's append to the same conversation. Nothing of the command
    was stored; sending it again is safe (a repeat returns the first result). The HTTP
    service answers it with 503 `write-conflict` (`adapters.http.problems`)."""


class BatchRefused(ChatrecordError):
    """Raised by `ConversationStore.handle_batch` when commands of the batch refused (nothing
    was stored): `refusals` holds each refusing command's error by its place in the batch."""

    def __init__(self, refusals: dict[int, ChatrecordError]) -> None:
        self.refusals = refusals
        super().__init__("; ".join(str(error) for error in refusals.values()))


class BatchConflict(ChatrecordError):
    """Raised by `ConversationStore.handle_batch` when its append conflicted with another
    writer's (or found the history index other than it read it): nothing was stored."""


BACKOFF_BASE = 0.01
"""Seconds: the first retry of a conflicting append waits up to this long, doubling per try."""
BACKOFF_CAP = 0.5
"""Seconds: no wait between tries is longer."""


def backoff(attempt: int) -> float:
    """Returns the seconds to wait after try `attempt` (1, 2, …) conflicted: a random time up
    to BACKOFF_BASE·2^(attempt-1), at most BACKOFF_CAP ("full jitter", so writers that
    collided once do not collide again in step).

    Why `handle` does not use the library's `eventsourcing.utils.retry` here (the PostgreSQL
    append does, for a lost connection, where a fixed wait is right): `retry` sleeps
    `wait · (1 ± 5 %)` after every failed try, one wait fixed when the function is decorated.
    That cannot give this growing, fully random wait, which the README documents ("up to
    10 ms, 20 ms, 40 ms, … at most 0.5 s"); with a near-constant wait, writers that conflicted
    once try again in step and conflict again. The rest would fit (re-raising after the last
    try, dropping the cached state before raising), but not the wait.
    """
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


class PrimaryGone(ChatrecordError):
    """Raised by `ConversationStore.handle` and `handle_batch` when the connection to the
    database was lost and no server accepted the write again within the store's
    `WRITE_RETRY_SECONDS` (CHATRECORD_WRITE_RETRY_SECONDS): the primary died and no standby was
    promoted in time, or every host of CHATRECORD_DATABASE_URL is down. The write may or may not
    be stored (a commit whose answer was lost); sending it again is safe, as a line recorded before
    is a repeat. The HTTP service answers it with 503 `store-unavailable`."""


RECONNECT_WAIT = 0.25
"""Seconds between the tries of a write whose connection was lost (`reconnecting`)."""
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")
"""SQLSTATEs (or classes) of a lost or refused connection: connection exceptions, and a server
that is shutting down, crashed or starting."""


def connection_lost(error: BaseException) -> bool:
    """Returns True when `error` (the library's, with the driver's as its cause) says the
    connection to the server failed, was refused or broke off (a server killed, a pool that found
    none to connect to), not that the server answered a statement with an error."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, PoolTimeout):
            return True
        if isinstance(seen, (psycopg.OperationalError, psycopg.InterfaceError)):
            state = getattr(seen, "sqlstate", None)
            return state is None or state.startswith(_CONNECTION_STATES)
        seen = seen.__cause__
    return False


Write = TypeVar("Write", bound=Callable[..., Any])


def reconnecting(method: Write) -> Write:
    """Makes a write of the store (`handle`, `handle_batch`) try again, every RECONNECT_WAIT s,
    while its connection is lost (`connection_lost`), for up to the store's `retry_seconds`:
    through a multi-host CHATRECORD_DATABASE_URL (`target_session_attrs=read-write`), libpq
    connects to whichever host is the primary once a standby was promoted. Each try decides
    anew from the database, so a commit whose answer was lost comes back as a repeat (the
    line's idempotency), never as a second copy. Raises PrimaryGone past the time.

    Why a loop of its own: on a dead server the library's PostgresDatastore raises its
    OperationalError (the driver's error as its cause) and psycopg_pool drops the broken
    connection and connects again in the background, waiting 1 s, 2 s, 4 s, … between tries; a
    caller meanwhile waits up to the pool's timeout (POSTGRES_CONNECT_TIMEOUT, 5 s) and gets
    PoolTimeout. The PostgreSQL recorder's own `retry` (CONNECTION_ATTEMPTS tries 0.2 s apart)
    covers a blip, not a promotion that takes seconds."""

    @functools.wraps(method)
    def call(self: ConversationStore, *args: Any, **kwargs: Any) -> Any:
        deadline: float | None = None
        while True:
            try:
                return method(self, *args, **kwargs)
            except (InterfaceError, OperationalError) as error:
                if self.retry_seconds <= 0 or not connection_lost(error):
                    raise
                now = time.monotonic()
                deadline = now + self.retry_seconds if deadline is None else deadline
                if now >= deadline:
                    raise PrimaryGone(
                        f"no server of the store accepted the write for {self.retry_seconds:g} s "
                        f"(CHATRECORD_WRITE_RETRY_SECONDS) after its connection was lost: {error}; it may or "
                        "may not be stored, and sending it again is safe (a line recorded before is a repeat)"
                    ) from error
                self.reconnects += 1
                time.sleep(min(RECONNECT_WAIT, deadline - now))

    return call  # type: ignore[return-value]


class KnownCounts:
    """Each conversation's (version, card outcome count) as this process's last append left
    its index; the library's `LRUCache` keeps at most `size` conversations."""

    def __init__(self, size: int = 4096) -> None:
        self._kept: LRUCache[UUID, tuple[int, int]] = LRUCache(maxsize=size)

    def get(self, key: UUID) -> tuple[int, int] | None:
        """Returns the kept (version, count) of conversation `key`, None if none."""
        try:
            return self._kept.get(key)
        except KeyError:
            return None

    def put(self, key: UUID, known: tuple[int, int]) -> None:
        self._kept.put(key, known)

    def evict(self, key: UUID) -> None:
        with suppress(KeyError):
            self._kept.get(key, evict=True)


class ConversationLog(EventStore[UUID]):
    """The library's event store, callable for one conversation's full log.

    `Application.events` is the event store attribute the library itself uses, so the
    store's `events(conversation)` query is this call rather than a method that would hide it.
    """

    def get(
        self, originator_id: UUID, *, gt: int | None = None, lte: int | None = None, desc: bool = False, limit: int | None = None
    ) -> Iterator[ConversationEvent]:
        """The library's `EventStore.get`, typed: the store's mapper reads its own event classes."""
        return cast("Iterator[ConversationEvent]", super().get(originator_id, gt=gt, lte=lte, desc=desc, limit=limit))

    def __call__(self, conversation: str, up_to_version: int | None = None) -> list[ConversationEvent]:
        """Returns the events of `conversation` in order, up to `up_to_version` if given;
        [] for a conversation that was never started. A log that holds the conversation's erasure
        is never read with a data key this process kept from before it (`DataKeys.forget_erased`):
        its texts read `[erased]` at once, whichever process erased them."""
        uuid = conversation_uuid(conversation)
        events = list(self.get(uuid, lte=up_to_version))
        keys = getattr(self.mapper, "keys", None)
        if isinstance(keys, DataKeys) and any(isinstance(e, ConversationErased) for e in events) and keys.forget_erased(uuid):
            events = list(self.get(uuid, lte=up_to_version))
        return events


class ConversationStore(Application[UUID]):
    """Stores conversations as event logs; loads them through snapshots.

    Env keys besides the library's: `SNAPSHOT_INTERVAL` (default 100 versions) and
    `HANDLE_MAX_ATTEMPTS` (default 20 tries of a command whose append conflicts, with a
    jittered exponential wait between them, `backoff`) and `WRITE_RETRY_SECONDS` (default 0:
    how long a write whose connection was lost tries again, `reconnecting`). The library's
    `AGGREGATE_CACHE_MAXSIZE` (default 256 conversations; "" turns the cache off) keeps loaded
    conversations between commands (see docs/benchmarks.md, "Ingesting line by line").
    """

    env: ClassVar[dict[str, str]] = {
        **SERIALIZATION_ENV,
        # The library's aggregate cache: a conversation is loaded once, then only the events
        # stored since (by any writer) are folded in before each command ("fast-forward").
        # The state is immutable, so nothing needs copying out of the cache.
        "AGGREGATE_CACHE_MAXSIZE": "256",
        "AGGREGATE_CACHE_FASTFORWARD": "y",
        "DEEPCOPY_FROM_AGGREGATE_CACHE": "n",
    }
    is_snapshotting_enabled = True
    snapshot_class = ConversationSnapshot
    events: ConversationLog
    mapper: PydanticMapper  # SERIALIZATION_ENV's MAPPER_TOPIC

    def __init__(
        self, env: dict[str, str] | None = None, *, views: Callable[[ConversationStore], StoreViews] | None = None
    ) -> None:
        """Opens the store on the backend `env` names (see the class). `views` builds, once the
        store is open, the views it keeps current as it saves (`StoreViews`; the composition root,
        `adapters.bootstrap`, passes the read models); None: a store that keeps no views (a read
        catches its views up from the log). Raises BadMasterKey,
        before anything is stored, when the store is protected by a master key that
        CHATRECORD_MASTER_KEY does not hold, or CHATRECORD_MASTER_KEY is set for a store that
        keeps data keys unwrapped (`DataKeys.check_master`; `MASTER_KEY_UNBOUND=allow` lets the
        key commands, `adapters.service.master_key`, open such a store to bind it)."""
        super().__init__(env)
        keys = getattr(self.mapper, "keys", None)
        if isinstance(keys, DataKeys):
            try:
                keys.check_master(unbound=self.env.get("MASTER_KEY_UNBOUND", "") == "allow")
            except BaseException:
                self.close()  # the refused store's connections
                raise
        self.history: HistoryTables = backend_of(self.factory).history_tables(self)
        self._records = KnownRecords()
        """Per conversation, the newest segment records as this process's last append left the
        index (`AssumedHistory.known`)."""
        self._known = KnownCounts()
        """Per conversation, (version, card outcomes) of the index after this process's last
        append, for deciding the next command without reading the index (`_assume`)."""
        self.history.create()
        self.snapshot_interval = int(self.env.get("SNAPSHOT_INTERVAL") or DEFAULT_SNAPSHOT_INTERVAL)
        self.max_attempts = int(self.env.get("HANDLE_MAX_ATTEMPTS") or DEFAULT_MAX_ATTEMPTS)
        if self.snapshot_interval < 1 or self.max_attempts < 1:
            raise ValueError("SNAPSHOT_INTERVAL and HANDLE_MAX_ATTEMPTS must be at least 1")
        self.retry_seconds = float(self.env.get("WRITE_RETRY_SECONDS") or 0)
        """Seconds a write whose connection was lost tries again (`reconnecting`); 0: not at all."""
        self.reconnects = 0
        """How many times a write of this store was tried again after a lost connection."""
        self.views: StoreViews | None = None
        """The views this store keeps current as it saves (built last: they read the store)."""
        if views is not None:
            try:
                self.views = views(self)
            except BaseException:
                self.close()  # the connections of a store whose views cannot be opened
                raise

    @functools.cached_property
    def idempotency_keys(self) -> IdempotencyKeys:
        """The kept idempotency keys in this store's own database (`adapters.store.idempotency`),
        as its backend hands them out; built once, on first use, making their table where it is
        missing (a store that only reads never makes it)."""
        return backend_of(self.factory).idempotency_keys(self)

    def construct_event_store(self) -> ConversationLog:
        return ConversationLog(mapper=self.mapper, recorder=self.recorder)

    # ------------------------------------------------------------ commands

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """The library's `save`; given conversation events only (what `handle` saves), it
        collects them without the library's isinstance test against its runtime-checkable
        `DomainEventProtocol` per event (typing walks the protocol's members on every test)."""
        if not objs or not all(isinstance(obj, ConversationEvent) for obj in objs):
            return super().save(*objs, **kwargs)
        processing_event: ProcessingEvent[UUID] = ProcessingEvent()
        processing_event.events.extend(objs)
        processing_event.saved_kwargs.update(kwargs)
        recordings = self._record(processing_event)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        self.notify(processing_event.events)  # the library's deprecated hook, as its save calls it
        return recordings

    @reconnecting
    def handle(self, command: Command) -> HandleResult:
        """Applies `command` to its conversation and stores the events it decides.

        A conflicting append (another writer got there first) is retried by reloading and
        deciding again after a jittered, growing wait (`backoff`, which says why this loop is not
        the library's `retry`), up to `max_attempts` tries. A try decided on assumptions the append
        found not to hold (`_assume`) is followed by one decided from the index at once, even where
        it was the last.
        Raises the domain's ChatrecordError when the command breaks an invariant (nothing is
        stored), WriteConflict when every try conflicts (nothing is stored).
        """
        inline = isinstance(self.recorder, ChainedRecorder)
        cid = conversation_uuid(command.conversation)
        tries, attempt = self.max_attempts, 0
        while attempt < tries:
            attempt += 1
            assumed = self._assume(command, cid) if inline and self.history.checks_assumptions else None
            state: Conversation | None
            events: tuple[ConversationEvent, ...]
            first: tuple[ConversationEvent, ...]
            outcomes: int | None
            if assumed is not None:  # decided without reading the index; the append checks it
                state, events, first, outcomes = *assumed[:2], (), assumed[2].count
            else:
                state, events, first, outcomes = self._decide(command, cid, inline)
            if not events:
                return HandleResult(command.conversation, (), first, state, None, attempt)
            if state is not None and state.erased and isinstance(getattr(self.mapper, "keys", None), DataKeys):
                refuse_texts(events)  # as the log says, whatever key this process still keeps
            added: list[int | None] = []
            written: ViewsWritten = {}

            def index(
                cursor: object,
                state: Conversation | None = state,
                events: tuple[ConversationEvent, ...] = events,
                assumed: AssumedHistory | None = assumed[2] if assumed is not None else None,
                added: list[int | None] = added,
                written: ViewsWritten = written,
            ) -> None:
                added.append(self.history.write(cid, state, events, curs=cursor, follows=True, assumed=assumed))
                if self.views is not None:
                    written.clear()  # a transaction begins: what an earlier one wrote did not commit
                    self.views.apply_inline(cursor, cid, events, written)

            try:  # the history index is written in the events' own transaction
                recordings = self.save(*events, inline=index) if inline else self.save(*events)
            except ChainBroken as broken:  # the previous event has no hash: nothing of the line is stored
                self._forget(cid)
                raise broken.named(command.conversation) from None
            except AssumptionFailed:
                self._forget(cid)  # decided on a state or an index that moved: read them this time
                if attempt == tries:  # the last try assumed: decide once more, from the index (it assumes
                    tries += 1  # nothing after `_forget`, so this happens once at most)
                continue
            except IntegrityError as conflict:
                self._forget(cid)  # another writer's events: load the log again
                if attempt == self.max_attempts:
                    raise WriteConflict(
                        f'conversation "{command.conversation}" kept changing under this write: '
                        f"{attempt} tries conflicted with other writers; nothing of it was stored, "
                        "send it again"
                    ) from conflict
                time.sleep(backoff(attempt))
                continue
            if not inline:  # a plain library recorder (tests): right after, in a transaction of its own
                self.history.write(cid, state, events)
                self._saved(events)
            elif self.views is not None:
                self.views.inline_committed(written)
            after = project_conversation(state, events)
            self._cache(after)
            if after is not None and outcomes is not None and added and added[-1] is not None:
                self._known.put(cid, (after.version, outcomes + added[-1]))
                self._records.appended(cid, state, events)
            self._snapshot_if_due(state, after)
            position = recordings[-1].notification.id if recordings else None
            return HandleResult(command.conversation, events, events, after, position, attempt)
        raise AssertionError("unreachable")

    @reconnecting
    def handle_batch(self, commands: Sequence[Command]) -> list[HandleResult]:
        """Decides every command of `commands` (each of another conversation) on its
        conversation's state and stores the events of all of them in one transaction, with
        their history index rows, chain rows and view rows: all of them or none. Returns one
        result per command, in order (`HandleResult.repeated` where a command decided nothing).

        Nothing is written before every command has decided: raises BatchRefused (nothing
        stored) with the refusal of each command that refused, BatchConflict (nothing stored)
        when the append conflicted with another writer's or found the index moved (the caller
        stores the commands one by one through `handle` then, which retries). Raises ValueError
        for two commands of one conversation.
        """
        inline = isinstance(self.recorder, ChainedRecorder)
        decided: list[tuple[Conversation | None, tuple[ConversationEvent, ...], tuple[ConversationEvent, ...], int | None]] = []
        refusals: dict[int, ChatrecordError] = {}
        keys = [conversation_uuid(command.conversation) for command in commands]
        if len(set(keys)) != len(keys):
            raise ValueError("handle_batch takes one command per conversation")
        for number, (command, cid) in enumerate(zip(commands, keys, strict=True)):
            try:
                state, events, first, outcomes = self._decide(command, cid, inline)
                if events and state is not None and state.erased and isinstance(getattr(self.mapper, "keys", None), DataKeys):
                    refuse_texts(events)
            except ChatrecordError as refusal:
                refusals[number] = refusal
                continue
            decided.append((state, events, first, outcomes))
        if refusals:
            raise BatchRefused(refusals)
        work = [(cid, state, events) for cid, (state, events, _, _) in zip(keys, decided, strict=True) if events]
        work.sort(key=lambda item: str(item[0]))  # every batch writes its conversations' rows in one order
        added: dict[UUID, int | None] = {}

        written: ViewsWritten = {}
        begun: list[bool] = []

        def index(cursor: object) -> None:
            if not begun:
                written.clear()  # the transaction begins: what an earlier one wrote did not commit
            begun.append(True)
            only = getattr(cursor, "conversation", None)  # a backend that writes each conversation's rows apart
            for cid, state, events in work:
                if only is not None and only != cid:
                    continue
                added[cid] = self.history.write(cid, state, events, curs=cursor, follows=True)
                if self.views is not None:
                    self.views.apply_inline(cursor, cid, events, written)

        recordings: list[Recording[UUID]] = []
        if work:
            every = [event for _, _, events in work for event in events]
            try:
                recordings = self.save(*every, inline=index, batch=True) if inline else self.save(*every)
            except (AssumptionFailed, IntegrityError) as conflict:
                for cid, _, _ in work:
                    self._forget(cid)  # another writer's events: load the logs again
                raise BatchConflict(
                    "another writer appended to a conversation of the batch; nothing of it was stored"
                ) from conflict
            if not inline:  # a plain library recorder (tests): right after, in a transaction of its own
                for cid, state, events in work:
                    self.history.write(cid, state, events)
                    self._saved(events)
            elif self.views is not None:
                self.views.inline_committed(written)
        positions = iter(recordings)
        results = []
        for command, cid, (state, events, first, outcomes) in zip(commands, keys, decided, strict=True):
            if not events:
                results.append(HandleResult(command.conversation, (), first, state, None, 1))
                continue
            position = None
            for _ in events:
                recording = next(positions, None)
                position = recording.notification.id if recording is not None else None
            after = project_conversation(state, events)
            self._cache(after)
            self._records.evict(cid)
            count = added.get(cid)
            if after is not None and outcomes is not None and count is not None:
                self._known.put(cid, (after.version, outcomes + count))
            self._snapshot_if_due(state, after)
            results.append(HandleResult(command.conversation, events, events, after, position, 1))
        return results

    def _assume(self, command: Command, cid: UUID) -> tuple[Conversation, tuple[ConversationEvent, ...], AssumedHistory] | None:
        """Lets `command` decide on the cached state of `cid` and an `AssumedHistory` at its
        version, without reading the index: returns the state, the events and the history
        (whose assumptions the append checks), or None when the state or its card outcome
        count is not known here, or the command asks what the assumptions cannot answer,
        refuses, or decides nothing (then the index is read and the command decides again)."""
        cache = self.repository.cache
        known = self._known.get(cid)
        if cache is None or known is None:
            return None
        try:
            state = cast("Conversation | None", cache.get(cid))  # the store's cache holds Conversations
        except KeyError:
            return None
        if state is None or state.version != known[0]:
            return None
        heads = getattr(self.recorder, "chain_heads", None)
        tip = heads.get(cid) if heads is not None else None
        if tip is None or tip[0] != state.version:
            return None  # the hash of the last event names the history the writer means
        records, messages, floor = self._records.at(cid, known[0])
        history = AssumedHistory(
            known[0],
            known[1],
            getattr(command, "new_segments", ()),
            tip=tip[1],
            known=records,
            known_messages=messages,
            known_from=floor,
        )
        try:
            events = tuple(command.decide(state, history))
        except (NotKnown, ChatrecordError):
            return None
        return (state, events, history) if events else None

    def _decide(
        self, command: Command, cid: UUID, inline: bool
    ) -> tuple[Conversation | None, tuple[ConversationEvent, ...], tuple[ConversationEvent, ...], int | None]:
        """Loads the conversation and lets `command` decide, its lookups in one read transaction;
        returns the state, the events decided, (when none) the events of a first result and
        the index's card outcome count where an append can check an assumed index (else None).
        A history index behind the log (a store of the previous version) is indexed anew first."""
        state: Conversation | None = None
        loaded = False
        while True:
            with self.history.reading(cid) as history:
                prefetch = getattr(history, "prefetch", None)
                if prefetch is not None:
                    prefetch(*(_text(getattr(command, name, None)) for name in ("digest", "segment", "run")))
                prefetch_many, lookups = getattr(history, "prefetch_many", None), getattr(command, "lookups", None)
                if prefetch_many is not None and lookups is not None:
                    prefetch_many(*lookups())  # a command of many lines: their rows in a statement or two
                indexed = history.version
                if not loaded:
                    state, loaded = self._cached(cid, indexed, getattr(history, "tip", None)) if inline else (None, False)
                if loaded and (state is None or indexed >= state.version):
                    events = tuple(command.decide(state, history))
                    first = () if events else self._first_result(command, state, history)
                    outcomes = history.outcomes() if self.history.checks_assumptions else None
                    return state, events, first, outcomes
            if not loaded:  # outside the read transaction: loading takes a connection of its own
                state, loaded = self.get(command.conversation), True
            elif state is not None:  # indexed < state.version
                self.history.write(state.id, None, self.events.get(state.id, lte=state.version), rebuild=True)

    def _cached(self, cid: UUID, indexed: int, tip: bytes | None = None) -> tuple[Conversation | None, bool]:
        """Returns the cached state of conversation `cid` and True when it is current: its
        version is `indexed`, the history index's version, which the events' own transaction
        writes (so no read of the log is needed), and, where the store keeps a hash chain, the
        hash this process keeps of its last event is `tip`, the chain's at that version (the
        same history, not just as long). Returns (None, False) otherwise, after dropping what
        this process keeps of `cid` when the hashes differ."""
        cache = self.repository.cache
        heads = getattr(self.recorder, "chain_heads", None)
        if heads is not None:
            kept = heads.get(cid)
            if kept is None or kept[0] != indexed or kept[1] != tip:
                if kept is not None and kept[0] == indexed:
                    self._forget(cid)  # another history of the same length: restored, failed over
                return None, False
        if indexed and cache is not None:
            try:
                cached = cast("Conversation | None", cache.get(cid))  # the store's cache holds Conversations
            except KeyError:
                return None, False
            if cached is not None and cached.version == indexed:
                return cached, True
        return None, False

    def _forget(self, cid: UUID) -> None:
        """Drops what this process keeps of a conversation (its cached state, card outcome
        count, last hash and view head) after another writer's append came first or the index
        was not as assumed: the log may even hold another history of the same length (a
        database restored or failed over under a running process), so nothing kept is trusted
        by its version alone."""
        self._known.evict(cid)
        self._records.evict(cid)
        heads = getattr(self.recorder, "chain_heads", None)
        if heads is not None:
            heads.forget(cid)
        if self.views is not None:
            self.views.forget(cid)
        if self.repository.cache is not None:
            with suppress(KeyError):
                self.repository.cache.get(cid, evict=True)

    def _saved(self, events: Sequence[ConversationEvent]) -> None:
        """Hands the saved events to the views (`StoreViews.apply`, right after). A
        failure there is logged, not raised: the events are stored, and the next read of the
        conversation applies them again from its log."""
        if self.views is None:
            return
        try:
            self.views.apply(events[0].originator_id, events)
        except Exception as error:  # noqa: BLE001 - the write stands; reads catch up
            logging.getLogger("chatrecord").warning(
                "chatrecord: the read models of %s were not updated (%s); the next read catches up",
                events[0].originator_id,
                error,
            )

    def _snapshot_if_due(self, before: Conversation | None, after: Conversation | None) -> None:
        old = before.version if before else 0
        if after is not None and after.version // self.snapshot_interval > old // self.snapshot_interval:
            assert self.snapshots is not None
            with suppress(IntegrityError):  # a snapshot of this version exists already
                self.snapshots.put([ConversationSnapshot.take(after)])

    def _first_result(self, command: Command, state: Conversation | None, history: History) -> tuple[ConversationEvent, ...]:
        if state is None:
            return ()
        digest = getattr(command, "digest", None)
        versions = history.source(digest) if digest else None
        if versions is not None:
            return tuple(self.events.get(state.id, gt=versions[0] - 1, lte=versions[1]))
        segment = getattr(command, "segment", None)
        version = recorded_segment(history, segment) if isinstance(segment, str) else None
        if version is None:
            return ()
        return tuple(self.events.get(state.id, gt=version - 1, lte=version))

    # ------------------------------------------------------------ queries

    def holds(self, conversation: UUID) -> bool:
        """Returns True when this process holds the state of `conversation` (a UUID) in its
        aggregate cache, which it does only after loading or appending to it: the store then
        holds the conversation (its log is never shortened), and no read is needed to say so.
        False says nothing (the caller reads the log)."""
        cache = self.repository.cache
        if cache is None:
            return False
        try:
            return cache.get(conversation) is not None
        except KeyError:
            return False

    def get(self, conversation: str, version: int | None = None) -> Conversation | None:
        """Returns the conversation's state (at `version` if given), or None if it never started."""
        try:
            state = self.repository.get(conversation_uuid(conversation), version=version, projector_func=project_conversation)
        except AggregateNotFoundError:
            return None
        if version is None:
            self._cache(state)
        return state

    def _cache(self, state: Conversation | None) -> None:
        """Keeps the cached state current: the library's fast-forward returns a new immutable
        state but leaves the old one in its cache, which would be folded forward again."""
        if self.repository.cache is not None and state is not None:
            self.repository.cache.put(state.id, state)

    def conversation_id(self, originator_id: UUID | str) -> str:
        """Returns a conversation's id as its first event (`ConversationStarted`) stores it,
        which `chatrecord verify` prints; its UUID (a string) when that event is missing or
        cannot be read back (a damaged log)."""
        key = originator_uuid(originator_id)
        try:
            first = next(iter(self.events.get(key, lte=1)), None)
        except ChatrecordError:
            return str(key)
        return str(first.conversation) if isinstance(first, ConversationStarted) else str(key)

    def conversation_ids(self) -> list[str]:
        """Returns the id of every stored conversation, in the order they were started."""
        topics: Sequence[str] = (get_topic(ConversationStarted),)
        ids: list[str] = []
        start: int | None = None
        while True:
            page = self.recorder.select_notifications(start, 500, topics=topics, inclusive_of_start=False)
            ids.extend(self.mapper.to_domain_event(n).conversation for n in page)
            if len(page) < 500:
                return ids
            start = page[-1].id

    def max_notification_id(self) -> int:
        """Returns the position of the newest stored event, 0 when the store is empty."""
        return self.recorder.max_notification_id() or 0


def _text(value: object) -> str | None:
    """Returns `value` when it is a string (a command's digest, segment or run id), else None."""
    return value if isinstance(value, str) else None
