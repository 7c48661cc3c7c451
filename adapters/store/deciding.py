"""How a ConversationStore decides a command (`Decider`, which the store builds and asks): on
the state and the history index it keeps from its last append (`assume`), or as read in one
transaction (`decide`, `_cached`), and the first result of a repeat."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast
from uuid import UUID

from eventsourcing.application import Repository
from eventsourcing.persistence import ApplicationRecorder

from adapters.store.chain import ChainBroken, ChainedRecorder
from adapters.store.chain_heads import ChainHeadCache
from adapters.store.commands import Command
from adapters.store.conversation_log import ConversationLog
from adapters.store.known_conversations import KnownConversations
from adapters.store.ports import HistoryIndex
from domain.conversation import Conversation, History, recorded_segment
from domain.errors import ChatrecordError
from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, NotKnown


def _cut(conversation: str, cid: UUID, ends: int, indexed: int) -> ChainBroken:
    """The refusal of an append to a conversation whose newest events were removed from the log
    by hand with their links (with a link left: `ChainedRecorder.dangling`): its history index, written in the events' own transactions,
    was at version `indexed` when the log read after it ended at `ends`."""
    return ChainBroken(
        f'conversation "{conversation}": the log ends at version {ends}, but its history index was written at version '
        f"{indexed}: the newest events were removed from the log; nothing was appended; run: chatrecord verify "
        "--against heads kept earlier",
        cid,
        ends + 1,
        "cut_off",
    )


class Decider:
    """Decides a store's commands: on the state and the history index the store keeps from its
    last append (`assume`), or as read in one transaction (`decide`), with the first result of a
    repeat. Built by `ConversationStore` with what it reads: the library's `repository` (its
    aggregate cache), the `recorder` (`chain_heads`: the hashes it keeps, None where it keeps
    none), the history index, the log (`events`), what the store keeps of each conversation
    (`known`) and `load`, which loads a conversation's state."""

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
        """Lets `command` decide on the cached state of `cid` and an `AssumedHistory` at its
        version, without reading the index: returns the state, the events and the history
        (whose assumptions the append checks), or None when the state or its card outcome
        count is not known here, or the command asks what the assumptions cannot answer,
        refuses, or decides nothing (then the index is read and the command decides again)."""
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
        return (state, events, history) if events else None

    def decide(
        self, command: Command, cid: UUID, inline: bool
    ) -> tuple[Conversation | None, tuple[ConversationEvent, ...], tuple[ConversationEvent, ...], int | None]:
        """Loads the conversation and lets `command` decide, its lookups in one read transaction;
        returns the state, the events decided, (when none) the events of a first result and
        the index's card outcome count where an append can check an assumed index (else None).
        A history index behind the log (a store of the previous version) is indexed anew first."""
        state: Conversation | None = None
        loaded = False
        lookups = command.lookups()
        while True:
            with self.history.reading(cid) as history:
                history.prefetch(lookups.digest, lookups.segment, lookups.run)
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
        """Returns the cached state of conversation `cid` and True when it is current: its
        version is `indexed`, the history index's version, which the events' own transaction
        writes (so no read of the log is needed), and, where the store keeps a hash chain, the
        hash this process keeps of its last event is `tip`, the chain's at that version (the
        same history, not just as long). Returns (None, False) otherwise, after dropping what
        this process keeps of `cid` when the hashes differ."""
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
        if versions is not None:
            return tuple(self.events.get(state.id, gt=versions[0] - 1, lte=versions[1]))
        version = recorded_segment(history, lookups.segment) if lookups.segment is not None else None
        if version is None:
            return ()
        return tuple(self.events.get(state.id, gt=version - 1, lte=version))
