"""The views a ConversationStore keeps current as it saves (`StoreViews`, given to it at
construction), and what they wrote in one of its transactions (`ViewsWritten`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
from uuid import UUID

from domain.events import ConversationEvent

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
