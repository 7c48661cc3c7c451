"""The views' tables in the store's schema (`PostgresViewStorage`): rows written as JSON arrays, a turn read
in one prepared statement, a savepoint for pipeline mode, the views' lock."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import PostgresDatastore
from psycopg import pq

from adapters.backends.postgres.append import (
    OLD_GENERATION_FUNCTIONS,
    OLD_VIEWS_FUNCTION,
    AppendDocument,
    generation_function_name,
)
from adapters.backends.postgres.buffered_rows import PostgresBufferedRows
from adapters.backends.postgres.prefetched_rows import PrefetchedRows
from adapters.backends.postgres.prepared import run_prepared
from adapters.backends.postgres.queued_statements import QueuedStatements
from adapters.backends.postgres.schema import OLD_VIEWS_LOCK_ID, views_lock_id
from adapters.backends.sql.views_storage import POINTER, SQLViewStorage
from adapters.backends.sql.views_tables import aside_cid, table_names
from adapters.store.chain import CHAIN_TABLE
from adapters.store.crypto import ViewTexts
from adapters.views.caches import TAIL_EVENTS, TAIL_ROWS, PlacementCache
from adapters.views.ports import NeedsSnapshot, ReadMoved, not_updated
from adapters.views.storage_reads import Pointer, TurnInputRows, TurnRows
from projections.summary_rows import Summary

READ_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
"""How a read of several statements begins (`PostgresViewStorage.reading`): all see one snapshot."""


class OneStatement:
    """A cursor in autocommit that runs one statement. A second raises NeedsSnapshot before it is sent."""

    def __init__(self, cursor: Any) -> None:
        self._cursor, self._sent = cursor, False

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        if self._sent:
            raise NeedsSnapshot("a second statement: read again in one snapshot")
        self._sent = True
        self._cursor.execute(*args, **kwargs)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class PostgresViewStorage(SQLViewStorage):
    """The views' tables in the store's schema (`SQLViewStorage`), with a turn's rows read in one statement
    and a savepoint for pipeline mode."""

    p = "%s"
    buffered_rows = PostgresBufferedRows
    reads_ahead = True
    folds_in_parts = True
    reads_turn_in_one = True
    lock_row = " FOR UPDATE"
    summaries_storage = " WITH (fillfactor = 50)"
    """A summary row (about 1 KB) is rewritten by every append, and no index but its key's is on
    the summaries (the list's order is the list table's, `LISTING`): with half of each page left free,
    the update goes on the same page (a HOT update) and the server prunes the page's dead
    copies before it fills. With the default (100) the page fills first and each new copy goes
    to a new page, dead copies that a plain VACUUM frees but never gives back (docs/benchmarks.md,
    "Figures moved from docstrings")."""

    @contextmanager
    def reading(self, snapshot: bool = True) -> Iterator[Any]:
        """Yields a pooled cursor for a read of the read models. With `snapshot`: one REPEATABLE READ, READ
        ONLY transaction (`READ_SNAPSHOT`), ended by ROLLBACK. Every statement sees one version of the
        conversation. Without: autocommit, one statement only (`OneStatement`); a second raises
        NeedsSnapshot. Raises ReadMoved when a statement names a table a rebuild dropped."""
        try:
            with self.datastore.get_connection() as conn:
                if not snapshot:
                    yield OneStatement(conn.cursor())
                    return
                with conn.cursor() as curs:
                    curs.execute(READ_SNAPSHOT, prepare=False)
                    try:
                        yield curs
                    finally:
                        if conn.info.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
                            conn.execute("ROLLBACK", prepare=False)
        except PersistenceError as error:
            if isinstance(error.__cause__, psycopg.errors.UndefinedTable):
                raise ReadMoved(str(error)) from error
            raise

    def run(self, curs: Any, sql: str, params: Any) -> Any:
        """Runs a turn read's statement prepared (`run_prepared`): the server plans it once per connection."""
        return run_prepared(curs, sql, params)

    def turn_rows(
        self,
        curs: Any,
        cid: UUID,
        generation: int,
        newest: int,
        kept_at: int | None = None,
        entries: int | None = None,
        since: int | None = None,
        tail_from: int = 0,
        held_at: int | None = None,
    ) -> TurnRows | None:
        """Reads in one statement what a turn read needs besides older transcript messages (`TurnRows`).

        It reads the live pointer and the summary of `cid` in `generation`, the caller's guess. It reads
        the log's version, the newest `entries` (default `newest`) entries and the `newest` card
        outcomes. With `since` it adds the events' topics after it and the rows from `tail_from` (at most
        TAIL_ROWS + 1, after at most TAIL_EVENTS events). At version `kept_at` it skips entries, outcomes
        and rows (`skipped`); at `held_at`, entries and outcomes (`held`). Returns None when the pointer
        table is unknown or the guess was wrong."""
        if not self._has_pointer:
            return None
        row = self.run(
            curs,
            self._turn_rows_sql(generation),
            {
                "cid": str(cid),
                "key": cid,
                "newest": newest,
                "entries": entries or newest,
                "kept": -1 if kept_at is None else kept_at,
                "held": -1 if held_at is None else held_at,
                "since": -1 if since is None else since,
                "tail": tail_from,
                "events": TAIL_EVENTS,
                "rows": TAIL_ROWS + 1,
            },
        ).fetchone()
        if row is None:
            return None
        live = Pointer(int(row["generation"]), row["rules"], int(row["next"]))
        if live.generation != generation:
            return TurnRows(live, None, 0, "", "", matches=False)
        return TurnRows(
            live,
            row["head"],
            int(row["logged"] or 0),
            row["entries"] or "",
            row["outcomes"] or "",
            skipped=bool(row["skipped"]),
            held=bool(row["held"]) and not row["skipped"],
            topics=row["topics"],
            tail=row["tail"],
            tip=_bytes(row["tip"]),
            since_tip=_bytes(row["since_tip"]),
        )

    def prefetched_rows(
        self,
        curs: Any,
        generation: int,
        cid: UUID,
        entries: str | Sequence[str],
        outcomes: str | Sequence[str],
        newest: int,
        summary: Summary | None,
        known: PlacementCache | None,
    ) -> PrefetchedRows:
        """Returns a turn read's rows (`PrefetchedRows`) with the entries and outcomes `turn_rows` read; the
        rest is read prepared."""
        s = self.statements(generation)
        return PrefetchedRows(curs, s.t, str(cid), self.p, entries, outcomes, newest, self.texts, self.run, summary, known, s)

    def _turn_rows_sql(self, generation: int) -> str:
        """The statement of `turn_rows` on `generation`'s tables (built once per generation)."""
        found = self._turn_sql.get(("rows", generation))
        if found is None:
            found = self._turn_sql[("rows", generation)] = self._turn_rows_text(generation)
        return found

    def _turn_rows_text(self, generation: int) -> str:
        t = table_names(generation, self.schema)
        # the topics and the tail: only with `since`, within TAIL_EVENTS, and not for kept notes
        unkept = "CASE WHEN h.version = %(kept)s OR %(since)s < 0 OR h.version - %(since)s > %(events)s THEN NULL ELSE "
        return (
            "SELECT p.generation, p.rules, p.next, h.body AS head, h.version = %(kept)s AS skipped, "
            "h.version = %(held)s AS held, "
            f"(SELECT max(originator_version) FROM {self._t(self.events_table)} WHERE originator_id = %(key)s) AS logged, "
            "CASE WHEN h.version = %(kept)s OR h.version = %(held)s THEN NULL ELSE "
            "(SELECT string_agg(body, chr(30) ORDER BY seq) FROM (SELECT seq, body FROM "
            f"{t['entries']} WHERE cid = %(cid)s ORDER BY seq DESC LIMIT %(entries)s) e) END AS entries, "
            "CASE WHEN h.version = %(kept)s OR h.version = %(held)s THEN NULL ELSE "
            "(SELECT string_agg(body, chr(30) ORDER BY v, sub) FROM (SELECT v, sub, body FROM "
            f"{t['outcomes']} WHERE cid = %(cid)s ORDER BY v DESC, sub DESC LIMIT %(newest)s) o) END AS outcomes, "
            f"{unkept}(SELECT COALESCE(string_agg(DISTINCT topic, chr(30)), '') FROM "
            f"{self._t(self.events_table)} WHERE originator_id = %(key)s "
            "AND originator_version > %(since)s AND originator_version <= h.version) END AS topics, "
            f"{unkept}(SELECT COALESCE(string_agg(concat_ws(chr(31), idx, role, COALESCE(number::text, ''), "
            "COALESCE(block_end::text, ''), body), chr(30) ORDER BY idx), '') FROM (SELECT idx, role, number, "
            f"block_end, body FROM {t['messages']} WHERE cid = %(cid)s AND idx >= %(tail)s ORDER BY idx "
            "LIMIT %(rows)s) m) END AS tail, "
            + (
                f"(SELECT hash FROM {self._t(CHAIN_TABLE)} WHERE originator_id = %(key)s "
                "AND originator_version = h.version) AS tip, "
                f"(SELECT hash FROM {self._t(CHAIN_TABLE)} WHERE originator_id = %(key)s "
                "AND originator_version = %(since)s) AS since_tip "
                if self.chained
                else "NULL::bytea AS tip, NULL::bytea AS since_tip "
            )
            + f"FROM {self._t(POINTER)} p LEFT JOIN {t['heads']} h ON h.cid = %(cid)s WHERE p.id = 1"
        )

    def _turn_input_sql(self, generation: int) -> str:
        """The statement of `turn_input_rows` on `generation`'s tables (built once per generation)."""
        found = self._turn_sql.get(("input", generation))
        if found is None:
            found = self._turn_sql[("input", generation)] = self._turn_input_text(generation)
        return found

    def _turn_input_text(self, generation: int) -> str:
        t = table_names(generation, self.schema)
        return (
            "SELECT p.generation, p.rules, p.next, h.body AS head, "
            f"(SELECT max(originator_version) FROM {self._t(self.events_table)} WHERE originator_id = %(key)s) AS logged, "
            "CASE WHEN j.turn IS NULL THEN NULL ELSE (SELECT COALESCE(string_agg(body, chr(30) ORDER BY idx), '') FROM "
            f"{t['messages']} WHERE cid = %(cid)s AND idx < (j.turn ->> 'length')::bigint) END AS messages, "
            "CASE WHEN j.turn IS NULL THEN NULL ELSE (SELECT COALESCE(string_agg(body, chr(30) ORDER BY seq), '') FROM "
            f"(SELECT seq, body FROM {t['entries']} WHERE cid = %(cid)s AND seq <= (j.turn ->> 'version')::bigint "
            f"UNION ALL SELECT seq, body FROM {t['entries']} WHERE cid = %(aside)s) e) END AS entries, "
            "CASE WHEN j.turn IS NULL THEN NULL ELSE (SELECT COALESCE(string_agg(body, chr(30) ORDER BY v, sub), '') FROM "
            f"{t['outcomes']} WHERE cid = %(cid)s AND v <= (j.turn ->> 'version')::bigint) END AS outcomes "
            f"FROM {self._t(POINTER)} p LEFT JOIN {t['heads']} h ON h.cid = %(cid)s "
            "LEFT JOIN LATERAL (SELECT b -> 'turn' AS turn FROM (SELECT h.body::jsonb AS b) x "
            "WHERE (b ->> 'turn_intact')::boolean AND jsonb_typeof(b -> 'turn') = 'object') j ON true "
            "WHERE p.id = 1"
        )

    def turn_input_rows(self, curs: Any, cid: UUID, generation: int) -> TurnInputRows | None:
        """Reads in one prepared statement what the latest turn of `cid` saw, in `generation`, the caller's
        guess (`TurnInputRows`). The live pointer, the summary and the log's version. Where `turn_intact`
        holds, the turn's messages, entries and card outcomes, each kind joined by U+001E. Returns None
        when the pointer table is unknown or the guess was wrong."""
        if not self._has_pointer:
            return None
        row = self.run(
            curs,
            self._turn_input_sql(generation),
            {"cid": str(cid), "key": cid, "aside": aside_cid(str(cid))},
        ).fetchone()
        if row is None:
            return None
        live = Pointer(int(row["generation"]), row["rules"], int(row["next"]))
        if live.generation != generation:
            return TurnInputRows(live, None, 0, matches=False)
        return TurnInputRows(live, row["head"], int(row["logged"] or 0), row["messages"], row["entries"], row["outcomes"])

    @contextmanager
    def savepoint(self, curs: Any, on_failure: Callable[[Exception], object] | None = None) -> Iterator[Any]:
        """As `ViewStorage.savepoint`, through psycopg's nested transaction. In pipeline mode the savepoint
        is synced before release, so a failing view rolls back here. An error raised while taking it
        belongs to earlier statements and is raised. In an `AppendDocument` there is no savepoint and
        nothing is caught; the append then runs again synced."""
        if isinstance(curs, AppendDocument):
            yield curs  # no savepoint: a failure fails the append, which runs again synced
            return
        conn = curs.connection
        piped = conn.pgconn.pipeline_status != pq.PipelineStatus.OFF
        entered = False
        try:
            with conn.transaction(savepoint_name="chatrecord_views"):
                entered = True
                if piped:
                    with conn.pipeline():  # leaving a nested pipeline block syncs
                        yield curs
                else:
                    yield curs
        except Exception as error:  # the events stand; a later read catches up
            if not entered:
                raise
            retried = on_failure(error) if on_failure is not None else False
            if retried is not True:
                not_updated(error)

    def __init__(
        self, datastore: PostgresDatastore, events_table: str, chained: bool = False, *, texts: ViewTexts | None = None
    ) -> None:
        super().__init__(datastore, events_table, texts=texts)
        self.schema = datastore.schema
        self._views_lock = views_lock_id(self.schema)
        self.chained = chained
        """Whether the store keeps a hash chain (`chatrecord_chain`), whose hash at the summary's
        version a turn read takes (`TurnRows.tip`)."""
        self._turn_sql: dict[tuple[str, int], str] = {}  # a turn read's statements, per generation

    def _tables(self, curs: Any) -> list[str]:
        rows = self._x(
            curs, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.schema,)
        ).fetchall()
        return [r["table_name"] for r in rows]

    def _exists(self, curs: Any, name: str) -> bool:
        row = self._x(curs, "SELECT to_regclass(%s) AS t", (f'"{self.schema}".{name}',)).fetchone()
        return row["t"] is not None

    def queued(self) -> QueuedStatements:
        """Returns a cursor whose statements run on a pooled connection on their own thread (a rebuild's
        pages). A page's commit does not wait for WAL flush (synchronous_commit off). The switch's commit
        waits; a page lost in a crash before it is a gap a read fills."""
        return QueuedStatements(self.datastore.get_connection, begin=("BEGIN", "SET LOCAL synchronous_commit TO OFF"))

    def _dropped(self, curs: Any, generation: int) -> None:
        """Drops the generation's append function with its tables, and the functions older versions made for
        it."""
        self._x(curs, f'DROP FUNCTION IF EXISTS "{self.schema}".{generation_function_name(generation)}(jsonb)', ())
        for name in OLD_GENERATION_FUNCTIONS:  # made by the versions before
            old = name.format(generation=int(generation))
            self._x(curs, f'DROP FUNCTION IF EXISTS "{self.schema}".{old}(jsonb)', ())
        old = OLD_VIEWS_FUNCTION.format(generation=int(generation))  # a store an earlier version wrote into
        self._x(curs, f'DROP FUNCTION IF EXISTS "{self.schema}".{old}(text, jsonb)', ())

    def lock(self, curs: Any, exclusive: bool) -> None:
        """Takes this schema's views' lock (`views_lock_id`), shared or exclusive. Also takes the lock older
        versions took for every schema, so their running processes wait too."""
        if isinstance(curs, AppendDocument) and not exclusive:
            return  # the append function takes the shared lock before it writes the views
        if exclusive:
            self._x(curs, "SELECT pg_advisory_xact_lock(%s), pg_advisory_xact_lock(%s)", (self._views_lock, OLD_VIEWS_LOCK_ID))
        else:
            self._x(curs, "SELECT pg_advisory_xact_lock_shared(%s)", (self._views_lock,))

    def _id(self, cid: UUID) -> Any:
        return cid


def _bytes(value: Any) -> bytes | None:
    """Returns a bytea column's value as bytes (psycopg gives memoryview or bytes), None as None."""
    return None if value is None else bytes(value)
