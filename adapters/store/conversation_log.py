"""The store's event store, callable for one conversation's full log (`ConversationLog`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast
from uuid import UUID

from eventsourcing.persistence import EventStore

from adapters.store.keys import DataKeys
from domain.events import ConversationErased, ConversationEvent, conversation_uuid


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
        its texts read `[erased]` at once, whichever process erased them. So is a part of the log
        read `up_to_version`, which may end before the erasure: where this process keeps a key
        that opens the texts, the key's row says whether it was erased (one lookup)."""
        uuid = conversation_uuid(conversation)
        events = list(self.get(uuid, lte=up_to_version))
        keys = getattr(self.mapper, "keys", None)
        if not isinstance(keys, DataKeys):
            return events
        erased = any(isinstance(e, ConversationErased) for e in events) or (
            up_to_version is not None and keys.holds_key(uuid) and keys.erased_at(uuid) is not None
        )
        if erased and keys.forget_erased(uuid):
            events = list(self.get(uuid, lte=up_to_version))
        return events
