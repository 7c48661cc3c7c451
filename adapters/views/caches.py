"""Run record entries, card outcomes and transcript messages decoded once per stored body, per process.

`NotesCache` keeps the decoded item per body and its note per page check
(`projections.page_line.check_slot`). A turn read then decodes and renders only the new items. A note
depends on its item and the page check alone (`projections.notes.note_of`). Bodies are the rows' JSON;
notes hold labels, never a text.

`MessagesCache` does the same for the transcript messages beside the notes (`ViewRows.placement_reads`).
A kept message holds its text. It is handed out only while the data key opens its sealed body
(`ViewTexts.readable`); an erasure in this process drops them all."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.utils import get_topic

from adapters.store.lru import LRU, Generations
from projections.card_outcomes import CardOutcome
from projections.notes import Note, NoteOf, note_of
from projections.page_line import PageCheck
from projections.row_fold import TAIL_ONLY
from projections.run_record import Entry
from projections.transcript import Message

BODIES = 16384
"""Decoded bodies kept (entries and card outcomes together; about 1 KB each)."""
MESSAGES = 2048
"""Decoded transcript messages kept (a 40-note read places its notes beside about 60)."""
KEPT_INPUT = 512
"""At most this many transcript messages (and card outcomes) of a turn input read from rows are
decoded one by one through the process's caches (`MessagesCache`, `NotesCache`); a longer
input is decoded in one call, so it does not push out what the turn reads keep."""
MESSAGE_BODY = 4096
"""Characters of the longest row body whose message is kept (a longer one is decoded each time),
so the kept messages take at most about MESSAGES * 3 * MESSAGE_BODY bytes."""


class NotesCache:
    """Decoded entries and card outcomes by body, and their notes by (item, page check)."""

    def __init__(self, size: int = BODIES) -> None:
        self._decoded: Generations[tuple[str, str], Any] = Generations(size)
        self._notes: Generations[tuple[int, Hashable], tuple[Any, Note]] = Generations(size)

    def entry(self, body: str) -> Entry:
        """Returns the run record entry stored as `body` (JSON); the same object for the same body."""
        entry: Entry = self._decode("entry", body, Entry.model_validate_json)
        return entry

    def outcome(self, body: str) -> CardOutcome:
        """Returns the card outcome stored as `body` (JSON); the same object for the same body."""
        outcome: CardOutcome = self._decode("outcome", body, CardOutcome.model_validate_json)
        return outcome

    def written(self, bodies: Iterable[tuple[str, str, Entry | CardOutcome]]) -> None:
        """Keeps each entry or card outcome an append wrote, as (`kind`, body, item). The next turn read
        need not decode those bodies. Holds whether or not the append commits: a body depends on its item
        only."""
        for kind, body, item in bodies:
            self._decoded.put((kind, body), item)

    def _decode(self, kind: str, body: str, decode: Any) -> Any:
        item = self._decoded.get((kind, body))
        if item is None:
            item = decode(body)
            self._decoded.put((kind, body), item)
        return item

    def note(self, check: Hashable) -> NoteOf:
        """Returns a `NoteOf` for page check slot `check` that renders each item once per check."""

        def rendered(item: Entry | CardOutcome, can_see_page: PageCheck) -> Note:
            key = (id(item), check)
            found = self._notes.get(key)
            if found is not None and found[0] is item:  # not another object that took a dropped one's id
                return found[1]
            note = note_of(item, can_see_page)
            self._notes.put(key, (item, note))
            return note

        return rendered


class MessagesCache:
    """Transcript messages decoded from their row bodies, by (conversation, body). A sealed body holds a
    fresh nonce, so one body is one text. Keeps at most `size` (`adapters.store.lru.Generations`)."""

    def __init__(self, size: int = MESSAGES) -> None:
        self.size = size
        self._kept: Generations[tuple[str, str], Message] = Generations(size)

    def get(self, conversation: str, body: str) -> Message | None:
        """Returns the message decoded from `body` of `conversation`'s rows, None if not kept."""
        return self._kept.get((conversation, body))

    def put(self, conversation: str, body: str, message: Message) -> None:
        """Keeps `message`, decoded from `body`, unless the body is longer than MESSAGE_BODY."""
        if len(body) <= MESSAGE_BODY:
            self._kept.put((conversation, body), message)

    def holds(self, conversation: str) -> bool:
        """Says whether a message of `conversation` is kept."""
        return self._kept.any_where(lambda key: key[0] == conversation)

    def forget(self, conversation: str) -> None:
        """Forgets the kept messages of `conversation`."""
        self._kept.drop_where(lambda key: key[0] == conversation)

    def clear(self) -> None:
        """Forgets every kept message (after an erasure in this process)."""
        self._kept = Generations(self.size)  # a fresh one: what the old one kept is dropped at once


SEPARATOR = "\x1e"
"""Between the bodies a turn read gets joined in one column (`PostgresViewStorage.turn_rows`): JSON
never holds it unescaped."""
FIELD = "\x1f"
"""Between the fields of one row in such a column (`TurnRows.tail`): JSON never holds it
unescaped either."""
TAIL_EVENTS = 32
"""At most this many events after a kept `BlocksCache` let a turn read use it (with the rows
from its `last_user` on, read afresh); after more, the read places its notes from the rows."""
TAIL_ROWS = 16
"""At most this many transcript rows from a kept `last_user` on are read with a turn's summary."""
KNOWN_CONVERSATIONS = 256
"""Conversations whose `BlocksCache` a process keeps."""
TAIL_ONLY_TOPICS = frozenset(get_topic(cls) for cls in TAIL_ONLY)
"""The stored topics of the events of `projections.row_fold.TAIL_ONLY`."""


@dataclass
class PlacementCache:
    """What a turn read knows of a conversation's transcript rows for placing notes. By user message number:
    the index of its newest message and its block's end (None: no such message). Also row bodies by
    index, and the numbers and indexes the read asked for (`ViewRows.placement_reads`)."""

    ends: dict[int, tuple[int, int | None] | None] = field(default_factory=dict)
    bodies: dict[int, str] = field(default_factory=dict)
    messages: dict[int, Message] = field(default_factory=dict)
    """Messages decoded already, by index (each from a body of at most MESSAGE_BODY characters)."""
    numbers: set[int] = field(default_factory=set)
    asked: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class BlocksCache:
    """What a turn read of one conversation learned of its transcript rows, kept for the next.

    Fields: summary `version`, `generation`, `last_user` (index of the last user message, -1: none). Also
    the block ends asked for (newest message's index, block end; None: the transcript's end) and the
    decoded messages asked for. Messages hold texts, each body at most MESSAGE_BODY characters; an
    erasure drops them. Rows before `last_user` stay true while only TAIL_ONLY events follow. Rows from
    `last_user` on are read afresh (`placement`)."""

    generation: int
    version: int
    last_user: int
    ends: dict[int, tuple[int, int | None]]
    messages: dict[int, Message]
    tip: bytes | None = None
    """The hash chain's hash at `version` (None: no chain), so a log restored to another
    history of that version is not taken for the one these rows were read from."""
    refolds: int = 0
    """The summary's folds in place when read (`Summary.refolds`): after another, an erasure's, the
    rows hold other texts and offsets, and nothing kept of them is known any more."""

    @classmethod
    def of(
        cls,
        placement: PlacementCache,
        generation: int,
        version: int,
        last_user: int | None,
        tip: bytes | None = None,
        refolds: int = 0,
    ) -> BlocksCache:
        """Returns what to keep of a read's `placement`, at summary `version` of `generation`. `tip` is the
        chain hash there; `refolds` counts the summary's folds in place."""
        ends = {n: end for n in placement.numbers if (end := placement.ends.get(n)) is not None}
        messages = {i: message for i in placement.asked if (message := placement.messages.get(i)) is not None}
        return cls(generation, version, -1 if last_user is None else last_user, ends, messages, tip, refolds)

    def placement(
        self,
        generation: int,
        version: int,
        topics: str | None,
        tail: str | None,
        since_tip: bytes | None = None,
        refolds: int = 0,
    ) -> PlacementCache | None:
        """Returns what a read at summary `version` of `generation` may take as known, else None.

        Known: the kept rows before `last_user`, and from it on the rows `tail` holds (`TurnRows.tail`).
        Valid only when:
        - the chain's hash at `self.version` is still `self.tip` (`since_tip`);
        - no fold in place happened since (`self.refolds`);
        - the events since have only TAIL_ONLY_TOPICS (`topics`: stored topics joined by SEPARATOR)."""
        if topics is None or tail is None or generation != self.generation or version < self.version or since_tip != self.tip:
            return None
        if refolds != self.refolds:
            return None
        if topics and not set(topics.split(SEPARATOR)) <= TAIL_ONLY_TOPICS:
            return None
        rows = tail.split(SEPARATOR) if tail else []
        if len(rows) > TAIL_ROWS:
            return None
        ends: dict[int, tuple[int, int | None] | None] = {n: e for n, e in self.ends.items() if e[0] < self.last_user}
        messages = {i: m for i, m in self.messages.items() if i < self.last_user}
        bodies = {}
        for row in rows:  # in order of index: the newest message of a number wins
            index, _, number, end, body = row.split(FIELD, 4)
            bodies[int(index)] = body
            if number:
                ends[int(number)] = (int(index), int(end) if end else None)
        return PlacementCache(ends=ends, bodies=bodies, messages=messages)


def known_conversations() -> LRU[Any, BlocksCache]:
    """Returns an empty LRU of `BlocksCache` by conversation, at most KNOWN_CONVERSATIONS."""
    return LRU(maxsize=KNOWN_CONVERSATIONS)
