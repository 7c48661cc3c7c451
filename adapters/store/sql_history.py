"""The history index in the store's database: what the aggregate's invariants need of the past
(`domain.history_index`), as indexed rows, written in the transaction that stores the events.

Tables (rule-independent, so a rebuild leaves them alone):
`chatrecord_index` (one row per conversation: the version indexed, the live card outcomes),
`chatrecord_segments` (a record per segment id, with its run, message and whether cut),
`chatrecord_messages` (user message numbers, live or cut) and `chatrecord_sources` (the input
lines by digest, with the versions of the events they stored). A redelivered line or segment
is an index lookup; nothing of it lives in the aggregate or its snapshot.

`SQLHistory` reads (and, given the event transaction's cursor, writes) one conversation's
rows; `index_events` records events with `domain.history_index.index_event`. `HistoryTables` hands
out a database's readers and writers; each backend's store factory makes its own
(`adapters.backends`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast
from uuid import UUID

from eventsourcing.application import LRUCache

from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, LayeredHistory, MemoryHistory, NotKnown, SegmentRecord, index_event
from domain.state import evolve

Execute = Callable[[str, tuple[Any, ...]], Any]

T = TypeVar("T")

LOOKUPS_AT_ONCE = 500
"""The most lookups one statement of `SQLHistory.prefetch_many` asks for."""

TABLES = ("chatrecord_index", "chatrecord_segments", "chatrecord_messages", "chatrecord_sources")


def create_statements(schema: str = "") -> list[str]:
    """Returns the CREATE statements of the index tables (schema-qualified when given)."""
    q = (lambda name: f'"{schema}".{name}') if schema else (lambda name: name)
    return [
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_index')} (cid TEXT PRIMARY KEY, version BIGINT NOT NULL, "
        "outcomes BIGINT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_segments')} (cid TEXT NOT NULL, segment TEXT NOT NULL, "
        "run TEXT NOT NULL, message BIGINT NOT NULL, version BIGINT NOT NULL, cut INTEGER NOT NULL, "
        "body TEXT NOT NULL, PRIMARY KEY (cid, segment))",
        f"CREATE INDEX IF NOT EXISTS chatrecord_segments_run ON {q('chatrecord_segments')} (cid, run)",
        f"CREATE INDEX IF NOT EXISTS chatrecord_segments_message ON {q('chatrecord_segments')} (cid, message)",
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_messages')} (cid TEXT NOT NULL, number BIGINT NOT NULL, "
        "live INTEGER NOT NULL, PRIMARY KEY (cid, number))",
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_sources')} (cid TEXT NOT NULL, digest TEXT NOT NULL, "
        "first BIGINT NOT NULL, last BIGINT NOT NULL, PRIMARY KEY (cid, digest))",
    ]


class SQLHistory:
    """One conversation's index rows through `execute(sql, params) -> cursor` (`?` placeholders,
    turned into the driver's `p`). Reads see the writes of the same transaction."""

    def __init__(
        self,
        execute: Execute,
        cid: UUID,
        p: str = "?",
        schema: str = "",
        memo: bool = False,
        chain: tuple[str, Any] | None = None,
    ) -> None:
        self._run, self.cid, self.p = execute, str(cid), p
        self._chain = chain
        """(the hash chain's table, the conversation's id as that table keys it): `prefetch`
        then reads the hash of the event at the index's version too (`tip`)."""
        self.tip: bytes | None = None
        """After `prefetch` with `chain`: the chain's hash of the event at `version`, None if none."""
        self.t = {name: (f'"{schema}".{name}' if schema else name) for name in TABLES}
        self._memo: dict[tuple[Any, ...], Any] | None = {} if memo else None
        self.added = 0
        """The card outcomes this index's writes added (negative when an edit cut some)."""

    def _x(self, sql: str, *args: Any) -> Any:
        return self._run(sql.replace("?", self.p), (self.cid, *args))

    def _once(self, key: tuple[Any, ...], read: Callable[[], T]) -> T:
        """Returns `read()`, asked once per key when this index only reads (one command's lookups)."""
        if self._memo is None:
            return read()
        if key not in self._memo:
            self._memo[key] = read()
        return cast(T, self._memo[key])  # the value `read` gave for this key

    def _index_row(self) -> tuple[int, int]:
        def read() -> tuple[int, int]:
            row = self._x(f"SELECT version, outcomes FROM {self.t['chatrecord_index']} WHERE cid = ?").fetchone()
            return (int(row["version"]), int(row["outcomes"])) if row else (0, 0)

        return self._once(("index",), read)

    def prefetch(self, digest: str | None, segment: str | None = None, run: str | None = None) -> None:
        """Reads, in one statement, the index row, the input line `digest`'s row, segment
        `segment`'s row and whether an edit cut run `run` (each if given), for the lookups of
        one command (`memo`); does nothing when this index also writes."""
        if self._memo is None:
            return
        t = self.t
        # the chain's id goes last, as a column of `k`: `_x` puts the conversation's id first
        chain, key, tip_args = (
            ("NULL", "", ())
            if self._chain is None
            else (
                f"(SELECT c.hash FROM {self._chain[0]} c WHERE c.originator_id = k.chain_id "
                "AND c.originator_version = i.version)",
                ", ? AS chain_id",
                (self._chain[1],),
            )
        )
        row = self._x(
            f"SELECT i.version, i.outcomes, s.first, s.last, {chain} AS tip, "
            f"(SELECT g.body FROM {t['chatrecord_segments']} g WHERE g.cid = k.cid AND g.segment = k.segment) "
            f"AS segment, (SELECT 1 FROM {t['chatrecord_segments']} r WHERE r.cid = k.cid AND r.run = k.run "
            f"AND r.cut = 1 LIMIT 1) AS run_cut FROM (SELECT CAST(? AS TEXT) AS cid, CAST(? AS TEXT) AS digest, "
            f"CAST(? AS TEXT) AS segment, CAST(? AS TEXT) AS run{key}) k "
            f"LEFT JOIN {t['chatrecord_index']} i ON i.cid = k.cid "
            f"LEFT JOIN {t['chatrecord_sources']} s ON s.cid = k.cid AND s.digest = k.digest",
            digest or "",
            segment or "",
            run or "",
            *tip_args,
        ).fetchone()
        self.tip = bytes(row["tip"]) if row["tip"] is not None else None
        self._memo[("index",)] = (int(row["version"] or 0), int(row["outcomes"] or 0))
        if digest:
            self._memo[("source", digest)] = (int(row["first"]), int(row["last"])) if row["first"] is not None else None
        if segment:
            body = row["segment"]
            self._memo[("segment", segment)] = SegmentRecord.model_validate_json(body) if body is not None else None
        if run:
            self._memo[("run_cut", run)] = row["run_cut"] is not None

    def prefetch_many(self, digests: Iterable[str], segments: Iterable[str], runs: Iterable[str] = ()) -> None:
        """Reads the rows of many input lines (`digests`), segments and runs (whether an edit cut
        them) at once, a statement per
        LOOKUPS_AT_ONCE lookups, for the lookups of a command of many lines (`memo`); does nothing
        when this index also writes. Each lookup found or not is then answered without a read."""
        if self._memo is None:
            return
        memo = self._memo
        wanted = [d for d in dict.fromkeys(digests) if ("source", d) not in memo]
        for at in range(0, len(wanted), LOOKUPS_AT_ONCE):
            part = wanted[at : at + LOOKUPS_AT_ONCE]
            for d in part:
                memo[("source", d)] = None
            rows = self._x(
                f"SELECT digest, first, last FROM {self.t['chatrecord_sources']} WHERE cid = ? "
                f"AND digest IN ({', '.join('?' * len(part))})",
                *part,
            ).fetchall()
            for row in rows:
                memo[("source", row["digest"])] = (int(row["first"]), int(row["last"]))
        wanted = [g for g in dict.fromkeys(segments) if ("segment", g) not in memo]
        for at in range(0, len(wanted), LOOKUPS_AT_ONCE):
            part = wanted[at : at + LOOKUPS_AT_ONCE]
            for g in part:
                memo[("segment", g)] = None
            rows = self._x(
                f"SELECT segment, body FROM {self.t['chatrecord_segments']} WHERE cid = ? "
                f"AND segment IN ({', '.join('?' * len(part))})",
                *part,
            ).fetchall()
            for row in rows:
                memo[("segment", row["segment"])] = SegmentRecord.model_validate_json(row["body"])
        wanted = [r for r in dict.fromkeys(runs) if ("run_cut", r) not in memo]
        for at in range(0, len(wanted), LOOKUPS_AT_ONCE):
            part = wanted[at : at + LOOKUPS_AT_ONCE]
            for r in part:
                memo[("run_cut", r)] = False
            rows = self._x(
                f"SELECT DISTINCT run FROM {self.t['chatrecord_segments']} WHERE cid = ? AND cut = 1 "
                f"AND run IN ({', '.join('?' * len(part))})",
                *part,
            ).fetchall()
            for row in rows:
                memo[("run_cut", row["run"])] = True

    # ---------------------------------------------------------------- reads

    @property
    def version(self) -> int:
        """Returns the version of the last event indexed, 0 before the first."""
        return self._index_row()[0]

    def segment(self, segment: str) -> SegmentRecord | None:
        def read() -> SegmentRecord | None:
            row = self._x(f"SELECT body FROM {self.t['chatrecord_segments']} WHERE cid = ? AND segment = ?", segment).fetchone()
            return SegmentRecord.model_validate_json(row["body"]) if row else None

        return self._once(("segment", segment), read)

    def segments_from(self, message: int) -> list[SegmentRecord]:
        rows = self._x(
            f"SELECT body FROM {self.t['chatrecord_segments']} WHERE cid = ? AND message >= ? AND cut = 0 ORDER BY version",
            message,
        ).fetchall()
        return [SegmentRecord.model_validate_json(r["body"]) for r in rows]

    def run_cut(self, run: str) -> bool:
        def read() -> bool:
            row = self._x(
                f"SELECT 1 AS found FROM {self.t['chatrecord_segments']} WHERE cid = ? AND run = ? AND cut = 1 LIMIT 1", run
            ).fetchone()
            return row is not None

        return self._once(("run_cut", run), read)

    def message_live(self, number: int) -> bool:
        row = self._x(f"SELECT live FROM {self.t['chatrecord_messages']} WHERE cid = ? AND number = ?", number).fetchone()
        return bool(row and row["live"])

    def messages_after(self, number: int) -> list[int]:
        rows = self._x(
            f"SELECT number FROM {self.t['chatrecord_messages']} WHERE cid = ? AND number > ? AND live = 1 ORDER BY number",
            number,
        ).fetchall()
        return [int(r["number"]) for r in rows]

    def outcomes(self) -> int:
        return self._index_row()[1]

    def source(self, digest: str) -> tuple[int, int] | None:
        def read() -> tuple[int, int] | None:
            row = self._x(
                f"SELECT first, last FROM {self.t['chatrecord_sources']} WHERE cid = ? AND digest = ?", digest
            ).fetchone()
            return (int(row["first"]), int(row["last"])) if row else None

        return self._once(("source", digest), read)

    # ---------------------------------------------------------------- writes

    def put_segment(self, record: SegmentRecord) -> None:
        self._x(
            f"INSERT INTO {self.t['chatrecord_segments']} (cid, segment, run, message, version, cut, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (cid, segment) DO UPDATE SET cut = excluded.cut, "
            "body = excluded.body",
            record.segment,
            record.run,
            record.message,
            record.version,
            int(record.cut),
            record.model_dump_json(),
        )

    def put_message(self, number: int, live: bool) -> None:
        self._x(
            f"INSERT INTO {self.t['chatrecord_messages']} (cid, number, live) VALUES (?, ?, ?) "
            "ON CONFLICT (cid, number) DO UPDATE SET live = excluded.live",
            number,
            int(live),
        )

    def add_outcomes(self, count: int) -> None:
        self.added += count
        if count:  # an upsert: the conversation's row may not exist before its first outcome
            index = self.t["chatrecord_index"]
            self._x(
                f"INSERT INTO {index} (cid, version, outcomes) VALUES (?, 0, ?) "
                f"ON CONFLICT (cid) DO UPDATE SET outcomes = {index}.outcomes + excluded.outcomes",
                count,
            )

    def put_source(self, digest: str, version: int) -> None:
        self._x(
            f"INSERT INTO {self.t['chatrecord_sources']} (cid, digest, first, last) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (cid, digest) DO UPDATE SET last = excluded.last",
            digest,
            version,
            version,
        )

    def set_version(self, version: int) -> None:
        self._x(
            f"INSERT INTO {self.t['chatrecord_index']} (cid, version, outcomes) VALUES (?, ?, 0) "
            "ON CONFLICT (cid) DO UPDATE SET version = excluded.version",
            version,
        )

    def clear(self) -> None:
        """Deletes the conversation's index rows (before it is indexed again from its log)."""
        for table in TABLES:
            self._x(f"DELETE FROM {self.t[table]} WHERE cid = ?")


def index_events(index: Any, state: Any, events: Iterable[ConversationEvent]) -> None:
    """Records `events` in `index` in order (`state`: the aggregate's state before the first)
    and sets the index's version to the last one's."""
    last = None
    for event in events:
        index_event(index, state, event)
        state = evolve(event, state)
        last = event.originator_version
    if last is not None:
        if getattr(index, "set_version", None):
            index.set_version(last)
        else:
            index.version = last


class HeldIndex(LayeredHistory):
    """One conversation's index as an append writes it: a `LayeredHistory` over `base` (an
    `SQLHistory` on the events' transaction) whose held writes (`top`: one per key, the last
    record of a segment, the last state of a message, each line's first and last version;
    `delta`: the outcomes added; `version`) a backend sends in one statement
    (`PostgresHistoryTables`). A line's digest is never read to be written: its row is an
    upsert that keeps the first version stored."""

    def __init__(self, base: Any) -> None:
        super().__init__(base)
        self.version = 0

    def put_source(self, digest: str, version: int) -> None:
        first = self.top.sources.get(digest)
        self.top.sources[digest] = (first[0] if first else version, version)

    def set_version(self, version: int) -> None:
        self.version = version


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


class _KnownIndex:
    """The index as `KnownRecords` follows it: the known records, the rest unknown; from
    message number `floor` on (None: nowhere) every row is known."""

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
        return sorted(n for n, live in self.messages.items() if live and n > number)

    def put_message(self, number: int, live: bool) -> None:
        self.messages[number] = live

    def put_source(self, digest: str, version: int) -> None:
        pass

    def add_outcomes(self, count: int) -> None:
        pass

    # the rest of the index's reads: not followed here, so unknown (the fold never asks them)

    def run_cut(self, run: str) -> bool:
        raise NotKnown(f"whether run {run} is cut")

    def message_live(self, number: int) -> bool:
        if number in self.messages:
            return self.messages[number]
        raise NotKnown(f"whether message {number} is live")

    def outcomes(self) -> int:
        raise NotKnown("the card outcome count")

    def source(self, digest: str) -> tuple[int, int] | None:
        raise NotKnown(f"the line {digest}")


class KnownRecords:
    """Per conversation, the records of its newest segments and whether each of its newest user
    messages is live (at most `KEPT` of each) as this process's appends left the history index,
    with the version they stand at: what `AssumedHistory.known`
    answers from, so that a card decision, an answer or a continuation, which look up an
    earlier segment's record, decide without reading the index (the append checks each record
    it took). A record is kept only as the process computed it from the events it appended
    onto a known one (`index_event` on the known records): exactly the index's row, or not at
    all. Where the process followed the conversation from its start, it also keeps every row
    from a message number on (`AssumedHistory.known_from`: at most `WINDOW` segments and as many
    messages), so an edit of a recent message and a replaced transcript decide without reading
    the index too; an event that needs more of the index than is kept forgets the conversation."""

    KEPT = 16
    WINDOW = 32

    def __init__(self, size: int = 4096) -> None:
        self._kept: LRUCache[UUID, tuple[int, dict[str, SegmentRecord], dict[int, bool], int | None]] = LRUCache(maxsize=size)

    def at(self, cid: UUID, version: int) -> tuple[dict[str, SegmentRecord], dict[int, bool], int | None]:
        """Returns the kept records of `cid` at `version`, whether each of its newest user
        messages is live (both empty when none are kept at that version) and the message number
        from which they hold every row of the index (None: nowhere; 0 at version 0, before the
        conversation's first event, when the index holds no row of it)."""
        if version == 0:
            return {}, {}, 0
        try:
            kept = self._kept.get(cid)
        except KeyError:
            return {}, {}, None
        return (kept[1], kept[2], kept[3]) if kept[0] == version else ({}, {}, None)

    def appended(self, cid: UUID, state: Any, events: Iterable[ConversationEvent]) -> None:
        """Follows `events`, just appended onto `state` (the aggregate's state before them)."""
        events = list(events)
        if not events:
            return
        records, messages, floor = self.at(cid, state.version if state is not None else 0)
        index = _KnownIndex(dict(records), dict(messages), floor)
        try:
            for event in events:
                index_event(index, state, event)
                state = evolve(event, state)
        except NotKnown:
            self.evict(cid)
            return
        floor = self._floor(index)
        newest = sorted(index.records.values(), key=lambda r: r.version)[-self.KEPT :]
        kept = {r.segment: r for r in newest}
        numbers = set(sorted(index.messages)[-self.KEPT :])
        if floor is not None:
            kept.update((r.segment, r) for r in index.records.values() if r.message >= floor)
            numbers.update(n for n in index.messages if n >= floor)
        self._kept.put(cid, (events[-1].originator_version, kept, {n: index.messages[n] for n in sorted(numbers)}, floor))

    def _floor(self, index: _KnownIndex) -> int | None:
        """Returns the lowest message number at or above `index.floor` from which `index` holds
        at most `WINDOW` segment records and `WINDOW` messages (all of the index's rows from
        there on, as `index.floor` says of its own); None where `index.floor` is."""
        floor = index.floor
        if floor is None:
            return None
        if (
            sum(1 for r in index.records.values() if r.message >= floor) <= self.WINDOW
            and sum(1 for n in index.messages if n >= floor) <= self.WINDOW
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


class _Fetched:
    """The rows of one statement, fetched inside its own read transaction."""

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows


class AssumptionFailed(Exception):  # not an error of the caller's: the command is decided again
    """Raised by the append when the index no longer stands as an `AssumedHistory` assumed
    (another writer appended, the line or segment was recorded before, the run was cut):
    nothing was stored, and the command is decided again from the index."""


class HistoryTables:
    """The index tables of one database: readers, writers and the rebuild of a conversation's
    rows. Each backend's store factory hands out its own (`adapters.backends`): `SQLHistoryTables`
    in a SQLite file or a PostgreSQL schema, dicts in memory."""

    checks_assumptions = False
    """True where `write` can check an `AssumedHistory` in the events' transaction, so a
    writer may decide a command without reading the index first (PostgreSQL)."""

    def create(self) -> None:
        """Creates the tables where they do not exist."""

    def reader(self, cid: UUID) -> Any:
        """Returns the index of conversation `cid` for reading (each lookup its own read)."""
        raise NotImplementedError

    @contextmanager
    def reading(self, cid: UUID | None) -> Iterator[Any]:
        """Yields the index of conversation `cid` for the lookups of one command (an empty index
        for a conversation not started), each lookup asked once."""
        if cid is None:
            yield MemoryHistory()
        else:
            with self._reading(cid) as index:
                yield index

    def _reading(self, cid: UUID) -> Any:
        """A context manager yielding the index of `cid` for one command's lookups."""
        raise NotImplementedError

    def writer(self, curs: Any, cid: UUID) -> Any:
        """Returns the index of conversation `cid` written through `curs` (the cursor of the
        transaction that stores the events; None in memory)."""
        raise NotImplementedError

    def _emptied(self, index: Any, cid: UUID) -> Any:
        """Returns `index` (of conversation `cid`) with its rows deleted, before a rebuild."""
        raise NotImplementedError

    def _transaction(self) -> Any:
        """A context manager yielding the cursor of a writing transaction of its own."""
        raise NotImplementedError

    def write(
        self,
        cid: UUID,
        state: Any,
        events: Any,
        curs: Any = None,
        rebuild: bool = False,
        follows: bool = False,
        assumed: AssumedHistory | None = None,
    ) -> int | None:
        """Indexes `events` of conversation `cid` (`state`: the aggregate's before them), through
        `curs` or in a transaction of its own; with `rebuild`, the conversation's rows go first.
        `follows` says the caller saw the index at the version before the first event in this
        attempt (the events' insert fails if another writer came between), so it is not read.
        `assumed`: the events were decided on that history, which is checked with them where
        `checks_assumptions`.
        Returns how many card outcomes the events added (negative when an edit cut some),
        None when nothing was indexed or the index does not count them (in memory)."""
        events = list(events)
        if curs is None:
            with self._transaction() as own:
                return self._checked_write(cid, state, events, own, rebuild, follows, assumed)
        return self._checked_write(cid, state, events, curs, rebuild, follows, assumed)

    def _checked_write(
        self, cid: UUID, state: Any, events: list[Any], curs: Any, rebuild: bool, follows: bool, assumed: AssumedHistory | None
    ) -> int | None:
        if assumed is not None:
            raise NotImplementedError("this index cannot check an assumed history (checks_assumptions)")
        return self._write(cid, state, events, curs, rebuild, follows)

    def _write(self, cid: UUID, state: Any, events: list[Any], curs: Any, rebuild: bool, follows: bool) -> int | None:
        index = self.writer(curs, cid)
        first = events[0].originator_version if events else 1
        if not rebuild and not follows and index.version != first - 1:
            return None  # indexed already (another writer), or a gap its next reader fills
        if rebuild and events and index.version >= events[-1].originator_version:
            return None  # another process indexed it meanwhile
        if rebuild:
            index = self._emptied(index, cid)
        index_events(index, state, events)
        return getattr(index, "added", None)


class SQLHistoryTables(HistoryTables):
    """The index tables in a SQL database (`datastore`: the library's SQLite or PostgreSQL
    datastore; `p` its placeholder, `schema` the tables' schema, "" for none). Readers use a
    read transaction per lookup; writers the cursor of the transaction that stores the events;
    one command's lookups share one read transaction (`_reading`)."""

    def __init__(self, datastore: Any, p: str = "?", schema: str = "", chain: tuple[str, Any] | None = None) -> None:
        self.datastore, self.p, self.schema = datastore, p, schema
        self.chain = chain
        """(the hash chain's table, a function of a conversation's UUID giving the id that table
        keys it by), where the store keeps a chain: a command's lookups read its last hash too."""

    def _chain_of(self, cid: UUID) -> tuple[str, Any] | None:
        return None if self.chain is None else (self.chain[0], self.chain[1](cid))

    def create(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            for statement in create_statements(self.schema):
                curs.execute(statement)

    def reader(self, cid: UUID) -> SQLHistory:
        datastore = self.datastore

        def execute(sql: str, params: tuple[Any, ...]) -> _Fetched:
            with datastore.transaction(commit=False) as curs:
                curs.execute(sql, params)
                return _Fetched(list(curs.fetchall()))

        return SQLHistory(execute, cid, self.p, self.schema)

    @contextmanager
    def _reading(self, cid: UUID) -> Iterator[SQLHistory]:
        with self.datastore.transaction(commit=False) as curs:
            yield SQLHistory(self._through(curs), cid, self.p, self.schema, memo=True, chain=self._chain_of(cid))

    def writer(self, curs: Any, cid: UUID) -> SQLHistory:
        return SQLHistory(self._through(curs), cid, self.p, self.schema)

    def _emptied(self, index: Any, cid: UUID) -> Any:
        index.clear()
        return index

    def _transaction(self) -> Any:
        return self.datastore.transaction(commit=True)

    def _write(self, cid: UUID, state: Any, events: list[Any], curs: Any, rebuild: bool, follows: bool) -> int | None:
        """An append's index (`follows`, not a rebuild): the events folded into a `HeldIndex`
        (its reads go to the rows through `curs`), then its held rows written a table at a
        time (`executemany`: one write per key however many events of the append touch it,
        where each event's own statements were one per write). Other writes as the base."""
        if rebuild or not follows or not events:
            return super()._write(cid, state, events, curs, rebuild, follows)
        held = HeldIndex(self.writer(curs, cid))
        index_events(held, state, events)
        t, key, p = {name: (f'"{self.schema}".{name}' if self.schema else name) for name in TABLES}, str(cid), self.p
        if held.top.sources:
            curs.executemany(
                f"INSERT INTO {t['chatrecord_sources']} (cid, digest, first, last) VALUES ({p}, {p}, {p}, {p}) "
                "ON CONFLICT (cid, digest) DO UPDATE SET last = excluded.last",
                [(key, d, first, last) for d, (first, last) in held.top.sources.items()],
            )
        if held.top.records:
            curs.executemany(
                f"INSERT INTO {t['chatrecord_segments']} (cid, segment, run, message, version, cut, body) "
                f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}) ON CONFLICT (cid, segment) DO UPDATE SET "
                "cut = excluded.cut, body = excluded.body",
                [
                    (key, r.segment, r.run, r.message, r.version, int(r.cut), r.model_dump_json())
                    for r in held.top.records.values()
                ],
            )
        if held.top.messages:
            curs.executemany(
                f"INSERT INTO {t['chatrecord_messages']} (cid, number, live) VALUES ({p}, {p}, {p}) "
                "ON CONFLICT (cid, number) DO UPDATE SET live = excluded.live",
                [(key, number, int(live)) for number, live in held.top.messages.items()],
            )
        index = t["chatrecord_index"]
        curs.execute(
            f"INSERT INTO {index} (cid, version, outcomes) VALUES ({p}, {p}, {p}) "
            f"ON CONFLICT (cid) DO UPDATE SET version = excluded.version, "
            f"outcomes = {index}.outcomes + excluded.outcomes",
            (key, held.version, held.delta),
        )
        return held.delta

    @staticmethod
    def _through(curs: Any) -> Execute:
        def execute(sql: str, params: tuple[Any, ...]) -> Any:
            curs.execute(sql, params)
            return curs

        return execute
