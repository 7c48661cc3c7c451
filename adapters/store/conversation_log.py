"""The store's event store, callable for one conversation's full log (`ConversationLog`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import cast
from uuid import UUID

from eventsourcing.persistence import AggregateRecorder, EventStore, Mapper, StoredEvent

from adapters.store.keys import DataKeys
from adapters.store.serialization import PydanticMapper
from domain.events import ConversationErased, ConversationEvent, conversation_uuid


class ConversationLog(EventStore[UUID]):
    """The library's event store, callable for one conversation's full log. `data_keys`: the keys
    sealing the free texts, as the mapper has them; None where none are kept."""

    def __init__(self, mapper: Mapper[UUID], recorder: AggregateRecorder) -> None:
        super().__init__(mapper, recorder)
        keys = mapper.keys if isinstance(mapper, PydanticMapper) else None
        self.data_keys = keys if isinstance(keys, DataKeys) else None

    def get(
        self, originator_id: UUID, *, gt: int | None = None, lte: int | None = None, desc: bool = False, limit: int | None = None
    ) -> Iterator[ConversationEvent]:
        """The library's `EventStore.get`, typed: the store's mapper reads its own event classes."""
        return cast("Iterator[ConversationEvent]", super().get(originator_id, gt=gt, lte=lte, desc=desc, limit=limit))

    def __call__(self, conversation: str, up_to_version: int | None = None) -> list[ConversationEvent]:
        """Returns the events of `conversation` in order, up to `up_to_version` if given. Returns []
        for a conversation never started. A log holding its erasure reads its texts as `[erased]`,
        whatever key this process kept. A part of the log read `up_to_version` checks the key's row
        instead (one lookup)."""
        uuid = conversation_uuid(conversation)
        return self.mapped(uuid, self.recorder.select_events(uuid, lte=up_to_version), up_to_version)

    def mapped(self, uuid: UUID, stored: Sequence[StoredEvent], up_to_version: int | None = None) -> list[ConversationEvent]:
        """Returns the domain events of `stored`, conversation `uuid`'s stored events, as `__call__`
        returns them. For a caller that needs the stored events too (`replay --at` checks their
        chain)."""

        def mapped_all() -> list[ConversationEvent]:
            return cast("list[ConversationEvent]", [self.mapper.to_domain_event(event) for event in stored])

        events = mapped_all()
        keys = self.data_keys
        if keys is None:
            return events
        erased = any(isinstance(e, ConversationErased) for e in events) or (
            up_to_version is not None and keys.holds_key(uuid) and keys.erased_at(uuid) is not None
        )
        return mapped_all() if erased and keys.forget_erased(uuid) else events
