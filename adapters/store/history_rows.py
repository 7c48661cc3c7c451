"""What the history index's backends share beyond SQL: the fold of events into an index
(`index_events`, `write_folded`), an append's held writes (`held_index`) and an index read through
an assumed history (`AssumedBase`). The rows live in the store's database
(`adapters.store.ports.HistoryIndex`, each backend's under `adapters.backends`): one row per
conversation (the version indexed, the live card outcomes), a record per segment id, the user
message numbers live or cut, and the input lines by digest. A redelivered line or segment is an
index lookup; nothing of it lives in the aggregate or its snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, History, Index, LayeredHistory, NotKnown, SegmentRecord, index_event
from domain.state import evolve


class VersionedIndex(Index, Protocol):
    """An index the fold writes (`index_events`): it stands at a `version`, set after the events
    it indexed."""

    @property
    def version(self) -> int: ...

    def set_version(self, version: int) -> None: ...


class FoldedIndex(VersionedIndex, Protocol):
    """An index `write_folded` writes: also says how many card outcomes the writes `added`
    (None: it does not count them)."""

    @property
    def added(self) -> int | None: ...


def index_events(index: VersionedIndex, state: Any, events: Iterable[ConversationEvent]) -> None:
    """Records `events` in `index` in order (`state`: the aggregate's state before the first)
    and sets the index's version to the last one's."""
    last = None
    for event in events:
        index_event(index, state, event)
        state = evolve(event, state)
        last = event.originator_version
    if last is not None:
        index.set_version(last)


def held_index(base: History) -> LayeredHistory:
    """Returns one conversation's index as an append writes it: a `LayeredHistory` over `base`
    (an `SQLHistory` on the events' transaction) whose held writes a backend sends in one
    statement (`PostgresHistoryTables`). A line's digest is never read to be written: its row
    is an upsert that keeps the first version stored."""
    return LayeredHistory(base, read_sources=False)


def write_folded(
    index: FoldedIndex,
    state: Any,
    events: list[Any],
    *,
    rebuild: bool,
    follows: bool,
    emptied: Callable[[Any], FoldedIndex],
) -> int | None:
    """Indexes `events` into `index` event by event (the base of `HistoryIndex.write`):
    nothing when the index is not at the version before the first event (indexed already by
    another writer, or a gap its next reader fills) unless `follows`; with `rebuild`, nothing
    when the index has the last event already, else `emptied(index)` first. Returns the card
    outcomes added (`index.added`), None where nothing was indexed or the index does not count."""
    first = events[0].originator_version if events else 1
    if not rebuild and not follows and index.version != first - 1:
        return None
    if rebuild and events and index.version >= events[-1].originator_version:
        return None
    if rebuild:
        index = emptied(index)
    index_events(index, state, events)
    return index.added


class AssumedBase:
    """An index read through `base` whose lookups of the segments `assumed` knows
    (`AssumedHistory.known_segment`), and of the live segments and messages from a number on
    where it knows them whole (`AssumedHistory.known_from`), are answered from it, noted for
    the append's check: an append decided on assumptions writes its index without reading
    those rows again."""

    def __init__(self, base: Any, assumed: AssumedHistory) -> None:
        self.base, self.assumed = base, assumed

    def segment(self, segment: str) -> SegmentRecord | None:
        record = self.assumed.known_segment(segment)
        return record if record is not None else self.base.segment(segment)

    def segments_from(self, message: int) -> list[SegmentRecord]:
        try:
            return self.assumed.segments_from(message)
        except NotKnown:
            return cast("list[SegmentRecord]", self.base.segments_from(message))

    def messages_after(self, number: int) -> list[int]:
        try:
            return self.assumed.messages_after(number)
        except NotKnown:
            return cast("list[int]", self.base.messages_after(number))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)
