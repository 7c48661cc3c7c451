"""What this process knows of a conversation's history index from its own appends (`IndexRecordsCache`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any
from uuid import UUID

from adapters.store.lru import LRU
from domain.events import ConversationEvent
from domain.history_index import NotKnown, SegmentRecord, index_event
from domain.state import evolve

_VERSION = attrgetter("version")

IndexPuts = tuple[Mapping[str, SegmentRecord], Mapping[int, bool]]
"""The rows an append wrote to the history index: its segment records by segment, and whether
each user message is uncut by number (`HistoryIndex.write`'s `puts`)."""


class _KnownIndex:
    """The index as `IndexRecordsCache` follows it; from message `floor` on (None: nowhere) every row
    is known."""

    def __init__(self, records: dict[str, SegmentRecord], messages: dict[int, bool], floor: int | None) -> None:
        self.records, self.messages, self.floor = records, messages, floor

    def segment(self, segment: str) -> SegmentRecord | None:
        return self.records.get(segment)  # an unknown one is left unknown: nothing is put for it

    def put_segment(self, record: SegmentRecord) -> None:
        self.records[record.segment] = record

    def segments_from(self, message: int) -> list[SegmentRecord]:
        if self.floor is None or message < self.floor:
            raise NotKnown(f"the segments from message {message}")
        found = [r for r in self.records.values() if not r.cut and r.message >= message]
        return sorted(found, key=lambda r: r.version)

    def messages_after(self, number: int) -> list[int]:
        if self.floor is None or number + 1 < self.floor:
            raise NotKnown(f"the messages after {number}")
        return sorted(n for n, uncut in self.messages.items() if uncut and n > number)

    def put_message(self, number: int, uncut: bool) -> None:
        self.messages[number] = uncut

    def put_source(self, digest: str, version: int) -> None:
        pass

    def add_outcomes(self, count: int) -> None:
        pass

    # the rest of the index's reads: not followed here, so unknown (the fold never asks them)

    def run_cut(self, run: str) -> bool:
        raise NotKnown(f"whether run {run} is cut")

    def message_uncut(self, number: int) -> bool:
        if number in self.messages:
            return self.messages[number]
        raise NotKnown(f"whether message {number} is uncut")

    def outcomes(self) -> int:
        raise NotKnown("the card outcome count")

    def source(self, digest: str) -> tuple[int, int] | None:
        raise NotKnown(f"the line {digest}")


class IndexRecordsCache:
    """Per conversation, the newest segments' records and whether the newest messages are uncut.

    At most `KEPT` of each, at the version this process's appends left. `AssumedHistory.known`
    answers from them; the append checks each record taken. A record is kept only as computed from
    the process's own appends onto known rows. Followed from its start, every row from a message
    number on is kept too (at most `WINDOW`). An event needing more than is kept forgets the
    conversation."""

    KEPT = 16
    WINDOW = 32

    def __init__(self, size: int = 4096) -> None:
        self._kept: LRU[UUID, tuple[int, dict[str, SegmentRecord], dict[int, bool], int | None]] = LRU(maxsize=size)

    def at(self, cid: UUID, version: int) -> tuple[dict[str, SegmentRecord], dict[int, bool], int | None]:
        """Returns the kept records of `cid` at `version`, the uncut flags and the floor. Both are
        empty when none are kept. The floor is None for nowhere, 0 at version 0."""
        if version == 0:
            return {}, {}, 0
        try:
            kept = self._kept.get(cid)
        except KeyError:
            return {}, {}, None
        return (kept[1], kept[2], kept[3]) if kept[0] == version else ({}, {}, None)

    def appended(
        self,
        cid: UUID,
        state: Any,
        events: Iterable[ConversationEvent],
        puts: IndexPuts | None = None,
    ) -> None:
        """Follows `events` appended onto `state`. With `puts`, the written rows are taken as they are.
        Else each event is folded onto the known rows. A fold that needs an unknown row forgets the
        conversation."""
        events = list(events)
        if not events:
            return
        records, messages, floor = self.at(cid, state.version if state is not None else 0)
        index = _KnownIndex(dict(records), dict(messages), floor)
        if puts is not None:
            index.records.update(puts[0])
            index.messages.update(puts[1])
        else:
            try:
                for number, event in enumerate(events, start=1):
                    index_event(index, state, event)
                    if number < len(events):  # the state after the last one is not asked
                        state = evolve(event, state)
            except NotKnown:
                self.evict(cid)
                return
        floor = self._floor(index)
        newest = sorted(index.records.values(), key=_VERSION)[-self.KEPT :]
        kept = {r.segment: r for r in newest}
        numbers = set(sorted(index.messages)[-self.KEPT :])
        if floor is not None:
            kept.update([(r.segment, r) for r in index.records.values() if r.message >= floor])
            numbers.update([n for n in index.messages if n >= floor])
        self._kept.put(cid, (events[-1].originator_version, kept, {n: index.messages[n] for n in sorted(numbers)}, floor))

    def _floor(self, index: _KnownIndex) -> int | None:
        """Returns the lowest message number from `index.floor` with at most `WINDOW` records and
        messages. None where `index.floor` is None."""
        floor = index.floor
        if floor is None:
            return None
        if (
            len([r for r in index.records.values() if r.message >= floor]) <= self.WINDOW
            and len([n for n in index.messages if n >= floor]) <= self.WINDOW
        ):
            return floor  # the window holds no more than it may: as it was
        marks = sorted(
            {r.message for r in index.records.values() if r.message >= floor} | {n for n in index.messages if n >= floor}
        )
        for mark in [floor, *marks]:
            segments = sum(1 for r in index.records.values() if r.message >= mark)
            messages = sum(1 for n in index.messages if n >= mark)
            if segments <= self.WINDOW and messages <= self.WINDOW:
                return mark
        return (marks[-1] + 1) if marks else floor

    def evict(self, cid: UUID) -> None:
        try:
            self._kept.get(cid, evict=True)
        except KeyError:
            pass
