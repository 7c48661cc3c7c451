"""The store's queries (`StoreQueries`, which `ConversationStore` extends): a conversation's
state, as loaded or kept in the aggregate cache, its id as stored, every conversation's id, the
newest position."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.utils import get_topic

from adapters.store.conversation_log import ConversationLog
from adapters.store.serialization import PydanticMapper, originator_uuid
from domain.conversation import Conversation, project_conversation
from domain.errors import ChatrecordError
from domain.events import ConversationStarted, conversation_uuid


class StoreQueries(Application[UUID]):
    """The queries of a ConversationStore (an eventsourcing Application): what it reads of its
    logs and its aggregate cache, no write."""

    events: ConversationLog
    mapper: PydanticMapper  # SERIALIZATION_ENV's MAPPER_TOPIC

    def construct_event_store(self) -> ConversationLog:
        return ConversationLog(mapper=self.mapper, recorder=self.recorder)

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
