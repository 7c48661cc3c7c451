"""The views a ConversationStore keeps current as it saves, and what they wrote (`ViewsWritten`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from domain.events import ConversationEvent

ViewsWritten = dict[UUID, Any]
"""What the views wrote in one transaction of the store, by conversation (`StoreViews.apply_inline`
fills it): the store makes one per transaction and hands it back once that has committed."""


class StoreViews(Protocol):
    """The views a ConversationStore keeps current as it saves, given at construction."""

    def apply(self, aggregate_id: UUID, events: Sequence[ConversationEvent]) -> object:
        """Applies `events` just saved, in a transaction of their own."""
        ...

    def apply_inline(self, curs: Any, aggregate_id: UUID, events: Sequence[ConversationEvent], written: ViewsWritten) -> None:
        """Applies `events` in the transaction of `curs`; notes what it wrote in `written`."""
        ...

    def inline_committed(self, written: ViewsWritten) -> None:
        """Called once the transaction whose views wrote `written` has committed."""
        ...

    def forget(self, cid: UUID) -> None:
        """Drops what the views keep of conversation `cid` (the store no longer trusts what it kept)."""
        ...
