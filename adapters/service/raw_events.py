"""A conversation's events as the store holds them, a range of versions at a time, each with
its chain link: the raw event view of the timeline page.

The state is shown as stored: free texts are ciphertext there (`adapters.store.crypto`) and an
erased conversation's stay as erasing left them, so nothing is decrypted here; the events hold
no tool arguments, results or model-step texts (the ingester dropped them).
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder, state_bytes
from domain.events import conversation_uuid

RAW_PAGE = 50
"""Events on one page of the raw event view."""


@dataclass(frozen=True)
class RawEvent:
    """One stored event: its `version`, `topic` and `state` (the stored bytes as UTF-8, invalid
    bytes replaced), its chain `hash` and the hash of the version before (`previous`: the link
    it was computed over; 64 zeros before the first event), both hex; None where the store
    keeps no chain or no hash for it."""

    version: int
    topic: str
    state: str
    hash: str | None
    previous: str | None


@dataclass(frozen=True)
class RawPage:
    """Events `first`…`first + RAW_PAGE - 1` of a conversation (`events`, in order; fewer at
    the log's end), and the log's newest version (`last`)."""

    first: int
    events: tuple[RawEvent, ...]
    last: int


def page_start(version: int) -> int:
    """Returns the first version of the raw page that holds `version` (pages start at 1, 51, …)."""
    return (max(version, 1) - 1) // RAW_PAGE * RAW_PAGE + 1


def raw_page(store: ConversationStore, key: str, first: int) -> RawPage:
    """Returns the page of the raw event view of conversation `key` (stored id) that starts at
    version `first` (see `page_start`): two indexed reads of at most RAW_PAGE + 1 rows each and
    one of the newest event."""
    uuid = conversation_uuid(key)
    recorder = store.recorder
    stored = recorder.select_events(uuid, gt=first - 1, lte=first + RAW_PAGE - 1)
    newest = recorder.select_events(uuid, desc=True, limit=1)
    hashes: dict[int, bytes] = {}
    if isinstance(recorder, ChainedRecorder) and stored:
        hashes = {v: h for _, v, h in recorder.chain_links((uuid, first - 2), uuid, RAW_PAGE + 1)}
        if first - 1 not in hashes and first <= 1:
            hashes[first - 1] = bytes(32)
    events = tuple(
        RawEvent(
            e.originator_version,
            e.topic,
            state_bytes(e.state).decode("utf-8", "replace"),
            hashes[e.originator_version].hex() if e.originator_version in hashes else None,
            hashes[e.originator_version - 1].hex() if e.originator_version - 1 in hashes else None,
        )
        for e in stored
    )
    return RawPage(first, events, newest[0].originator_version if newest else 0)
