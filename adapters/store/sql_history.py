"""The history index's tables in the store's database (`adapters.store.history_rows` holds a
conversation's rows): `HistoryTables` hands out a database's readers and writers, and each
backend's store factory makes its own (`adapters.backends`); `SQLHistoryTables` in a SQLite
file or a PostgreSQL schema. An append decided on an assumed history reads the index through
`AssumedBase`; `AssumptionFailed` says the index was not as assumed. What a process knows of
the index is `adapters.store.known_records`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast
from uuid import UUID

from adapters.store.history_rows import TABLES, Execute, HeldIndex, SQLHistory, create_statements, index_events
from adapters.store.known_records import IndexPuts
from domain.history_index import AssumedHistory, MemoryHistory, NotKnown, SegmentRecord


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
        puts: list[IndexPuts] | None = None,
    ) -> int | None:
        """Indexes `events` of conversation `cid` (`state`: the aggregate's before them), through
        `curs` or in a transaction of its own; with `rebuild`, the conversation's rows go first.
        `follows` says the caller saw the index at the version before the first event in this
        attempt (the events' insert fails if another writer came between), so it is not read.
        `assumed`: the events were decided on that history, which is checked with them where
        `checks_assumptions`. `puts`, where given, gets the rows the write puts, as (segment
        records by segment, whether each message is live by number), where the backend gathers
        them (`PostgresHistoryTables`: the append's `HeldIndex`); else nothing.
        Returns how many card outcomes the events added (negative when an edit cut some),
        None when nothing was indexed or the index does not count them (in memory)."""
        events = list(events)
        if curs is None:
            with self._transaction() as own:
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
