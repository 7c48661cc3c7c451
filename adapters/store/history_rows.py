"""One conversation's history index rows in the store's database: what the aggregate's invariants
need of the past (`domain.history_index`), as indexed rows, written in the transaction that
stores the events.

Tables (rule-independent, so a rebuild leaves them alone):
`chatrecord_index` (one row per conversation: the version indexed, the live card outcomes),
`chatrecord_segments` (a record per segment id, with its run, message and whether cut),
`chatrecord_messages` (user message numbers, live or cut) and `chatrecord_sources` (the input
lines by digest, with the versions of the events they stored). A redelivered line or segment
is an index lookup; nothing of it lives in the aggregate or its snapshot.

`SQLHistory` reads (and, given the event transaction's cursor, writes) one conversation's
rows; `index_events` records events with `domain.history_index.index_event`; `HeldIndex` holds
an append's writes for one statement per table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast
from uuid import UUID

from domain.events import ConversationEvent
from domain.history_index import LayeredHistory, SegmentRecord, index_event
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
        self._prefetch(
            "source",
            digests,
            None,
            f"SELECT digest, first, last FROM {self.t['chatrecord_sources']} WHERE cid = ? AND digest IN",
            lambda row: (row["digest"], (int(row["first"]), int(row["last"]))),
        )
        self._prefetch(
            "segment",
            segments,
            None,
            f"SELECT segment, body FROM {self.t['chatrecord_segments']} WHERE cid = ? AND segment IN",
            lambda row: (row["segment"], SegmentRecord.model_validate_json(row["body"])),
        )
        self._prefetch(
            "run_cut",
            runs,
            False,
            f"SELECT DISTINCT run FROM {self.t['chatrecord_segments']} WHERE cid = ? AND cut = 1 AND run IN",
            lambda row: (row["run"], True),
        )

    def _prefetch(
        self, kind: str, wanted: Iterable[str], absent: object, select: str, found: Callable[[Any], tuple[str, object]]
    ) -> None:
        """Memoizes (`kind`, value) for each of `wanted` not memoized yet: `absent`, unless a
        row of `select` (ending in `... IN`, the values appended) answers it as `found(row)`
        gives, LOOKUPS_AT_ONCE values a statement."""
        memo = self._memo
        assert memo is not None
        todo = [v for v in dict.fromkeys(wanted) if (kind, v) not in memo]
        for at in range(0, len(todo), LOOKUPS_AT_ONCE):
            part = todo[at : at + LOOKUPS_AT_ONCE]
            for v in part:
                memo[(kind, v)] = absent
            for row in self._x(f"{select} ({', '.join('?' * len(part))})", *part).fetchall():
                value, answer = found(row)
                memo[(kind, value)] = answer

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
