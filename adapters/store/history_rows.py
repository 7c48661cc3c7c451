"""What the history index's backends share beyond SQL. The fold into an index (`index_events`,
`write_folded`), an append's held writes (`held_index`) and an index read through an assumed history
(`AssumedBase`). The rows live in the store's database (`adapters.store.ports.HistoryIndex`)."""

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
    """An index `write_folded` writes; `added` is the card outcomes its writes added, None if not counted."""

    @property
    def added(self) -> int | None: ...


def index_events(index: VersionedIndex, state: Any, events: Iterable[ConversationEvent]) -> None:
    """Records `events` in `index` in order and sets its version to the last one's. `state` is the
    aggregate's state before the first."""
    last: ConversationEvent | None = None
    for event in events:
        if last is not None:  # the state before this event (none is folded after the last one: not asked)
            state = evolve(last, state)
        index_event(index, state, event)
        last = event
    if last is not None:
        index.set_version(last.originator_version)


def held_index(base: History) -> LayeredHistory:
    """Returns one conversation's index as an append writes it: a `LayeredHistory` over `base`. A
    backend sends its held writes in one statement. A line's row is an upsert keeping the first
    version."""
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
    """Indexes `events` into `index` event by event; the base of `HistoryIndex.write`. It writes
    nothing unless the index is at the version before the first event, or `follows`. With `rebuild`,
    it writes nothing when the index has the last event, else empties it first. Returns the card
    outcomes added; None where nothing was indexed or the index does not count."""
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
    """An index read through `base` that answers from `assumed` where it knows the rows. Such answers
    are noted for the append's check, so the append does not read those rows again."""

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
