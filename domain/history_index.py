"""The history index: what the invariants need of the past, kept out of the state.

The store keeps it in tables written with the events (`adapters.store.history_rows`).
`MemoryHistory` keeps it in dicts. `index_event` is the fold of one event. The commands read it
through the `History` protocol:

- a segment recorded before, or cut by an edit;
- whether a run was cut; which user messages are uncut;
- how many card outcomes exist;
- which input lines (by digest) were recorded, at which versions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from domain.cards import is_guided, records_outcome
from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationEvent,
    LegacyRowImported,
    QuestionAnswered,
    SegmentReturned,
    TranscriptReplaced,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.segments import WaitingKind, continues_approval, waits_for
from domain.values import Immutable

if TYPE_CHECKING:
    from domain.state import Conversation


class SegmentRecord(Immutable):
    """What the index keeps of a recorded segment. Its fields are `SegmentInfo`'s, in order, then its
    id. `settled`: decided, answered or left undecided (`undecided` gives why). `outcomes`: card
    outcomes it added. `cut`: an edit cut it away."""

    version: int
    """The version of the event that recorded the segment."""
    run: str
    """The run the segment belongs to."""
    message: int
    """The user message number it answered."""
    guided: bool
    """Whether a skill was in force when it returned (a guided process)."""
    waits: WaitingKind | None = None
    """What it waits for: a `card` or a `question`; None when nothing waits."""
    calls: int = 0
    """How many calls its card or question names."""

    segment: str
    """The segment's id."""
    settled: bool = False
    """Whether its card or question was decided, answered or left undecided."""
    undecided: str | None = None
    """Why it was left undecided, if it was."""
    outcomes: int = 0
    """How many card outcomes it added."""
    cut: bool = False
    """Whether an edit cut it away."""


class History(Protocol):
    """The index as the commands read it (one conversation's)."""

    def segment(self, segment: str) -> SegmentRecord | None:
        """Returns the record of `segment` (also a cut one), None if it was never recorded."""

    def segments_from(self, message: int) -> list[SegmentRecord]:
        """Returns the uncut segments that answered message `message` or later, in recorded order."""

    def run_cut(self, run: str) -> bool:
        """Returns True when an edit cut a segment of `run`."""

    def message_uncut(self, number: int) -> bool:
        """Returns True when user message `number` exists and no edit cut it."""

    def messages_after(self, number: int) -> list[int]:
        """Returns the uncut user message numbers above `number`, ascending."""

    def outcomes(self) -> int:
        """Returns how many card outcomes exist (a cut one no longer counts)."""

    def source(self, digest: str) -> tuple[int, int] | None:
        """Returns the first and last version an input line (by digest) stored; None if none."""


class Index(History, Protocol):
    """The index as the fold writes it."""

    def put_segment(self, record: SegmentRecord) -> None: ...

    def put_message(self, number: int, uncut: bool) -> None: ...

    def add_outcomes(self, count: int) -> None: ...

    def put_source(self, digest: str, version: int) -> None:
        """Notes that the line `digest` stored the event of `version`."""


def outcomes_of_decision(record: SegmentRecord, event: CardDecided) -> int:
    """Returns the card outcomes a decision records at once. A declined guided card gives one per call.
    A plain denial and an approval give none."""
    if event.approved or not records_outcome(record.guided, event.answer):
        return 0
    return record.calls


def index_event(index: Index, state: object, event: ConversationEvent) -> None:
    """Records `event` in the index. `state` is the aggregate's state before it, or None before the
    first event."""
    if event.source:
        index.put_source(event.source, event.originator_version)
    if isinstance(event, UserMessagePosted):
        index.put_message(event.message, True)
    elif isinstance(event, SegmentReturned):
        waits = waits_for(event.outcome)
        index.put_segment(
            SegmentRecord(
                segment=event.segment,
                version=event.originator_version,
                run=event.run,
                message=event.message,
                guided=is_guided(event),
                waits=waits,
                calls=len(event.waiting),
            )
        )
        approval = getattr(state, "approval", None)
        if continues_approval(approval, event.trigger, event.run):
            assert approval is not None
            _credit(index, approval[0], approval[1])
    elif isinstance(event, CardDecided):
        record = index.segment(event.segment)
        if record is not None:
            index.put_segment(record.model_copy(update={"settled": True}))
            _credit(index, event.segment, outcomes_of_decision(record, event))
        if event.message is not None and event.text is not None:
            index.put_message(event.message, True)
    elif isinstance(event, QuestionAnswered):
        _settle(index, event.segment)
        index.put_message(event.message, True)
    elif isinstance(event, CardLeftUndecided):
        _settle(index, event.segment, event.reason)
    elif isinstance(event, TurnsTruncated):
        _truncate(index, state, event)
    elif isinstance(event, TranscriptReplaced):
        users = sum(1 for line in event.messages if line.role == "user")
        for number in index.messages_after(users):
            index.put_message(number, False)
        for number in range(1, users + 1):
            index.put_message(number, True)
    elif isinstance(event, LegacyRowImported):
        users = sum(1 for line in event.messages if line.role == "user")
        for number in range(1, users + 1):
            index.put_message(number, True)
        index.add_outcomes(len(event.card_outcomes))


def _credit(index: Index, card: str, count: int) -> None:
    if not count:
        return
    record = index.segment(card)
    if record is not None:
        index.put_segment(record.model_copy(update={"outcomes": record.outcomes + count}))
    index.add_outcomes(count)


def _settle(index: Index, segment: str, undecided: str | None = None) -> None:
    record = index.segment(segment)
    if record is not None:
        index.put_segment(record.model_copy(update={"settled": True, "undecided": undecided}))


def _truncate(index: Index, state: object, event: TurnsTruncated) -> None:
    removed = 0
    for segment in event.cut_segments:
        record = index.segment(segment)
        if record is None:
            continue
        if segment in event.cut_cards:
            removed += record.outcomes
        index.put_segment(record.model_copy(update={"cut": True, "outcomes": 0}))
    for number in event.cut_messages:
        index.put_message(number, False)
    legacy = getattr(state, "legacy_outcomes", ())
    users = getattr(state, "legacy_users", {})
    if event.after_message in users:
        removed += sum(1 for after in legacy if after > users[event.after_message])
    index.add_outcomes(-removed)


class MemoryHistory:
    """The index of one conversation on dicts (the in-memory store's and the tests'). It reads nothing
    ahead and has no chain `tip`."""

    tip: bytes | None = None

    def __init__(self) -> None:
        self.records: dict[str, SegmentRecord] = {}
        self.messages: dict[int, bool] = {}
        self.sources: dict[str, tuple[int, int]] = {}
        self.count = 0
        self.version = 0

    def segment(self, segment: str) -> SegmentRecord | None:
        return self.records.get(segment)

    def segments_from(self, message: int) -> list[SegmentRecord]:
        found = [r for r in self.records.values() if not r.cut and r.message >= message]
        return sorted(found, key=lambda r: r.version)

    def run_cut(self, run: str) -> bool:
        return any(r.cut and r.run == run for r in self.records.values())

    def message_uncut(self, number: int) -> bool:
        return self.messages.get(number, False)

    def messages_after(self, number: int) -> list[int]:
        return sorted(n for n, uncut in self.messages.items() if uncut and n > number)

    def outcomes(self) -> int:
        return self.count

    def source(self, digest: str) -> tuple[int, int] | None:
        return self.sources.get(digest)

    def put_segment(self, record: SegmentRecord) -> None:
        self.records[record.segment] = record

    def put_message(self, number: int, uncut: bool) -> None:
        self.messages[number] = uncut

    def add_outcomes(self, count: int) -> None:
        self.count += count

    def put_source(self, digest: str, version: int) -> None:
        first = self.sources.get(digest, (version, version))[0]
        self.sources[digest] = (first, version)

    @property
    def added(self) -> int | None:
        """Returns None: this index does not count added outcomes."""
        return None

    def prefetch(self, digest: str | None, segment: str | None = None, run: str | None = None, legacy: str | None = None) -> None:
        """Reads nothing."""

    def prefetch_many(self, digests: Iterable[str], segments: Iterable[str], runs: Iterable[str] = ()) -> None:
        """Reads nothing."""

    def set_version(self, version: int) -> None:
        self.version = version

    def record(self, state: Conversation | None, events: Iterable[ConversationEvent]) -> None:
        """Records `events` in order, `state` being the aggregate's state before the first."""
        from domain.state import (
            evolve,  # the state folds along: the fold needs each one before
        )

        for event in events:
            index_event(self, state, event)
            state = evolve(event, state)
            self.version = event.originator_version


class NotKnown(Exception):  # a question, not a failure: the caller reads the index instead
    """Raised by `AssumedHistory` for a lookup it cannot answer without reading the index."""


class AssumedHistory:
    """The index of one conversation as a writer assumes it, without reading it.

    It stands at `version` with `outcomes` card outcomes, as the writer's last append left it. It
    answers as a first delivery would: a line or new segment was never recorded, a run never cut.
    Each answer is noted (`digests`, `segments`, `runs`) for the append to check in its transaction.
    When a check fails, the store decides again from the index. Any other lookup raises NotKnown.

    - `tip`: the store's hash of the event at `version`, or None (unchecked). It tells apart another
      history of the same length.
    - `known`: earlier segments' records at `version`; answers are noted in `records`.
    - `known_messages`: whether each user message is uncut; answers are noted in `messages`.
    - `known_from`: the message number from which both hold every row, or None. From it,
      `segments_from` and `messages_after` are answered and noted (`froms`, `afters`)."""

    def __init__(
        self,
        version: int,
        outcomes: int,
        new_segments: Iterable[str] = (),
        tip: bytes | None = None,
        known: Mapping[str, SegmentRecord] | None = None,
        known_messages: Mapping[int, bool] | None = None,
        known_from: int | None = None,
    ) -> None:
        self.version, self.count, self.tip = version, outcomes, tip
        self.new_segments = frozenset(new_segments)
        self.known: Mapping[str, SegmentRecord] = known or {}
        """Records of earlier segments as the writer's own appends left them at `version`."""
        self.digests: list[str] = []
        self.segments: list[str] = []
        self.runs: list[str] = []
        self.records: dict[str, SegmentRecord] = {}
        """The known records an answer took as the index's (checked with the append, each to
        be there exactly so)."""
        self.known_messages: Mapping[int, bool] = known_messages or {}
        """Whether each of the newest user messages is uncut, as the writer's own appends left them."""
        self.messages: dict[int, bool] = {}
        """The known messages an answer took as the index's (checked with the append)."""
        self.known_from = known_from
        self.froms: dict[int, int] = {}
        """Per message number asked of `segments_from`, how many uncut segments the answer held
        (the append checks that the index holds that many, each noted in `records`)."""
        self.afters: dict[int, int] = {}
        """Per number asked of `messages_after`, how many uncut messages the answer held (the
        append checks that the index holds that many above it, each noted in `messages`)."""
        self.decided: LayeredHistory | None = None
        """The index writes the decision made on this history: its events folded over it, in order
        (`RecordLines.decide`), or None. The append sends these instead of folding the events again;
        its check of the answers noted above is the same either way."""

    def segment(self, segment: str) -> SegmentRecord | None:
        if segment in self.new_segments:
            self.segments.append(segment)
            return None
        record = self.known_segment(segment)
        if record is None:
            raise NotKnown(f"the record of segment {segment!r}")
        return record

    def known_segment(self, segment: str) -> SegmentRecord | None:
        """Returns the writer's record of `segment`, noted in `records`; None when it does not know it."""
        record = self.known.get(segment)
        if record is not None:
            self.records[segment] = record
        return record

    def segments_from(self, message: int) -> list[SegmentRecord]:
        if self.known_from is None or message < self.known_from:
            raise NotKnown(f"the segments from message {message}")
        found = sorted((r for r in self.known.values() if not r.cut and r.message >= message), key=lambda r: r.version)
        for record in found:
            self.records[record.segment] = record
        self.froms[message] = len(found)
        return found

    def run_cut(self, run: str) -> bool:
        self.runs.append(run)
        return False

    def message_uncut(self, number: int) -> bool:
        uncut = self.known_messages.get(number)
        if uncut is None:
            raise NotKnown(f"whether message {number} is uncut")
        self.messages[number] = uncut
        return uncut

    def messages_after(self, number: int) -> list[int]:
        if self.known_from is None or number + 1 < self.known_from:
            raise NotKnown(f"the messages after {number}")
        found = sorted(n for n, live in self.known_messages.items() if live and n > number)
        for n in found:
            self.messages[n] = True
        self.afters[number] = len(found)
        return found

    def outcomes(self) -> int:
        return self.count

    def source(self, digest: str) -> tuple[int, int] | None:
        self.digests.append(digest)
        return None


class LayeredHistory:
    """A history read through `base`, with writes held on top and never stored by it.

    - `top`: one per key: a segment's last record, a message's last state, a line's versions.
    - `delta`: the card outcomes added. `version`: the version set last.
    - `read_sources`: True reads a line's first version through `base` (a batch). False reads only
      what is held (an append; its backend upserts the first version).

    A batch's lines see each other before the batch is saved."""

    def __init__(self, base: History, *, read_sources: bool = True) -> None:
        self.base, self.top, self.delta = base, MemoryHistory(), 0
        self.version = 0
        self.read_sources = read_sources

    def segment(self, segment: str) -> SegmentRecord | None:
        return self.top.records.get(segment) or self.base.segment(segment)

    def segments_from(self, message: int) -> list[SegmentRecord]:
        below = [r for r in self.base.segments_from(message) if r.segment not in self.top.records]
        return sorted([*below, *self.top.segments_from(message)], key=lambda r: r.version)

    def run_cut(self, run: str) -> bool:
        return self.top.run_cut(run) or self.base.run_cut(run)

    def message_uncut(self, number: int) -> bool:
        return self.top.messages[number] if number in self.top.messages else self.base.message_uncut(number)

    def messages_after(self, number: int) -> list[int]:
        below = [n for n in self.base.messages_after(number) if n not in self.top.messages]
        return sorted([*below, *self.top.messages_after(number)])

    def outcomes(self) -> int:
        return self.base.outcomes() + self.delta

    def source(self, digest: str) -> tuple[int, int] | None:
        return self.top.source(digest) or self.base.source(digest)

    def put_segment(self, record: SegmentRecord) -> None:
        self.top.put_segment(record)

    def put_message(self, number: int, uncut: bool) -> None:
        self.top.put_message(number, uncut)

    def add_outcomes(self, count: int) -> None:
        self.delta += count

    def put_source(self, digest: str, version: int) -> None:
        first = self.source(digest) if self.read_sources else self.top.sources.get(digest)
        self.top.sources[digest] = (first[0] if first else version, version)

    def set_version(self, version: int) -> None:
        self.version = version
