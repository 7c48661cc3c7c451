"""A conversation's log read forward a chunk at a time, for a fold that may stop early (the
rule sets compared read the turns of one page, not the whole log)."""

from __future__ import annotations

from collections.abc import Iterator

from adapters.store.application import ConversationStore
from domain.events import ConversationEvent, conversation_uuid

CHUNK = 500
"""Events read per step."""


def forward(store: ConversationStore, key: str) -> Iterator[ConversationEvent]:
    """Yields the events of conversation `key` (stored id) in version order, reading `CHUNK`
    at a time, so a consumer that stops early reads no further."""
    uuid, last = conversation_uuid(key), 0
    while True:
        chunk = list(store.events.get(uuid, gt=last, limit=CHUNK))
        yield from chunk
        if len(chunk) < CHUNK:
            return
        last = chunk[-1].originator_version
