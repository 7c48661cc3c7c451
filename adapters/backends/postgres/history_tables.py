"""The history index in the store's schema (`PostgresHistoryTables`), and the check of an assumed index."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL

from adapters.backends.postgres.append import ASSUMPTION_FUNCTION, AppendDocument, assumption_function_statement
from adapters.backends.postgres.schema import create_once, schema_lock_name
from adapters.backends.sql.dialect import POSTGRES_PARAM, Dialect
from adapters.backends.sql.history import SQLHistory, SQLHistoryTables
from adapters.backends.sql.history_statements import TABLES as HISTORY_TABLES
from adapters.store.chain import CHAIN_TABLE
from adapters.store.history_rows import AssumedBase, held_index, index_events
from adapters.store.known_records import IndexPuts
from adapters.store.ports import HistoryIndex
from domain.events import ConversationEvent
from domain.history_index import AssumedHistory, MemoryHistory


def _marks(rows: Sequence[tuple[Any, ...]]) -> str:
    """Returns the placeholders of a VALUES list of `rows` (equal-length tuples): `(%s, %s), (%s, %s)`."""
    one = f"({', '.join(['%s'] * len(rows[0]))})"
    return ", ".join([one] * len(rows))


class PostgresHistoryTables(HistoryIndex):
    """The history index in the store's schema, created once with it. One command's lookups are autocommit
    reads, each its own statement. They need not agree: the events carry the next version, and their
    insert fails if another writer came between. What both databases run is `tables`'."""

    def __init__(self, datastore: PostgresDatastore) -> None:
        self.datastore = datastore
        self.tables = SQLHistoryTables(
            datastore, Dialect(POSTGRES_PARAM, datastore.schema), (f'"{datastore.schema}".{CHAIN_TABLE}', lambda cid: cid)
        )
        self.t = {name: f'"{datastore.schema}".{name}' for name in HISTORY_TABLES}
        self.chain_table = f'"{datastore.schema}".{CHAIN_TABLE}'
        self.assumption_function = f'"{datastore.schema}".{ASSUMPTION_FUNCTION}'
        self._checks: bool | None = None
        self._condition = self._holds_condition()
        """The condition of `_holds`, built once."""

    @property
    def checks_assumptions(self) -> bool:  # type: ignore[override]  # a class attribute elsewhere, asked once here
        """True once `ASSUMPTION_FUNCTION` is found or made (once per process). False where it cannot be had
        (a read-only database, no CREATE); commands then read the index and assume nothing."""
        checks = self._checks
        if checks is None:
            schema = self.datastore.schema
            exists = SQL("SELECT to_regprocedure({}) IS NOT NULL").format(f"{self.assumption_function}()")
            try:
                with self.datastore.get_connection() as conn:
                    create_once(conn, schema_lock_name(schema), exists, [assumption_function_statement(schema)])
                checks = True
            except (psycopg.Error, PersistenceError):
                checks = False
            self._checks = checks
        return checks

    def create(self) -> None:
        """Does nothing: the tables are made with the store's schema (`PostgresFactory`)."""

    def reader(self, cid: UUID) -> SQLHistory:
        return self.tables.reader(cid)

    @contextmanager
    def reading(self, cid: UUID | None) -> Iterator[Any]:
        if cid is None:
            yield MemoryHistory()
            return
        tables = self.tables
        with self.datastore.cursor() as curs:  # autocommit reads, no transaction to end
            yield SQLHistory(tables.through(curs), cid, tables.sql, memo=True, chain=tables.chain_of(cid))

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
        if rebuild or not follows or not events:
            return self.tables.write(cid, state, events, curs, rebuild=rebuild, follows=follows, assumed=assumed)
        if curs is None:
            with self.datastore.transaction(commit=True) as own:
                return self._append_write(cid, state, events, own, assumed, puts)
        return self._append_write(cid, state, events, curs, assumed, puts)

    def _holds_condition(self) -> str:
        t = self.t
        return (
            f"EXISTS (SELECT 1 FROM {t['chatrecord_index']} WHERE cid = %s AND version = %s AND outcomes = %s) "
            f"AND NOT EXISTS (SELECT 1 FROM {t['chatrecord_sources']} WHERE cid = %s AND digest = ANY(%s::text[])) "
            f"AND NOT EXISTS (SELECT 1 FROM {t['chatrecord_segments']} WHERE cid = %s AND segment = ANY(%s::text[])) "
            f"AND NOT EXISTS (SELECT 1 FROM {t['chatrecord_segments']} WHERE cid = %s AND run = ANY(%s::text[]) "
            f"AND cut = 1) AND (%s::bytea IS NULL OR EXISTS (SELECT 1 FROM {self.chain_table} WHERE originator_id = %s::uuid "
            "AND originator_version = %s AND hash = %s::bytea)) "
            f"AND NOT EXISTS (SELECT 1 FROM unnest(%s::text[], %s::text[]) AS r(segment, body) WHERE NOT EXISTS "
            f"(SELECT 1 FROM {t['chatrecord_segments']} WHERE cid = %s AND segment = r.segment AND body = r.body)) "
            f"AND NOT EXISTS (SELECT 1 FROM unnest(%s::bigint[], %s::int[]) AS m(number, live) WHERE NOT EXISTS "
            f"(SELECT 1 FROM {t['chatrecord_messages']} WHERE cid = %s AND number = m.number AND live = m.live)) "
            f"AND NOT EXISTS (SELECT 1 FROM unnest(%s::bigint[], %s::bigint[]) AS f(message, n) WHERE "
            f"(SELECT count(*) FROM {t['chatrecord_segments']} WHERE cid = %s AND message >= f.message AND cut = 0) <> f.n) "
            f"AND NOT EXISTS (SELECT 1 FROM unnest(%s::bigint[], %s::bigint[]) AS a(number, n) WHERE "
            f"(SELECT count(*) FROM {t['chatrecord_messages']} WHERE cid = %s AND number > a.number AND live = 1) <> a.n)"
        )

    def _holds(self, cid: UUID, assumed: AssumedHistory) -> tuple[str, tuple[Any, ...]]:
        """Returns the SQL condition, with parameters, that `assumed` still holds for `cid`.

        It holds when: the index is at `assumed.version` with `assumed.count` card outcomes; no line,
        segment or cut run taken as unrecorded is there; each known record and message is there exactly
        (`records`, `messages`); the uncut counts match (`froms`, `afters`). Where false, the check calls
        `ASSUMPTION_FUNCTION`, which raises `ASSUMPTION_FAILED`. `EventRecorder` turns that into
        AssumptionFailed."""
        key = str(cid)
        return (
            self._condition,
            (
                key,
                assumed.version,
                assumed.count,
                key,
                assumed.digests,
                key,
                assumed.segments,
                key,
                assumed.runs,
                assumed.tip,
                key,
                assumed.version,
                assumed.tip,
                list(assumed.records),
                [r.model_dump_json() for r in assumed.records.values()],
                key,
                list(assumed.messages),
                [int(live) for live in assumed.messages.values()],
                key,
                list(assumed.froms),
                list(assumed.froms.values()),
                key,
                list(assumed.afters),
                list(assumed.afters.values()),
                key,
            ),
        )

    def _append_write(
        self, cid: UUID, state: Any, events: list[Any], curs: Any, assumed: AssumedHistory | None, puts: list[IndexPuts] | None
    ) -> int | None:
        """An append's index writes in one statement. An assumed append sends the writes its decision
        folded (`AssumedHistory.decided`: the same events over the same answers, which the `assumed`
        check covers); otherwise the events are folded into a `held_index`. The `assumed` check and
        every held row are data-modifying CTEs of one INSERT. Each key is written once; all see the
        index as it stood before."""
        held = assumed.decided if assumed is not None else None
        if held is None:
            base = self.tables.writer(curs, cid)  # the records `assumed` knows are not read again (checked with it)
            held = held_index(AssumedBase(base, assumed) if assumed is not None else base)
            index_events(held, state, events)
        else:
            held.set_version(events[-1].originator_version)
        if puts is not None:  # the rows written, which the writer's known records follow (`IndexRecordsCache`)
            puts.append((held.top.records, held.top.messages))
        t, key = self.t, str(cid)
        if isinstance(curs, AppendDocument):
            if assumed is not None:
                curs.put(
                    "assumed",
                    {
                        "version": assumed.version,
                        "count": assumed.count,  # each key checked once
                        "digests": list(dict.fromkeys(assumed.digests)),
                        "segments": list(dict.fromkeys(assumed.segments)),
                        "runs": list(dict.fromkeys(assumed.runs)),
                        "records": [[g, r.model_dump_json()] for g, r in assumed.records.items()],
                        "live": [[n, int(live)] for n, live in assumed.messages.items()],
                        "from": [[m, count] for m, count in assumed.froms.items()],
                        "after": [[n, count] for n, count in assumed.afters.items()],
                        "tip": base64.b64encode(assumed.tip).decode() if assumed.tip is not None else None,
                    },
                )
            curs.put(
                "index",
                {
                    "sources": [[d, first, last] for d, (first, last) in held.top.sources.items()],
                    "segments": [
                        [r.segment, r.run, r.message, r.version, int(r.cut), r.model_dump_json()]
                        for r in held.top.records.values()
                    ],
                    "messages": [[number, int(live)] for number, live in held.top.messages.items()],
                    "version": held.version,
                    "added": held.delta,
                },
                HISTORY_TABLES,
            )
            return held.delta
        ctes: list[str] = []
        params: list[Any] = []
        if assumed is not None:
            condition, checks = self._holds(cid, assumed)
            ctes.append(f"ok AS MATERIALIZED (SELECT CASE WHEN {condition} THEN 1 ELSE {self.assumption_function}() END AS one)")
            params.extend(checks)
        if held.top.sources:
            rows: list[tuple[Any, ...]] = [(key, d, first, last) for d, (first, last) in held.top.sources.items()]
            ctes.append(
                f"s AS (INSERT INTO {t['chatrecord_sources']} (cid, digest, first, last) VALUES {_marks(rows)} "
                "ON CONFLICT (cid, digest) DO UPDATE SET last = excluded.last)"
            )
            params.extend(v for row in rows for v in row)
        if held.top.records:
            rows = [
                (key, r.segment, r.run, r.message, r.version, int(r.cut), r.model_dump_json()) for r in held.top.records.values()
            ]
            ctes.append(
                f"g AS (INSERT INTO {t['chatrecord_segments']} (cid, segment, run, message, version, cut, body) "
                f"VALUES {_marks(rows)} ON CONFLICT (cid, segment) DO UPDATE SET cut = excluded.cut, "
                "body = excluded.body)"
            )
            params.extend(v for row in rows for v in row)
        if held.top.messages:
            rows = [(key, number, int(live)) for number, live in held.top.messages.items()]
            ctes.append(
                f"m AS (INSERT INTO {t['chatrecord_messages']} (cid, number, live) VALUES {_marks(rows)} "
                "ON CONFLICT (cid, number) DO UPDATE SET live = excluded.live)"
            )
            params.extend(v for row in rows for v in row)
        index = t["chatrecord_index"]
        head = f"WITH {', '.join(ctes)} " if ctes else ""
        source = "FROM ok WHERE ok.one = 1" if assumed is not None else ""  # used, so it is computed
        curs.execute(
            f"{head}INSERT INTO {index} (cid, version, outcomes) SELECT %s, %s, %s {source} "
            f"ON CONFLICT (cid) DO UPDATE SET version = excluded.version, "
            f"outcomes = {index}.outcomes + excluded.outcomes",
            (*params, key, held.version, held.delta),
        )
        return held.delta
