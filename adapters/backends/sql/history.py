"""The history index in a SQL database (`SQLHistoryTables`), the port `HistoryIndex` on SQLite or a
PostgreSQL schema.

Tables, rule-independent, so a rebuild leaves them alone:
- `chatrecord_index`: per conversation, the version indexed and the uncut card outcomes;
- `chatrecord_segments`: per segment id, its run, message and whether cut;
- `chatrecord_messages`: user message numbers, uncut or cut (column `live`);
- `chatrecord_sources`: input lines by digest (keyed, `adapters.store.line_digests`), with the versions they stored.

`SQLHistory` reads one conversation's rows, and writes them given the events' cursor. Statements are
built once per dialect (`history_statements`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, cast
from uuid import UUID

from adapters.backends.sql.dialect import SQLITE, Dialect
from adapters.backends.sql.history_statements import HistoryStatements, create_statements, history_statements
from adapters.store.history_rows import held_index, index_events, write_folded
from adapters.store.known_records import IndexPuts
from adapters.store.ports import HistoryIndex
from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, MemoryHistory, SegmentRecord

Execute = Callable[[str, tuple[Any, ...]], Any]
"""Runs a statement with its parameters; returns a cursor (`fetchone`, `fetchall`)."""

T = TypeVar("T")

LOOKUPS_AT_ONCE = 500
"""The most lookups one statement of `SQLHistory.prefetch_many` asks for."""


class SQLHistory:
    """One conversation's index rows through `execute(sql, params) -> cursor`, in the statements
    of `sql`. Reads see the writes of the same transaction. `memo`: each lookup is asked once
    (one command's lookups)."""

    def __init__(
        self,
        execute: Execute,
        cid: UUID,
        sql: HistoryStatements,
        memo: bool = False,
        chain: tuple[str, Any] | None = None,
    ) -> None:
        self._run, self.cid, self.sql = execute, str(cid), sql
        self._chain = chain
        """(the hash chain's table, the conversation's id as that table keys it): `prefetch`
        then reads the hash of the event at the index's version too (`tip`)."""
        self.tip: bytes | None = None
        """After `prefetch` with `chain`: the chain's hash of the event at `version`, None if none."""
        self._memo: dict[tuple[Any, ...], Any] | None = {} if memo else None
        self.added = 0
        """The card outcomes this index's writes added (negative when an edit cut some)."""

    def _x(self, statement: str, *args: Any) -> Any:
        return self._run(statement, (self.cid, *args))

    def _once(self, key: tuple[Any, ...], read: Callable[[], T]) -> T:
        """Returns `read()`, asked once per key when this index only reads (one command's lookups)."""
        if self._memo is None:
            return read()
        if key not in self._memo:
            self._memo[key] = read()
        return cast(T, self._memo[key])  # the value `read` gave for this key

    def _index_row(self) -> tuple[int, int]:
        def read() -> tuple[int, int]:
            row = self._x(self.sql.index_row).fetchone()
            return (int(row["version"]), int(row["outcomes"])) if row else (0, 0)

        return self._once(("index",), read)

    def prefetch(self, digest: str | None, segment: str | None = None, run: str | None = None, legacy: str | None = None) -> None:
        """Reads in one statement the index row and, if given, line `digest`'s, segment `segment`'s and run
        `run`'s cut rows, and the line's row by its plain digest `legacy`, for one command (`memo`). Does
        nothing when this index also writes."""
        if self._memo is None:
            return
        chain = self._chain
        statement = self.sql.prefetch(chain[0] if chain is not None else None)
        tip_args = () if chain is None else (chain[1],)
        row = self._x(statement, digest or "", segment or "", run or "", legacy or "", *tip_args).fetchone()
        self.tip = bytes(row["tip"]) if row["tip"] is not None else None
        self._memo[("index",)] = (int(row["version"] or 0), int(row["outcomes"] or 0))
        if digest:
            self._memo[("source", digest)] = (int(row["first"]), int(row["last"])) if row["first"] is not None else None
        if legacy:
            found = row["legacy_first"] is not None
            self._memo[("source", legacy)] = (int(row["legacy_first"]), int(row["legacy_last"])) if found else None
        if segment:
            body = row["segment"]
            self._memo[("segment", segment)] = SegmentRecord.model_validate_json(body) if body is not None else None
        if run:
            self._memo[("run_cut", run)] = row["run_cut"] is not None

    def prefetch_many(self, digests: Iterable[str], segments: Iterable[str], runs: Iterable[str] = ()) -> None:
        """Reads many lines' (`digests`), segments' and runs' rows at once, a statement per LOOKUPS_AT_ONCE,
        for one command (`memo`). Does nothing when this index also writes. Each lookup is then answered
        without a read."""
        if self._memo is None:
            return
        sql = self.sql
        self._prefetch(
            "source", digests, None, sql.sources_in, lambda row: (row["digest"], (int(row["first"]), int(row["last"])))
        )
        self._prefetch(
            "segment",
            segments,
            None,
            sql.segments_in,
            lambda row: (row["segment"], SegmentRecord.model_validate_json(row["body"])),
        )
        self._prefetch("run_cut", runs, False, sql.cut_runs_in, lambda row: (row["run"], True))

    def _prefetch(
        self, kind: str, wanted: Iterable[str], absent: object, select: str, found: Callable[[Any], tuple[str, object]]
    ) -> None:
        """Memoizes (`kind`, value) for each unmemoized value of `wanted`: `absent`, or `found(row)` for a
        row of `select`. LOOKUPS_AT_ONCE values a statement."""
        memo = self._memo
        assert memo is not None
        todo = [v for v in dict.fromkeys(wanted) if (kind, v) not in memo]
        for at in range(0, len(todo), LOOKUPS_AT_ONCE):
            part = todo[at : at + LOOKUPS_AT_ONCE]
            for v in part:
                memo[(kind, v)] = absent
            for row in self._x(self.sql.within(select, len(part)), *part).fetchall():
                value, answer = found(row)
                memo[(kind, value)] = answer

    # ---------------------------------------------------------------- reads

    @property
    def version(self) -> int:
        """Returns the version of the last event indexed, 0 before the first."""
        return self._index_row()[0]

    def segment(self, segment: str) -> SegmentRecord | None:
        def read() -> SegmentRecord | None:
            row = self._x(self.sql.segment, segment).fetchone()
            return SegmentRecord.model_validate_json(row["body"]) if row else None

        return self._once(("segment", segment), read)

    def segments_from(self, message: int) -> list[SegmentRecord]:
        rows = self._x(self.sql.segments_from, message).fetchall()
        return [SegmentRecord.model_validate_json(r["body"]) for r in rows]

    def run_cut(self, run: str) -> bool:
        return self._once(("run_cut", run), lambda: self._x(self.sql.run_cut, run).fetchone() is not None)

    def message_uncut(self, number: int) -> bool:
        row = self._x(self.sql.message_uncut, number).fetchone()
        return bool(row and row["live"])

    def messages_after(self, number: int) -> list[int]:
        return [int(r["number"]) for r in self._x(self.sql.messages_after, number).fetchall()]

    def outcomes(self) -> int:
        return self._index_row()[1]

    def source(self, digest: str) -> tuple[int, int] | None:
        def read() -> tuple[int, int] | None:
            row = self._x(self.sql.source, digest).fetchone()
            return (int(row["first"]), int(row["last"])) if row else None

        return self._once(("source", digest), read)

    # ---------------------------------------------------------------- writes

    def put_segment(self, record: SegmentRecord) -> None:
        self._x(
            self.sql.put_segment,
            record.segment,
            record.run,
            record.message,
            record.version,
            int(record.cut),
            record.model_dump_json(),
        )

    def put_message(self, number: int, uncut: bool) -> None:
        self._x(self.sql.put_message, number, int(uncut))

    def add_outcomes(self, count: int) -> None:
        self.added += count
        if count:  # an upsert: the conversation's row may not exist before its first outcome
            self._x(self.sql.add_outcomes, count)

    def put_source(self, digest: str, version: int) -> None:
        self._x(self.sql.put_source, digest, version, version)

    def set_version(self, version: int) -> None:
        self._x(self.sql.set_version, version)

    def clear(self) -> None:
        """Deletes the conversation's index rows (before it is indexed again from its log)."""
        for statement in self.sql.clear:
            self._x(statement)


class _Fetched:
    """The rows of one statement, fetched inside its own read transaction."""

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows


class SQLHistoryTables(HistoryIndex):
    """The index tables in a SQL database (`datastore`, the library's) in `dialect`. Readers use a read
    transaction per lookup; one command's lookups share one (`reading`). Writers use the events'
    transaction's cursor. `chain`: the chain's table and a function from a conversation's UUID to its key
    there; a command's lookups then read its last hash too."""

    def __init__(self, datastore: Any, dialect: Dialect = SQLITE, chain: tuple[str, Any] | None = None) -> None:
        self.datastore, self.dialect, self.chain = datastore, dialect, chain
        self.sql = history_statements(dialect)
        self.schema = dialect.schema

    def chain_of(self, cid: UUID) -> tuple[str, Any] | None:
        """Returns (the chain's table, the id it keys `cid` by), None where the store keeps no chain."""
        return None if self.chain is None else (self.chain[0], self.chain[1](cid))

    def create(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            for statement in create_statements(self.dialect):
                curs.execute(statement)

    def reader(self, cid: UUID) -> SQLHistory:
        datastore = self.datastore

        def execute(sql: str, params: tuple[Any, ...]) -> _Fetched:
            with datastore.transaction(commit=False) as curs:
                curs.execute(sql, params)
                return _Fetched(list(curs.fetchall()))

        return SQLHistory(execute, cid, self.sql)

    def reading(self, cid: UUID | None) -> AbstractContextManager[Any]:
        return self._reading(cid)

    @contextmanager
    def _reading(self, cid: UUID | None) -> Iterator[Any]:
        if cid is None:
            yield MemoryHistory()
            return
        with self.datastore.transaction(commit=False) as curs:
            yield SQLHistory(self.through(curs), cid, self.sql, memo=True, chain=self.chain_of(cid))

    def writer(self, curs: Any, cid: UUID) -> SQLHistory:
        """Returns the index of `cid` written through `curs`, the append's cursor."""
        return SQLHistory(self.through(curs), cid, self.sql)

    def write(
        self,
        cid: UUID,
        state: Any,
        events: Sequence[ConversationEvent],
        curs: Any = None,
        *,
        rebuild: bool = False,
        follows: bool = False,
        assumed: AssumedHistory | None = None,
        puts: list[IndexPuts] | None = None,
    ) -> int | None:
        events = list(events)
        if curs is None:
            with self.datastore.transaction(commit=True) as own:
                return self._checked_write(cid, state, events, own, rebuild, follows, assumed, puts)
        return self._checked_write(cid, state, events, curs, rebuild, follows, assumed, puts)

    def _checked_write(
        self,
        cid: UUID,
        state: Any,
        events: list[Any],
        curs: Any,
        rebuild: bool,
        follows: bool,
        assumed: AssumedHistory | None,
        puts: list[IndexPuts] | None = None,
    ) -> int | None:
        """The write through `curs`. An append's index folds the events into a `held_index`, then writes its
        rows a table at a time (`executemany`, one write per key). Other writes go event by event
        (`write_folded`)."""
        if assumed is not None:
            raise ValueError("this index cannot check an assumed history (checks_assumptions)")
        if rebuild or not follows or not events:
            return self._write(cid, state, events, curs, rebuild, follows)
        held = held_index(self.writer(curs, cid))
        index_events(held, state, events)
        sql, key = self.sql, str(cid)
        if held.top.sources:
            curs.executemany(sql.upsert_sources, [(key, d, first, last) for d, (first, last) in held.top.sources.items()])
        if held.top.records:
            curs.executemany(
                sql.upsert_segments,
                [
                    (key, r.segment, r.run, r.message, r.version, int(r.cut), r.model_dump_json())
                    for r in held.top.records.values()
                ],
            )
        if held.top.messages:
            curs.executemany(sql.upsert_messages, [(key, number, int(uncut)) for number, uncut in held.top.messages.items()])
        curs.execute(sql.upsert_index, (key, held.version, held.delta))
        return held.delta

    def _write(self, cid: UUID, state: Any, events: list[Any], curs: Any, rebuild: bool, follows: bool) -> int | None:
        return write_folded(self.writer(curs, cid), state, events, rebuild=rebuild, follows=follows, emptied=_emptied)

    @staticmethod
    def through(curs: Any) -> Execute:
        """Returns what runs a statement through `curs` and answers with it."""

        def execute(sql: str, params: tuple[Any, ...]) -> Any:
            curs.execute(sql, params)
            return curs

        return execute


def _emptied(index: Any) -> Any:
    index.clear()
    return index
