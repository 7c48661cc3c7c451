"""How a ConversationStore decides a command (`Decider`). On the state and index kept from its last
append (`assume`), or as read in one transaction (`decide`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast
from uuid import UUID

from eventsourcing.application import Repository
from eventsourcing.persistence import ApplicationRecorder

from adapters.store.chain import ChainBroken, ChainedRecorder
from adapters.store.chain_heads import ChainHeadCache
from adapters.store.commands import Command, KeyedLines
from adapters.store.conversation_log import ConversationLog
from adapters.store.known_conversations import KnownConversations
from adapters.store.ports import HistoryIndex
from domain.conversation import Conversation, History, recorded_segment
from domain.errors import ChatrecordError
from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, NotKnown


def _cut(conversation: str, cid: UUID, ends: int, indexed: int) -> ChainBroken:
    """Returns the refusal of an append whose newest events were removed by hand with their links. Its
    history index was at version `indexed`; the log ended at `ends`."""
    return ChainBroken(
        f'conversation "{conversation}": the log ends at version {ends}, but its history index was written at version '
        f"{indexed}: the newest events were removed from the log; nothing was appended; run: chatrecord verify "
        "--against heads kept earlier",
        cid,
        ends + 1,
        "cut_off",
    )


class Decider:
    """Decides a store's commands, with the first result of a repeat. It decides on the state and index
    kept from the last append (`assume`), or as read (`decide`). It is built from the library's
    `repository`, the `recorder`, the history index, the log (`events`), what the store keeps
    (`known`) and `load`."""

    def __init__(
        self,
        *,
        repository: Repository[UUID],
        recorder: ApplicationRecorder,
        chain_heads: ChainHeadCache | None,
        history: HistoryIndex,
        events: ConversationLog,
        known: KnownConversations,
        load: Callable[[str], Conversation | None],
    ) -> None:
        self.repository, self.recorder, self.chain_heads = repository, recorder, chain_heads
        self.history, self.events, self.known, self.load = history, events, known, load

    def assume(self, command: Command, cid: UUID) -> tuple[Conversation, tuple[ConversationEvent, ...], AssumedHistory] | None:
        """Lets `command` decide on the cached state of `cid` and an `AssumedHistory`, without reading.
        Returns the state, the events and the history, whose assumptions the append checks. Returns
        None when the state or outcome count is unknown, or the command asks more, refuses or
        decides nothing. Then the index is read and the command decides again."""
        cache = self.repository.cache
        known = self.known.counts(cid)
        if cache is None or known is None:
            return None
        try:
            state = cast("Conversation | None", cache.get(cid))  # the store's cache holds Conversations
        except KeyError:
            return None
        if state is None or state.version != known[0]:
            return None
        heads = self.chain_heads
        tip = heads.get(cid) if heads is not None else None
        if tip is None or tip[0] != state.version:
            return None  # the hash of the last event names the history the writer means
        records, messages, floor = self.known.records.at(cid, known[0])
        history = AssumedHistory(
            known[0],
            known[1],
            command.lookups().new_segments,
            tip=tip[1],
            known=records,
            known_messages=messages,
            known_from=floor,
        )
        try:
            events = tuple(command.decide(state, history))
        except (NotKnown, ChatrecordError):
            return None
        indexed = command.indexed if isinstance(command, KeyedLines) else None  # its own index writes
        history.decided = indexed if indexed is not None and indexed.base is history else None
        return (state, events, history) if events else None

    def decide(
        self, command: Command, cid: UUID, inline: bool
    ) -> tuple[Conversation | None, tuple[ConversationEvent, ...], tuple[ConversationEvent, ...], int | None]:
        """Loads the conversation and lets `command` decide, its lookups in one read transaction.
        Returns the state, the events, a first result's events (when none) and the index's outcome
        count (or None). An index behind the log is indexed anew first."""
        state: Conversation | None = None
        loaded = False
        lookups = command.lookups()
        while True:
            with self.history.reading(cid) as history:
                history.prefetch(lookups.digest, lookups.segment, lookups.run, lookups.legacy)
                if lookups.many is not None:
                    history.prefetch_many(*lookups.many)  # a command of many lines: their rows in a statement or two
                indexed = history.version
                if not loaded:
                    state, loaded = self._cached(cid, indexed, history.tip) if inline else (None, False)
                ends = state.version if state is not None else 0
                suspect = loaded and inline and indexed > ends  # the index saw a version the log lacks?
                if loaded and not suspect and (state is None or indexed >= state.version):
                    events = tuple(command.decide(state, history))
                    first = () if events else self._first_result(command, state, history)
                    outcomes = history.outcomes() if self.history.checks_assumptions else None
                    return state, events, first, outcomes
            if suspect:  # the log read after the index: it holds what the index saw, unless it was cut
                if not self.recorder.select_events(cid, gt=ends, limit=1):
                    gone = self.recorder.dangling(cid, ends + 1) if isinstance(self.recorder, ChainedRecorder) else None
                    raise _cut(command.conversation, cid, ends, indexed) if gone is None else gone.named(command.conversation)
                loaded = False  # another writer appended since the log was read: read it again
            if not loaded:  # outside the read transaction: loading takes a connection of its own
                state, loaded = self.load(command.conversation), True
            elif state is not None:  # indexed < state.version
                self.history.write(state.id, None, list(self.events.get(state.id, lte=state.version)), rebuild=True)

    def _cached(self, cid: UUID, indexed: int, tip: bytes | None = None) -> tuple[Conversation | None, bool]:
        """Returns the cached state of `cid` and True when it is current; else (None, False). Current:
        its version is `indexed` and, with a chain, its last hash is `tip`. When the hashes differ,
        what this process keeps of `cid` is dropped."""
        cache = self.repository.cache
        heads = self.chain_heads
        if heads is not None:
            kept = heads.get(cid)
            if kept is None or kept[0] != indexed or kept[1] != tip:
                if kept is not None and kept[0] == indexed:
                    self.known.forget(cid)  # another history of the same length: restored, failed over
                return None, False
        if indexed and cache is not None:
            try:
                cached = cast("Conversation | None", cache.get(cid))  # the store's cache holds Conversations
            except KeyError:
                return None, False
            if cached is not None and cached.version == indexed:
                return cached, True
        return None, False

    def _first_result(self, command: Command, state: Conversation | None, history: History) -> tuple[ConversationEvent, ...]:
        if state is None:
            return ()
        lookups = command.lookups()
        versions = history.source(lookups.digest) if lookups.digest else None
        if versions is None and lookups.legacy:  # a line stored before digests were keyed
            versions = history.source(lookups.legacy)
        if versions is not None:
            return tuple(self.events.get(state.id, gt=versions[0] - 1, lte=versions[1]))
        version = recorded_segment(history, lookups.segment) if lookups.segment is not None else None
        if version is None:
            return ()
        return tuple(self.events.get(state.id, gt=version - 1, lte=version))
