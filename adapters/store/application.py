"""The conversation store: an eventsourcing Application over the Conversation aggregate. `handle` loads
a conversation, lets the command decide and saves the events. The composition root
(`adapters.bootstrap`) hands in the backend: the library's factory, its application recorder and the
store's ports (`adapters.store.ports.StorePorts`)."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.persistence import ApplicationRecorder, InfrastructureFactory, IntegrityError, Recording
from eventsourcing.utils import Environment, get_topic

from adapters.store.chain import ChainBroken, ChainedRecorder, InlineWrites
from adapters.store.chain_key import open_chain
from adapters.store.commands import BatchConflict, BatchRefused, Command, HandleResult, KeyedLines
from adapters.store.conversation_log import ConversationLog
from adapters.store.crypto import MissingDataKey, refuse_texts
from adapters.store.deciding import Decider
from adapters.store.known_conversations import KnownConversations
from adapters.store.known_records import IndexPuts
from adapters.store.line_digests import digest_keyer
from adapters.store.ports import AssumptionFailed, HistoryIndex, IdempotencyKeys, StorePorts
from adapters.store.serialization import SERIALIZATION_ENV, PydanticMapper, originator_uuid
from adapters.store.store_views import StoreViews, ViewsWritten
from adapters.store.write_retry import WriteConflict, backoff, reconnecting
from domain.conversation import Conversation, ConversationSnapshot, project_conversation
from domain.errors import ChatrecordError
from domain.events import ConversationEvent, ConversationStarted, conversation_uuid
from domain.history_index import AssumedHistory

DEFAULT_SNAPSHOT_INTERVAL = 100
DEFAULT_MAX_ATTEMPTS = 20


class ConversationStore(Application[UUID]):
    """Stores conversations as event logs and loads them through snapshots.

    Its `Decider` decides commands; it appends the events and keeps what follows (`known`). Env keys
    besides the library's:
    - `SNAPSHOT_INTERVAL`: versions between snapshots, default 100.
    - `HANDLE_MAX_ATTEMPTS`: tries of a conflicting command, default 20 (`backoff`).
    - `WRITE_RETRY_SECONDS`: how long a write with a lost connection tries again, default 0
      (`reconnecting`).
    - The library's `AGGREGATE_CACHE_MAXSIZE`: conversations cached, default 256; "" turns it off."""

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

    @classmethod
    def environment(cls, env: Mapping[str, str] | None = None) -> Environment:
        """Returns the store's settings: the class's `env`, then os.environ, then `env`, each winning
        over the one before."""
        settings = dict(cls.env)
        if cls.is_snapshotting_enabled:
            settings["IS_SNAPSHOTTING_ENABLED"] = "y"
        settings.update(os.environ)
        settings.update(env or {})
        return Environment(cls.name, settings)

    def __init__(
        self,
        env: Environment,
        *,
        factory: InfrastructureFactory[Any],
        recorder: ApplicationRecorder,
        ports: StorePorts,
        views: Callable[[ConversationStore], StoreViews] | None = None,
        reopen: Callable[[Mapping[str, str]], ConversationStore] | None = None,
    ) -> None:
        """Opens the store on `factory`, its application recorder `recorder` and the backend's `ports`.

        `views` builds the views the store keeps current as it saves; None keeps none. `reopen`
        builds another store on the same settings (`reopened`). Raises BadMasterKey, before anything
        is stored, when:
        - CHATRECORD_MASTER_KEY does not hold the store's master key;
        - it is set for a store that keeps data keys unwrapped (`DataKeys.check_master`);
        - the hash chain is keyed with another key or none (`chain_key.open_chain`).
          `MASTER_KEY_UNBOUND=allow` lets the key commands open such a store to bind it."""
        self._made = (factory, recorder)
        self._reopen = reopen
        self.history: HistoryIndex = ports.history
        self._idempotency_keys = ports.idempotency_keys
        self.connection_lost = ports.connection_lost
        """Says whether an error is a lost connection, as the backend words its driver's (`reconnecting`)."""
        super().__init__(env)
        self.data_keys = self.events.data_keys
        """The data keys that seal the free texts, as the backend's factory gave them to the mapper;
        None: a store that keeps none (on the library's own persistence module)."""
        unbound = self.env.get("MASTER_KEY_UNBOUND", "") == "allow"
        try:
            if self.data_keys is not None:
                self.data_keys.check_master(unbound=unbound)
            if isinstance(self.recorder, ChainedRecorder):  # keyed with the master key's chain key, or not
                open_chain(self.recorder, self.data_keys.master if self.data_keys is not None else None, unbound=unbound)
        except BaseException:
            self.close()  # the refused store's connections
            raise
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
        self.chain_heads = self.recorder.chain_heads if isinstance(self.recorder, ChainedRecorder) else None
        """The hashes the recorder keeps of each conversation's newest event, None where it keeps none."""
        forgets: list[Callable[[UUID], None]] = [self.chain_heads.forget] if self.chain_heads is not None else []
        if self.views is not None:
            forgets.append(self.views.forget)
        self.known = KnownConversations([*forgets, self._uncache])
        """What this process keeps of each conversation between its commands, with one `forget`
        for all of it: the index's counts and newest rows as its last append left them (`assume`),
        the chain's last hash, the views' head and the cached state."""
        self.decider = Decider(
            repository=self.repository,
            recorder=self.recorder,
            chain_heads=self.chain_heads,
            history=self.history,
            events=self.events,
            known=self.known,
            load=self.get,
        )
        """Decides the commands `handle` and `handle_batch` append."""

    def reopened(self) -> ConversationStore:
        """Returns a new store on this one's settings, with connections of its own and no views
        (a forked process's). Raises TypeError for a store built without `reopen`."""
        if self._reopen is None:
            raise TypeError("this store cannot be reopened; build it with adapters.bootstrap")
        return self._reopen(self.env)

    def construct_event_store(self) -> ConversationLog:
        return ConversationLog(mapper=self.mapper, recorder=self.recorder)

    def holds(self, conversation: UUID) -> bool:
        """Returns True when this process's aggregate cache holds `conversation` (a UUID). Then the
        store holds it too, with no read. False says nothing; the caller reads the log."""
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
        """Keeps the cached state current; the library's fast-forward would leave the old one cached."""
        if self.repository.cache is not None and state is not None:
            self.repository.cache.put(state.id, state)

    def conversation_id(self, originator_id: UUID | str) -> str:
        """Returns a conversation's id as its `ConversationStarted` stores it. Returns its UUID as a
        string when that event is missing or unreadable."""
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

    def construct_env(self, name: str, env: Mapping[str, str] | None = None) -> Environment:
        return env if isinstance(env, Environment) else self.environment(env)

    def construct_factory(self, env: Environment) -> InfrastructureFactory[Any]:
        return self._made[0]

    def construct_recorder(self) -> ApplicationRecorder:
        return self._made[1]

    @functools.cached_property
    def idempotency_keys(self) -> IdempotencyKeys:
        """The kept idempotency keys in this store's database; their table is made on first use."""
        self._idempotency_keys.create()
        return self._idempotency_keys

    # ------------------------------------------------------------ commands

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """The library's `save`, without its per-event protocol isinstance check."""
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

        A conflicting append is retried after a jittered, growing wait (`backoff`), up to
        `max_attempts` tries. A try whose assumptions failed (`Decider.assume`) is followed at once
        by one decided from the index. Raises the domain's ChatrecordError when the command breaks
        an invariant; nothing is stored. Raises WriteConflict when every try conflicts; nothing is
        stored. Raises ChainBroken at once where the chain is broken at the append
        (`ChainedRecorder.dangling`)."""
        inline = isinstance(self.recorder, ChainedRecorder)
        cid = conversation_uuid(command.conversation)
        self._key_digests(command, cid)
        tries, attempt = self.max_attempts, 0
        while attempt < tries:
            attempt += 1
            assumed = self.decider.assume(command, cid) if inline and self.history.checks_assumptions else None
            state: Conversation | None
            events: tuple[ConversationEvent, ...]
            first: tuple[ConversationEvent, ...]
            outcomes: int | None
            if assumed is not None:  # decided without reading the index; the append checks it
                state, events, first, outcomes = *assumed[:2], (), assumed[2].count
            else:
                state, events, first, outcomes = self.decider.decide(command, cid, inline)
            if not events:
                return HandleResult(command.conversation, (), first, state, None, attempt)
            self._refuse_erased(state, events)
            added: list[int | None] = []
            written: ViewsWritten = {}
            puts: list[IndexPuts] = []

            def index(
                cursor: object,
                state: Conversation | None = state,
                events: tuple[ConversationEvent, ...] = events,
                assumed: AssumedHistory | None = assumed[2] if assumed is not None else None,
                added: list[int | None] = added,
                written: ViewsWritten = written,
                puts: list[IndexPuts] = puts,
            ) -> None:
                puts.clear()  # a transaction begins: what an earlier one put did not commit
                added.append(self.history.write(cid, state, events, curs=cursor, follows=True, assumed=assumed, puts=puts))
                if self.views is not None:
                    written.clear()  # a transaction begins: what an earlier one wrote did not commit
                    self.views.apply_inline(cursor, cid, events, written)

            try:  # the history index is written in the events' own transaction
                recordings = self.save(*events, inline=InlineWrites(index)) if inline else self.save(*events)
            except ChainBroken as broken:  # the previous event has no hash: nothing of the line is stored
                self.known.forget(cid)
                raise broken.named(command.conversation) from None
            except AssumptionFailed:
                self.known.forget(cid)  # decided on a state or an index that moved: read them this time
                if attempt == tries:  # the last try assumed: decide once more, from the index (it assumes
                    tries += 1  # nothing after `forget`, so this happens once at most)
                continue
            except IntegrityError as conflict:
                self.known.forget(cid)  # another writer's events: load the log again
                recorder = self.recorder
                gone = recorder.dangling(cid, events[0].originator_version) if isinstance(recorder, ChainedRecorder) else None
                if gone is not None:  # no retry gets past an event deleted by hand
                    raise gone.named(command.conversation) from None
                if attempt == self.max_attempts:
                    raise WriteConflict(
                        f'conversation "{command.conversation}" kept changing under this write: '
                        f"{attempt} tries conflicted with other writers; nothing of it was stored, "
                        "send it again"
                    ) from conflict
                time.sleep(backoff(attempt))
                continue
            self._after_save(inline, [(cid, state, events)], written)
            after = self._kept(
                cid,
                state,
                events,
                outcomes,
                added[-1] if added else None,
                puts[-1] if puts else None,
                getattr(command, "folded", None),
            )
            position = recordings[-1].notification.id if recordings else None
            return HandleResult(command.conversation, events, events, after, position, attempt)
        raise AssertionError("unreachable")

    @reconnecting
    def handle_batch(self, commands: Sequence[Command]) -> list[HandleResult]:
        """Decides each command (each of another conversation) and stores all their events in one
        transaction.

        Index, chain and view rows go with them: all or none. Returns one result per command, in
        order; `HandleResult.repeated` where one decided nothing. Nothing is written before every
        command has decided. Raises BatchRefused, storing nothing, with each refusing command's
        error. Raises BatchConflict, storing nothing, on a conflict or a moved index; the caller
        then uses `handle`. Raises ValueError for two commands of one conversation."""
        inline = isinstance(self.recorder, ChainedRecorder)
        decided: list[tuple[Conversation | None, tuple[ConversationEvent, ...], tuple[ConversationEvent, ...], int | None]] = []
        refusals: dict[int, ChatrecordError] = {}
        keys = [conversation_uuid(command.conversation) for command in commands]
        if len(set(keys)) != len(keys):
            raise ValueError("handle_batch takes one command per conversation")
        for number, (command, cid) in enumerate(zip(commands, keys, strict=True)):
            try:
                self._key_digests(command, cid)
                state, events, first, outcomes = self.decider.decide(command, cid, inline)
                self._refuse_erased(state, events)
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
                recordings = self.save(*every, inline=InlineWrites(index, batch=True)) if inline else self.save(*every)
            except (AssumptionFailed, IntegrityError) as conflict:
                for cid, _, _ in work:
                    self.known.forget(cid)  # another writer's events: load the logs again
                raise BatchConflict(
                    "another writer appended to a conversation of the batch; nothing of it was stored"
                ) from conflict
            self._after_save(inline, work, written)
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
            after = self._kept(
                cid, state, events, outcomes, added.get(cid), None, getattr(command, "folded", None), followed=False
            )
            results.append(HandleResult(command.conversation, events, events, after, position, 1))
        return results

    # ------------------------------------------------------------ what `handle` and `handle_batch` share

    def _key_digests(self, command: Command, cid: UUID) -> None:
        """Keys the line digests of a command of lines (`KeyedLines`) with the conversation's data key,
        made here on its first line (`adapters.store.line_digests`). Plain where the store keeps no data
        keys or the key was erased."""
        if isinstance(command, KeyedLines):
            command.key_digests(digest_keyer(self._digest_data_key(command, cid)))

    def _digest_data_key(self, command: KeyedLines, cid: UUID) -> bytes | None:
        """Returns the data key that keys the command's digests, made here for a conversation that
        starts with the command or has stored events. A line for a conversation that neither has
        (the domain refuses it) makes no key: nothing is stored from a refused line."""
        keys = self.data_keys
        if keys is None:
            return None
        try:
            return keys.key(cid, create=False)
        except MissingDataKey:
            if command.starts or next(iter(self.events.get(cid, desc=True, limit=1)), None) is not None:
                return keys.key(cid, create=True)
            return None

    def _refuse_erased(self, state: Conversation | None, events: Sequence[ConversationEvent]) -> None:
        """Raises TextsErased for texts of `events` when the log says the conversation was erased."""
        if events and state is not None and state.erased and self.data_keys is not None:
            refuse_texts(events)

    def _after_save(
        self, inline: bool, work: Sequence[tuple[UUID, Conversation | None, Sequence[ConversationEvent]]], written: ViewsWritten
    ) -> None:
        """Ends a save of `work` (conversation, state before, events). On a plain library recorder
        (`inline` False: tests) index and views are written now, each alone. Else the views take
        what the save's transaction wrote (`written`)."""
        if not inline:
            for cid, state, events in work:
                self.history.write(cid, state, list(events))
                self._saved(events)
        elif self.views is not None:
            self.views.inline_committed(written)

    def _kept(
        self,
        cid: UUID,
        state: Conversation | None,
        events: Sequence[ConversationEvent],
        outcomes: int | None,
        added: int | None,
        puts: IndexPuts | None = None,
        folded: tuple[ConversationEvent, Conversation | None] | None = None,
        *,
        followed: bool = True,
    ) -> Conversation | None:
        """Returns the state after `events` and keeps what follows of them. `folded`: the command's own
        fold of them, taken where its last event is theirs. It caches the state and the index's counts
        (not where `outcomes` or `added` is None). Where `followed`, it keeps the rows `puts` (a
        batch's are dropped). It snapshots when due."""
        after = folded[1] if folded is not None and events and folded[0] is events[-1] else project_conversation(state, events)
        self._cache(after)
        counts = (after.version, outcomes + added) if after is not None and outcomes is not None and added is not None else None
        if not followed:
            self.known.counted(cid, counts)
        elif counts is not None:
            self.known.appended(cid, state, events, counts, puts)
        self._snapshot_if_due(state, after)
        return after

    def _uncache(self, cid: UUID) -> None:
        """Drops the cached state of `cid`; `known.forget` calls it."""
        if self.repository.cache is not None:
            with suppress(KeyError):
                self.repository.cache.get(cid, evict=True)

    def _saved(self, events: Sequence[ConversationEvent]) -> None:
        """Hands the saved events to the views (`StoreViews.apply`). A failure is logged, not raised:
        the next read applies them again from the log."""
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
