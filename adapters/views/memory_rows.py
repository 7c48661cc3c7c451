"""One conversation's rows in memory: `MemoryConversation` holds them in dicts; `MemoryRows` reads and
writes them as the port says (`adapters.views.ports.ViewRows`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from adapters.views.caches import MessagesCache, PlacementCache
from adapters.views.ports import ViewRows
from projections.card_outcomes import CardOutcome
from projections.run_record import Entry
from projections.summary_rows import Summary, TurnMark
from projections.transcript import Message
from projections.usage import UsageRow


@dataclass
class MemoryConversation:
    """One conversation's rows in memory."""

    summary: Summary | None = None
    entries: dict[int, Entry] = field(default_factory=dict)
    aside: dict[int, Entry] = field(default_factory=dict)
    outcomes: dict[tuple[int, int], CardOutcome] = field(default_factory=dict)
    messages: dict[int, Message] = field(default_factory=dict)
    numbers: dict[int, int] = field(default_factory=dict)
    block_ends: dict[int, int | None] = field(default_factory=dict)
    pages: dict[int, int] = field(default_factory=dict)
    turns: dict[int, TurnMark] = field(default_factory=dict)
    usage: dict[int, UsageRow] = field(default_factory=dict)


class MemoryRows(ViewRows):
    """`SQLRows` on a `MemoryConversation` (the in-memory store's views)."""

    tip: bytes | None = None
    """As `SQLRows.tip`: the in-memory store keeps no chain."""

    def __init__(self, rows: MemoryConversation) -> None:
        self.r = rows

    def clear(self) -> None:
        fresh = MemoryConversation()
        for name in fresh.__dataclass_fields__:
            setattr(self.r, name, getattr(fresh, name))

    def summary(self) -> Summary | None:
        return self.r.summary

    def put_summary(self, summary: Summary) -> None:
        self.r.summary = summary

    def entry(self, segment: str) -> Entry | None:
        return next((e for e in reversed(self.r.entries.values()) if e.segment == segment), None)

    def entry_seq(self, segment: str) -> int | None:
        entry = self.entry(segment)
        return entry.seq if entry is not None else None

    def put_entry(self, entry: Entry) -> None:
        self.r.entries[entry.seq] = entry

    def delete_entries(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            self.r.entries.pop(seq, None)

    def set_aside(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            entry = self.r.entries.pop(seq, None)
            if entry is not None:
                self.r.aside[seq] = entry

    def drop_aside(self) -> None:
        self.r.aside.clear()

    def aside(self) -> tuple[Entry, ...]:
        return tuple(self.r.aside[s] for s in sorted(self.r.aside))

    def entries(
        self, decode: Callable[[str], Entry] | None = None, newest: int | None = None, total: int | None = None
    ) -> tuple[Entry, ...]:
        return tuple(self.r.entries[s] for s in sorted(self.r.entries))  # decoded already: the rest unused

    def put_outcomes(self, outcomes: Iterable[CardOutcome]) -> None:
        for o in outcomes:
            self.r.outcomes[o.seq] = o

    def cut_outcomes(self, cards: set[str], length: int) -> int:
        gone = [k for k, o in self.r.outcomes.items() if (o.card in cards if o.card is not None else o.after >= length)]
        for key in gone:
            del self.r.outcomes[key]
        return len(gone)

    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        ordered = tuple(self.r.outcomes[k] for k in sorted(self.r.outcomes))
        return ordered if newest is None else ordered[-newest:] if newest else ()

    def message(self, index: int) -> Message | None:
        return self.r.messages.get(index)

    def user_index(self, number: int) -> int | None:
        return self.r.numbers.get(number)

    def block_end(self, number: int) -> int | None:
        index = self.user_index(number)
        return None if index is None else self.r.block_ends.get(index)

    def messages_at(self, indexes: set[int], kept: MessagesCache | None = None) -> dict[int, Message]:
        return {i: self.r.messages[i] for i in indexes if i in self.r.messages}

    def block_ends(self, numbers: set[int]) -> dict[int, int | None]:
        return {n: self.block_end(n) for n in numbers if self.user_index(n) is not None}

    def placement_reads(
        self, length: int, kept: MessagesCache | None = None, known: PlacementCache | None = None
    ) -> tuple[Callable[[set[int]], dict[int, Message]], Callable[[set[int]], dict[int, int | None]]]:
        """As `SQLRows.placement_reads`: here both read the dicts (decoded already: `kept` and
        `known` unused)."""
        return self.messages_at, self.block_ends

    def put_message(self, index: int, message: Message) -> None:
        if index not in self.r.messages:
            self.r.block_ends[index] = None
        self.r.messages[index] = message
        if message.number is not None:
            self.r.numbers[message.number] = index

    def end_block(self, index: int, end: int | None) -> None:
        if index in self.r.messages:
            self.r.block_ends[index] = end

    def cut_messages(self, keep: int) -> None:
        for index in [i for i in self.r.messages if i >= keep]:
            number = self.r.messages.pop(index).number
            self.r.block_ends.pop(index, None)
            if number is not None and self.r.numbers.get(number) == index:
                del self.r.numbers[number]

    def messages(self) -> tuple[Message, ...]:
        return tuple(self.r.messages[i] for i in sorted(self.r.messages))

    def put_page(self, message: int, page: int) -> None:
        self.r.pages[message] = page

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        for message in [m for m in self.r.pages if m > after]:
            del self.r.pages[message]
        ordered = [self.r.pages[m] for m in sorted(self.r.pages)]
        return (ordered[-1] if ordered else None), next((p for p in reversed(ordered) if p), 0)

    def put_turn(self, turn: TurnMark) -> None:
        self.r.turns.setdefault(turn.version, turn)

    def put_usage(self, usage: UsageRow) -> None:
        self.r.usage[usage.seq] = usage

    def turn_starts(self, message: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        marks = sorted(self.r.turns.values(), key=lambda mark: mark.version)
        versions = tuple(mark.version for mark in marks if mark.message == message)
        return versions, () if versions else tuple(sorted({mark.message for mark in marks}))
