"""Erasing a conversation: its texts become unreadable everywhere, its facts stay.

`erase(store, conversation, models)` takes four idempotent steps; a rerun after a kill -9 at any point
finishes the job:
1. record `ConversationErased` once (its `source` marks it);
2. delete its data key (`wrapped_key` NULL, `erased_at` set); its texts read `[erased]`;
3. rewrite its read-model rows from the log (`ReadModels.erase`);
4. scrub the database files (`DataKeys.scrub`: SQLite VACUUM and WAL truncation, PostgreSQL `VACUUM FULL`
  of the key table).

Events and their hash chain are untouched, so `verify` still passes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from adapters.service.data_keys import data_keys, key_kept
from adapters.store.application import ConversationStore
from adapters.store.commands import Lookups
from adapters.store.keys import DataKeys
from adapters.store.serialization import UnreadableEvent
from adapters.views.readmodels import ReadModels
from domain.conversation import ERASURE_SOURCE, Conversation, History, erase_texts
from domain.errors import UnknownConversation, shown_id
from domain.events import ConversationEvent, conversation_uuid


@dataclass(frozen=True)
class EraseTexts:
    """The command that records a conversation's erasure at `at` (ConversationStore.handle)."""

    conversation: str
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    digest: str = ERASURE_SOURCE

    def decide(self, state: Conversation | None, history: History) -> list[ConversationEvent]:
        """Returns [ConversationErased], or [] when it was recorded before."""
        return erase_texts(state, self.at, history=history)

    def lookups(self) -> Lookups:
        """Returns what deciding the erasure looks up: its source, which finds a repeat."""
        return Lookups(digest=self.digest)


@dataclass(frozen=True)
class Erasure:
    """What `erase` did: when the conversation was first erased, whether this call recorded it (False for a
    repeat), its version, and whether a read-model row was rewritten."""

    conversation: str
    at: datetime
    recorded: bool
    version: int
    rewrote_view: bool
    finished: bool = False
    """Whether this call found the erasure recorded by an earlier run whose later steps had not
    all run (its data key not yet deleted: a run killed after its event) and ran them."""
    unreadable: str | None = None
    """Why no erasure event could be recorded: the conversation's log cannot be read back
    (`UnreadableEvent`'s message); its key was deleted and its read-model rows dropped all the
    same, and `version` is the log's (its stored events counted, not read)."""


def erase(store: ConversationStore, conversation: str, models: ReadModels) -> Erasure:
    """Erases the texts of `conversation` (the module's four steps) and returns what it did. `models` are
    the store's read models. Raises UnknownConversation for a conversation the store does not hold.
    Raises NoDataKeys for a store without data keys."""
    keys = data_keys(store)
    try:
        if store.get(conversation) is None:
            raise UnknownConversation(f"no conversation {shown_id(conversation)} in the store; check the id")
        result = store.handle(EraseTexts(conversation))
    except UnreadableEvent:
        # a log whose sealed texts were changed or swapped reads once its key is gone (every text
        # reads as erased): delete it first, then record the erasure; else erase what can be erased
        keys.erase(conversation_uuid(conversation), datetime.now(UTC))
        try:
            result = store.handle(EraseTexts(conversation))
        except UnreadableEvent as unreadable:
            return _erase_unreadable(store, conversation, models, keys, unreadable)
    event = result.events[0] if result.events else None
    at = event.timestamp if event is not None else datetime.now(UTC)
    cid = conversation_uuid(conversation)
    unfinished = result.repeated and key_kept(store, cid)  # an earlier run stopped after its event
    keys.erase(cid, at)
    rewrote = models.erase(conversation)
    keys.scrub()
    version = event.originator_version if event is not None else (result.state.version if result.state else 0)
    return Erasure(conversation, at, not result.repeated, version, rewrote, finished=unfinished)


def _erase_unreadable(
    store: ConversationStore, conversation: str, models: ReadModels, keys: DataKeys, unreadable: UnreadableEvent
) -> Erasure:
    """Erases a conversation whose log cannot be read back. No `ConversationErased` can be decided, but the
    data key is deleted (steps 2 and 4) and its read-model rows dropped."""
    cid = conversation_uuid(conversation)
    at = keys.erased_at(cid) or datetime.now(UTC)
    rewrote = models.erase(conversation)
    keys.scrub()
    version = max((e.originator_version for e in store.recorder.select_events(cid)), default=0)
    return Erasure(conversation, at, False, version, rewrote, unreadable=str(unreadable))
