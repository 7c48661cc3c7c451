"""The store's data keys for the use cases: `data_keys` (raises NoDataKeys without them) and `key_kept` (a
conversation's key is not deleted yet)."""

from __future__ import annotations

from uuid import UUID

from adapters.store.application import ConversationStore
from adapters.store.keys import DataKeys
from domain.errors import ChatrecordError


class NoDataKeys(ChatrecordError):
    """Raised when erasing or changing keys on a store without data keys (opened on the library's own
    persistence module)."""


def data_keys(store: ConversationStore) -> DataKeys:
    """Returns the store's data keys. Raises NoDataKeys for a store that keeps none."""
    keys = store.data_keys
    if keys is None:
        raise NoDataKeys(
            "this store keeps no data keys (it was opened on the library's own persistence module); "
            "open it with adapters.bootstrap.open_store"
        )
    return keys


def key_kept(store: ConversationStore, cid: UUID) -> bool:
    """Says whether conversation `cid`'s data key is kept, so its texts still read. With an erasure
    recorded, that erasure has not finished. False on a store without data keys."""
    keys = store.data_keys
    return keys is not None and keys.erased_at(cid) is None
