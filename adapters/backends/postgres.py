"""The PostgreSQL backend: the library's persistence, with its schema created once and writes that end.

`PostgresFactory` makes the chained application recorder (`ChainedPostgresRecorder`) and the
data keys (`PostgresDataKeys`), and hands out the schema's pieces of the store: the history
index (`PostgresHistoryTables`), the views' tables (`PostgresBackend`) and the kept idempotency
keys (`adapters.store.idempotency.SQLKeys`).

- **Schema once.** The library runs every CREATE statement each time a process opens a store;
  two processes at once then fail (`tuple concurrently updated`, an IntegrityError on
  `pg_type`) and an index creation queues behind other writers. `PostgresFactory` builds the
  library's recorders without that; `create_once` asks the catalog in one query whether the
  store's objects exist and only when one is missing creates them, in one transaction under an
  advisory lock keyed by the schema, so concurrent first processes wait for each other. A
  store whose tables exist is only read at open, so reading commands work on a read-only
  database (a hot standby, `default_transaction_read_only=on`).
- **Large writes without pipeline mode.** The library appends events in psycopg's pipeline
  mode, whose send loop can stop with part of a large message unsent and then wait for a reply
  that never comes (a segment of 30,000–50,000 steps hung forever, holding the events table's
  write lock). `EventRecorder` pipelines an append of at most `PIPELINE_BYTES` (the common
  case: the history index, the views and the chain go out without a round trip each) and does
  the same steps (table lock, NOTIFY, INSERT … RETURNING) in one ordinary transaction for a
  larger one.
- **Turn reads prepared, appends not.** The pool's connections prepare no statement by
  themselves (`PostgresFactory`: a pipelined append must never send a named statement). A turn
  read (`PostgresBackend.reading`) runs in autocommit, without BEGIN and ROLLBACK, and its two
  statements run prepared (`PostgresBackend.run`), with the connection's `prepare_threshold`
  set only while each runs, outside pipeline mode: the server plans them once per connection.
- **Timeouts.** A write waits at most `POSTGRES_LOCK_TIMEOUT` seconds (default
  `WRITE_LOCK_TIMEOUT`) for the events table's write lock, and any statement runs at most
  `POSTGRES_STATEMENT_TIMEOUT` seconds (default `STATEMENT_TIMEOUT`); then it fails with the
  server's error (`adapters.store.settings.store_problem` makes it one line) instead of holding the
  store.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson
import psycopg
import psycopg.errors
from eventsourcing import postgres as es_postgres
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    IntegrityError,
    InterfaceError,
    Notification,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.utils import retry, strtobool
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Composable, Composed, Identifier
from psycopg_pool import PoolTimeout

from adapters.backends import StoreFactory, one_line
from adapters.store.chain import (
    CHAIN_TABLE,
    PAGE,
    ChainBroken,
    ChainedRecorder,
    ChainHeads,
    Link,
    Stored,
    run_inline,
    state_bytes,
)
from adapters.store.history import TABLES as HISTORY_TABLES
from adapters.store.history import AssumedBase, AssumptionFailed, HeldIndex, SQLHistory, SQLHistoryTables, index_events
from adapters.store.history import create_statements as history_statements
from adapters.store.idempotency import COLUMNS, TABLE, SQLKeys
from adapters.store.keys import KEYS_TABLE, MASTER_TABLE, DataKeys, Row
from adapters.store.serialization import originator_uuid
from adapters.views.backends import (
    POINTER,
    NeedsSnapshot,
    Pointer,
    QueuedStatements,
    ReadMoved,
    SQLBackend,
    TurnRows,
    not_updated,
)
from adapters.views.rendered import TAIL_EVENTS, TAIL_ROWS
from adapters.views.rows import BufferedRows, table_names
from domain.errors import ChatrecordError
from domain.history import AssumedHistory

WRITE_LOCK_TIMEOUT = 10
"""Seconds a write waits for another process's write on the events table (`lock_timeout`)."""
STATEMENT_TIMEOUT = 60
"""Seconds any one statement may run (`statement_timeout`), reads and writes alike."""
PIPELINE_BYTES = 256 * 1024
"""An append whose events' states hold at most this many bytes goes through psycopg's pipeline
mode (as the library's own recorder does); a larger one through an ordinary transaction."""
BATCH_DOCUMENT_BYTES = 16 * 1024 * 1024
"""A batch of lines (`ConversationStore.handle_batch`, which saves with `batch=True`) whose events'
states hold more than PIPELINE_BYTES, up to this many, still goes as append documents, one
statement each (`_append_in_one_call` uses no pipeline mode); a larger one as `_append_plain`."""
CONNECTION_ATTEMPTS = 5
"""Tries of a write whose connection failed (not of one that timed out)."""
LOCK_KEY = 0x63687276  # "chrv": the views' lock of versions before 2 December 2026, one for every schema
PREPARE_THRESHOLD = 5
"""psycopg's own default, set on a connection only while a turn read's statement runs prepared
(`PostgresBackend.run`); the statement asks for preparing itself, so the number is not used."""


_AT_ONCE = threading.local()
"""`on` while this thread gathers an append for one call (`EventRecorder._append_in_one_call`)."""
_AGAIN = object()
"""What `EventRecorder._append_in_one_call` returns when the append is to be done synced."""

Statement = str | Composable


class SchemaNotCreated(ChatrecordError):
    """Raised when the store's tables are missing and cannot be created: a read-only database,
    a role without CREATE on the schema, or another database error (named in the message)."""


def views_lock_key(schema: str) -> int:
    """Returns the advisory lock (a signed 64-bit key) of the views' generations in `schema`:
    appends take it shared, a rebuild's switch exclusive. One per schema, so a rebuild in one
    store's schema holds up no append in another's (LOCK_KEY was one for the whole database)."""
    digest = hashlib.blake2b(f"chatrecord views {schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_key(schema: str) -> str:
    """Returns the advisory lock name that serialises creating the store in `schema`."""
    return f"chatrecord schema {schema}"


def create_once(
    conn: psycopg.Connection[Any], key: str, exists: Statement, statements: Iterable[Statement]
) -> bool:
    """Runs `statements` on `conn` unless the query `exists` (one catalog query returning one
    boolean, e.g. `SELECT to_regclass('s.t') IS NOT NULL`) says they ran already; returns True
    when it ran them.

    They run in one transaction that first takes the transaction-scoped advisory lock named
    `key` and asks `exists` again, so of several processes at once one creates and the others
    wait and then find everything there. A statement that fails with DuplicateObject (a type
    left by an older version) is skipped. `conn` is left in its own transaction state.
    Raises psycopg's errors (e.g. ReadOnlySqlTransaction on a read-only database).
    """
    if _holds(conn, exists):
        return False
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
        if _holds(conn, exists):
            return False
        for statement in statements:
            try:
                with conn.transaction():  # a savepoint: one duplicate does not end the rest
                    conn.execute(statement, prepare=False)  # type: ignore[arg-type]
            except psycopg.errors.DuplicateObject:
                continue
    return True


def _holds(conn: psycopg.Connection[Any], query: Statement) -> bool:
    row = conn.execute(query, prepare=False).fetchone()  # type: ignore[arg-type]
    value = row[0] if isinstance(row, tuple) else next(iter(row.values())) if row else None
    return bool(value)


def _regclass(schema: str, name: str) -> Composed:
    return SQL("to_regclass({}) IS NOT NULL").format(f'"{schema}"."{name}"')


def table_exists(schema: str, table: str) -> Composed:
    """Returns the catalog query (for `create_once`) that says whether `schema.table` exists."""
    return SQL("SELECT ") + _regclass(schema, table)


def schema_exists_query(recorder: es_postgres.PostgresAggregateRecorder) -> Composed:
    """Returns the one catalog query that says whether `recorder`'s table, type, index and
    insert function all exist."""
    schema = recorder.datastore.schema
    checks = [
        _regclass(schema, recorder.events_table_name),
        SQL("to_regtype({}) IS NOT NULL").format(f'"{schema}"."{recorder.stored_event_type_name}"'),
    ]
    checks.extend(_regclass(schema, table) for table in getattr(recorder, "extra_tables", ()))
    if isinstance(recorder, es_postgres.PostgresApplicationRecorder):
        checks.append(_regclass(schema, recorder.notification_id_index_name))
        checks.append(SQL("EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                          "WHERE n.nspname = {} AND p.proname = {})").format(
            schema, recorder.pg_function_name_insert_events))
    return SQL("SELECT ") + SQL(" AND ").join(checks)


def ensure_schema(recorder: es_postgres.PostgresAggregateRecorder) -> bool:
    """Creates `recorder`'s tables, type, index and function once (`create_once`) and
    registers the type with psycopg; returns True when it created them.

    Raises SchemaNotCreated, with the server's reason, when they are missing and the server
    refuses to make them; the library's errors when no connection can be had.
    """
    datastore = recorder.datastore
    statements = recorder.sql_create_statements
    is_type = ["CREATE TYPE" in s.as_string() for s in statements]
    ordered = [s for s, t in zip(statements, is_type) if t] + [s for s, t in zip(statements, is_type) if not t]
    with datastore.get_connection() as conn:
        try:
            created = create_once(conn, lock_key(datastore.schema), schema_exists_query(recorder), ordered)
        except psycopg.Error as error:
            if error.sqlstate is None or isinstance(error, psycopg.errors.InvalidSchemaName):
                raise  # no answer from the server, or no such schema: store_problem says so
            raise SchemaNotCreated(_schema_problem(error, datastore.schema)) from None
    datastore.register_type_adapters()
    return created


def _schema_problem(error: psycopg.Error, schema: str) -> str:
    reason = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
    if isinstance(error, psycopg.errors.ReadOnlySqlTransaction):
        hint = "the database is read-only; run `chatrecord init` once against the primary"
    elif isinstance(error, psycopg.errors.InsufficientPrivilege):
        hint = f"grant the role CREATE on schema {schema}, or run `chatrecord init` as its owner"
    else:
        hint = "run `chatrecord init` again when the database is reachable"
    return f"the store's tables in schema {schema} do not exist and could not be created ({reason}); {hint}"


APPEND_FUNCTION = "chatrecord_append_v6"
"""The store's own database function that writes a whole append from one JSON document
(`AppendDocument`) that holds no view rows: versioned by name, so a later layout gets a
function of its own. An append with view rows goes to its generation's function
(`generation_function_name`), the same body with the view rows written into that
generation's tables."""

_APPEND_FUNCTION_SQL = """CREATE OR REPLACE FUNCTION {schema}.{name}(doc jsonb) RETURNS SETOF bigint LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
DECLARE
  k text := doc->>'cid';
  a jsonb := doc->'assumed';
  x jsonb := doc->'index';
  v jsonb := doc->'views';
  j jsonb;
BEGIN
  IF a IS NOT NULL THEN
    -- one statement: each row it looks for is found by its whole key, in a subquery run per
    -- key (a scalar subquery is never made a join): a plan kept from when the tables were small
    -- must not read a conversation's every row (an ANY over the digests did, 5,000 rows at 2,500 segments)
    IF NOT EXISTS (SELECT 1 FROM {schema}.chatrecord_index WHERE cid = k AND version = (a->>'version')::bigint
                   AND outcomes = (a->>'count')::bigint)
       OR (a->>'tip' IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {schema}.chatrecord_chain WHERE originator_id = k::uuid
                   AND originator_version = (a->>'version')::bigint AND hash = decode(a->>'tip', 'base64')))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(a->'digests') d(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_sources WHERE cid = k AND digest = d.item))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(a->'segments') g(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_segments WHERE cid = k AND segment = g.item))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(a->'runs') r(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_segments WHERE cid = k AND run = r.item AND cut = 1 LIMIT 1))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(a->'records', '[]')) r(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_segments WHERE cid = k AND segment = r.item->>0
                         AND body = r.item->>1) IS NULL)
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(a->'live', '[]')) m(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_messages WHERE cid = k AND number = (m.item->>0)::bigint
                         AND live = (m.item->>1)::int) IS NULL) THEN
      RAISE EXCEPTION 'chatrecord: the index is not as the command assumed' USING ERRCODE = '22012';
    END IF;
  END IF;
  IF x IS NOT NULL THEN
    IF jsonb_array_length(x->'sources') > 0 THEN
      INSERT INTO {schema}.chatrecord_sources (cid, digest, first, last)
        SELECT k, e->>0, (e->>1)::bigint, (e->>2)::bigint FROM jsonb_array_elements(x->'sources') e
        ON CONFLICT (cid, digest) DO UPDATE SET last = excluded.last;
    END IF;
    IF jsonb_array_length(x->'segments') > 0 THEN
      INSERT INTO {schema}.chatrecord_segments (cid, segment, run, message, version, cut, body)
        SELECT k, e->>0, e->>1, (e->>2)::bigint, (e->>3)::bigint, (e->>4)::int, e->>5 FROM jsonb_array_elements(x->'segments') e
        ON CONFLICT (cid, segment) DO UPDATE SET cut = excluded.cut, body = excluded.body;
    END IF;
    IF jsonb_array_length(x->'messages') > 0 THEN
      INSERT INTO {schema}.chatrecord_messages (cid, number, live)
        SELECT k, (e->>0)::bigint, (e->>1)::int FROM jsonb_array_elements(x->'messages') e
        ON CONFLICT (cid, number) DO UPDATE SET live = excluded.live;
    END IF;
    INSERT INTO {schema}.chatrecord_index (cid, version, outcomes) VALUES (k, (x->>'version')::bigint, (x->>'added')::bigint)
      ON CONFLICT (cid) DO UPDATE SET version = excluded.version,
      outcomes = {schema}.chatrecord_index.outcomes + excluded.outcomes;
  END IF;
{views}  LOCK TABLE {events} IN EXCLUSIVE MODE;
  RETURN QUERY INSERT INTO {events} (originator_id, originator_version, topic, state)
    SELECT (e->>0)::uuid, (e->>1)::bigint, e->>2, decode(e->>3, 'base64') FROM jsonb_array_elements(doc->'events') e
    RETURNING notification_id;
  INSERT INTO {schema}.chatrecord_chain (originator_id, originator_version, hash)
    SELECT (e->>0)::uuid, (e->>1)::bigint, decode(e->>2, 'base64') FROM jsonb_array_elements(doc->'chain') e;
END
$fn$;
"""

_NO_VIEWS_SQL = """  IF v IS NOT NULL THEN
    RAISE EXCEPTION 'chatrecord: view rows for the function of no generation';
  END IF;
"""

_VIEWS_SQL = """  IF v IS NULL OR (v->>'g')::bigint <> {generation} THEN
    RAISE EXCEPTION 'chatrecord: no view rows of generation {generation}';
  END IF;
  PERFORM pg_advisory_xact_lock_shared((v->>'lock')::bigint);
  IF (v->>'drop_aside')::boolean THEN
    DELETE FROM {entries} WHERE cid = k || ':turn';
  END IF;
  IF jsonb_array_length(v->'aside') > 0 THEN
    FOR j IN SELECT jsonb_array_elements(v->'aside') LOOP
      UPDATE {entries} SET cid = k || ':turn' WHERE cid = k AND seq = (j #>> '{{}}')::bigint;
    END LOOP;
  END IF;
  IF jsonb_array_length(v->'aside_rows') > 0 THEN
    INSERT INTO {entries} (cid, seq, segment, body) SELECT k || ':turn', (e->>0)::bigint, e->>1, e->>2 FROM jsonb_array_elements(v->'aside_rows') e;
  END IF;
  IF jsonb_array_length(v->'delete_entries') > 0 THEN
    FOR j IN SELECT jsonb_array_elements(v->'delete_entries') LOOP
      DELETE FROM {entries} WHERE cid = k AND seq = (j #>> '{{}}')::bigint;
    END LOOP;
  END IF;
  IF jsonb_array_length(v->'entries') > 0 THEN
    INSERT INTO {entries} (cid, seq, segment, body) SELECT k, (e->>0)::bigint, e->>1, e->>2 FROM jsonb_array_elements(v->'entries') e ON CONFLICT (cid, seq) DO UPDATE SET body = excluded.body;
  END IF;
  IF jsonb_array_length(v->'outcomes') > 0 THEN
    INSERT INTO {outcomes} (cid, v, sub, card, after, body) SELECT k, (e->>0)::bigint, (e->>1)::bigint, e->>2, (e->>3)::bigint, e->>4 FROM jsonb_array_elements(v->'outcomes') e;
  END IF;
  IF jsonb_array_length(v->'messages') > 0 THEN
    INSERT INTO {messages} (cid, idx, role, number, body) SELECT k, (e->>0)::bigint, e->>1, (e->>2)::bigint, e->>3 FROM jsonb_array_elements(v->'messages') e ON CONFLICT (cid, idx) DO UPDATE SET role = excluded.role, number = excluded.number, body = excluded.body;
  END IF;
  IF jsonb_array_length(v->'ended') > 0 THEN
    INSERT INTO {messages} (cid, idx, role, number, block_end, body) SELECT k, (e->>0)::bigint, e->>1, (e->>2)::bigint, (e->>3)::bigint, e->>4 FROM jsonb_array_elements(v->'ended') e ON CONFLICT (cid, idx) DO UPDATE SET role = excluded.role, number = excluded.number, body = excluded.body, block_end = excluded.block_end;
  END IF;
  IF jsonb_array_length(v->'ends') > 0 THEN
    FOR j IN SELECT jsonb_array_elements(v->'ends') LOOP
      UPDATE {messages} SET block_end = (j->>1)::bigint WHERE cid = k AND idx = (j->>0)::bigint;
    END LOOP;
  END IF;
  IF jsonb_array_length(v->'pages') > 0 THEN
    INSERT INTO {pages} (cid, message, page) SELECT k, (e->>0)::bigint, (e->>1)::bigint FROM jsonb_array_elements(v->'pages') e ON CONFLICT (cid, message) DO UPDATE SET page = excluded.page;
  END IF;
  IF jsonb_array_length(v->'turns') > 0 THEN
    INSERT INTO {turns} (cid, version, message, at) SELECT k, (e->>0)::bigint, (e->>1)::bigint, e->>2 FROM jsonb_array_elements(v->'turns') e ON CONFLICT (cid, version) DO NOTHING;
  END IF;
  IF jsonb_typeof(v->'head') = 'array' THEN
    INSERT INTO {heads} (cid, version, body) VALUES (k, (v->'head'->>0)::bigint, v->'head'->>1) ON CONFLICT (cid) DO UPDATE SET version = excluded.version, body = excluded.body;
  END IF;
"""


def generation_function_name(generation: int) -> str:
    """Returns the name of generation `generation`'s append function (`generation_function_statement`)."""
    return f"chatrecord_append_g{generation}_v6"


OLD_VIEWS_FUNCTION = "chatrecord_views_g{generation}_v3"
"""The name of a generation's views function of an earlier version (text, jsonb), which the
append function called; dropped with its generation's tables."""


def generation_function_statement(schema: str, events_table: str, generation: int) -> str:
    """Returns the CREATE OR REPLACE FUNCTION statement of generation `generation`'s append
    function: `APPEND_FUNCTION`'s body with, after the history index rows, the views' shared
    lock and the view rows of the document's `views` section (which must name `generation`)
    written into the generation's tables by static statements, whose plans PL/pgSQL keeps per
    connection (no dynamic call of another function per append). A row it updates or deletes
    is found by its whole key, one statement per row: a plan kept from when the conversation
    was short must not scan its transcript (a join on the document's rows did, 6,000 rows read
    at 3,000 segments). It is made at the first append into the generation
    (`EventRecorder._generation_function`) and dropped with the generation's tables."""
    views = _VIEWS_SQL.format(generation=int(generation), **table_names(generation, schema))
    return _APPEND_FUNCTION_SQL.format(schema=f'"{schema}"', name=generation_function_name(generation),
                                       events=f'"{schema}"."{events_table}"', views=views)


def append_function_statement(schema: str, events_table: str) -> str:
    """Returns the CREATE OR REPLACE FUNCTION statement of `APPEND_FUNCTION` in `schema`.

    The function takes the document `AppendDocument` builds (jsonb) and, in the caller's
    transaction (one statement: its own), with sequential scans off (PL/pgSQL keeps a plan made
    when the tables were small: every statement here finds its rows by a key, and a kept plan
    that scanned a table would cost more with every line), checks an assumed index in one
    statement (raising division_by_zero, 22012, as `PostgresHistoryTables._holds` makes the
    statements' check do), writes the history index rows, takes the events table's write lock, inserts the events (returning their notification ids,
    in order) and their chain rows. A list the document leaves empty costs no statement.
    PL/pgSQL keeps the plans of its static statements per connection. A document with view
    rows goes to its generation's function (`generation_function_statement`) instead.
    """
    return _APPEND_FUNCTION_SQL.format(schema=f'"{schema}"', name=APPEND_FUNCTION, events=f'"{schema}"."{events_table}"',
                                       views=_NO_VIEWS_SQL)


class Unfit(Exception):  # noqa: N818 - not an error: the append is sent another way
    """Raised when an append holds a statement `AppendDocument` cannot carry (a write it does
    not know, or a read of a table the append writes)."""


_WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE|LOCK|CREATE|DROP|ALTER|TRUNCATE)\b", re.IGNORECASE)


class AppendDocument:
    """Stands in for the cursor of an append's transaction and gathers its writes as data: the
    assumed index, the history index rows, the views' rows (`PostgresBufferedRows`), the
    events and their chain rows. `call(function)` sends them as one JSON document to the
    database function `APPEND_FUNCTION` (or its views' generation's) in one statement, which is its own transaction: one
    message, one answer, and the server plans none of the writes again. A read (`execute`
    then `fetchone`/`fetchall`) runs at once, outside that transaction, where it reads no
    table the document writes (a head, a chain hash, an index row: what it finds is checked by
    the events' version, whose insert fails if another writer came between); any other
    statement raises Unfit, and the append is sent as statements instead (`_append_synced`)."""

    def __init__(self, conn: psycopg.Connection[Any], cid: str, lock: int) -> None:
        self._conn = conn
        self._lock = lock
        self.doc: dict[str, Any] = {"cid": cid}
        self.conversation: UUID | None = None
        """The conversation whose part of a batch this document carries (`inline(cursor)`
        writes only its rows here), None for the append of one conversation."""
        self._pending: tuple[Any, Any] | None = None
        self._written: set[str] = set()

    def put(self, section: str, value: Any, tables: Iterable[str] = ()) -> None:
        """Sets the document's `section` (`assumed`, `index`, `views`, `events`, `chain`) to
        `value`, noting the `tables` it writes."""
        self.doc[section] = value
        self._written.update(tables)

    def views(self, generation: int) -> dict[str, Any]:
        """Returns the document's views section for `generation` (made on the first call):
        lists of rows per kind, the head, the lock key."""
        views = self.doc.get("views")
        if views is None:
            views = self.doc["views"] = {"g": generation, "lock": self._lock, "drop_aside": False, "aside": [],
                                         "aside_rows": [], "delete_entries": [], "entries": [],
                                         "outcomes": [], "messages": [], "ended": [], "ends": [], "pages": [],
                                         "turns": [], "head": None}
            self._written.add(f"views_g{generation}_")
        elif views["g"] != generation:
            raise Unfit("two generations' views in one append")
        return views

    def execute(self, query: Any, params: Any = None, **_: Any) -> AppendDocument:
        if self._pending is not None:
            raise Unfit("a statement that is not a read")
        self._pending = (query, params)
        return self

    def executemany(self, query: Any, params_seq: Any, **_: Any) -> None:
        raise Unfit("executemany")

    def _read(self) -> list[Any]:
        if self._pending is None:
            raise Unfit("a fetch without a statement")
        (query, params), self._pending = self._pending, None
        text = query.as_string(self._conn) if isinstance(query, Composable) else str(query)
        if not text.lstrip().upper().startswith(("SELECT", "WITH")) or _WRITES.search(text) \
                or any(table in text for table in self._written):
            raise Unfit("a read that is no plain read, or of a table the append writes")
        with self._conn.cursor() as curs:  # autocommit: before the append's own transaction
            curs.execute(query, params)
            return curs.fetchall()

    def fetchone(self) -> Any:
        rows = self._read()
        return rows[0] if rows else None

    def fetchall(self) -> list[Any]:
        return self._read()

    def call(self, function: str) -> list[int]:
        """Sends the document to `function` (schema-qualified) and returns the notification ids
        of its events. Raises Unfit when a statement was left unread (a write it cannot
        carry); psycopg's errors as the server raised them (nothing is stored then)."""
        if self._pending is not None:
            raise Unfit("a statement that is not a read")
        with self._conn.cursor() as curs:
            curs.execute(f"SELECT n FROM {function}(%s::jsonb) AS n", (orjson.dumps(self.doc).decode(),))
            return [row["n"] for row in curs.fetchall()]


class _Answered(Exception):  # noqa: N818 - a carrier, never seen outside EventRecorder
    """Carries an append's error that is not to be tried again past the library's `retry`."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


_SELECT_EVENTS = es_postgres.PostgresAggregateRecorder.select_events.__wrapped__  # type: ignore[attr-defined]
_SELECT_NOTIFICATIONS = es_postgres.PostgresApplicationRecorder.select_notifications.__wrapped__  # type: ignore[attr-defined]
_MAX_NOTIFICATION_ID = es_postgres.PostgresApplicationRecorder.max_notification_id.__wrapped__  # type: ignore[attr-defined]
"""The library's reads without its `retry`, which tries ten times whatever the error."""


class EventRecorder(es_postgres.PostgresApplicationRecorder):
    """The library's application recorder, appending in one ordinary transaction instead of
    psycopg's pipeline mode (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._function: str | None = None
        """`APPEND_FUNCTION`'s qualified name once made, "" where it cannot be, None before."""
        self._generations_ready: set[int | None] = set()
        """The generations whose append function (`generation_function_statement`) this
        process made or found."""
        self._views_lock = views_lock_key(self.datastore.schema)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Appends `stored_events` under the events table's write lock and returns their
        notification ids; tries again (`_append_retried`) when the connection fails, never
        after the server answered or the pool waited.

        Raises the library's IntegrityError when a version is taken already or the append
        deadlocked with another writer's (the server chose it to roll back: written again, it
        goes through), OperationalError when the lock or the statement timed out,
        AssumptionFailed when the index is not as the writer assumed
        (`PostgresHistoryTables._holds`); nothing is stored then.
        """
        try:
            return self._append_retried(stored_events, **kwargs)
        except _Answered as answered:
            if isinstance(answered.error.__cause__, psycopg.errors.DeadlockDetected):
                raise IntegrityError(f"the append deadlocked with another writer's: {answered.error}") from answered.error
            raise answered.error from answered.error.__cause__
        except PersistenceError as error:
            if isinstance(error.__cause__, psycopg.errors.DivisionByZero):  # `PostgresHistoryTables._holds`
                raise AssumptionFailed("the conversation's index is not as the command assumed") from None
            if isinstance(error.__cause__, psycopg.errors.DeadlockDetected):
                raise IntegrityError(f"the append deadlocked with another writer's: {error}") from error
            raise

    def select_events(self, originator_id: Any, **kwargs: Any) -> Sequence[StoredEvent]:
        """The library's read of a conversation's events, tried again only when the connection
        failed (`_read_retried`): a lock or statement timeout the server answered (a table
        locked by DDL, VACUUM FULL) is raised at once, not after ten waits."""
        return self._read(_SELECT_EVENTS, originator_id, **kwargs)

    def select_notifications(self, *args: Any, **kwargs: Any) -> Any:
        """The library's read of the notification log, tried again as `select_events` is."""
        return self._read(_SELECT_NOTIFICATIONS, *args, **kwargs)

    def select_notifications_to_fold(self, start: int, limit: int, stop: int | None,
                                     part: tuple[int, int] | None = None) -> Sequence[Notification]:
        """Returns, as `select_notifications(start, limit, stop, inclusive_of_start=False)`
        does, the notifications after `start` (up to `stop`), at most `limit`, in order: what a
        rebuild folds. They come in PostgreSQL's binary format (a state's bytes as they are,
        not as hex text to be decoded: the read costs half as much). With `part` (part, parts)
        only the conversations of that part (`adapters.views.readmodels.part_of`: the last byte
        of the conversation's UUID modulo `parts`), chosen by the server: a rebuild's worker
        process reads its own conversations' events only. Raises ValueError unless
        0 <= part < parts; tried again as `select_events` is."""
        which, params = SQL(""), [start, stop if stop is not None else 2**63 - 1]
        if part is not None:
            if not 0 <= part[0] < part[1]:
                raise ValueError(f"part {part[0]} of {part[1]}")
            which = SQL(" AND get_byte(uuid_send(originator_id), 15) %% %s = %s")
            params += [part[1], part[0]]
        statement = SQL("SELECT notification_id, originator_id, originator_version, topic, state FROM {}.{} "
                        "WHERE notification_id > %s AND notification_id <= %s{} "
                        "ORDER BY notification_id LIMIT %s").format(Identifier(self.datastore.schema),
                                                                    Identifier(self.events_table_name), which)
        params.append(limit)

        def read(recorder: EventRecorder) -> list[Notification]:
            with recorder.datastore.get_connection() as conn, conn.cursor(binary=True, row_factory=tuple_row) as curs:
                curs.execute(statement, params, prepare=True)
                return [Notification(id=n, originator_id=cid, originator_version=version, topic=topic, state=state)
                        for n, cid, version, topic, state in curs.fetchall()]

        return self._read(read)  # type: ignore[no-any-return]

    def count_notifications_by_part(self, stop: int, parts: int) -> list[int]:
        """Returns how many of the notifications up to `stop` each of `parts` parts holds
        (`select_notifications_to_fold`'s parts), in part order: one statement, a scan of the
        events table, which a rebuild that would fold in parts asks first. Tried again as
        `select_events` is."""
        statement = SQL("SELECT get_byte(uuid_send(originator_id), 15) %% %s AS part, count(*) AS n FROM {}.{} "
                        "WHERE notification_id <= %s GROUP BY 1").format(Identifier(self.datastore.schema),
                                                                         Identifier(self.events_table_name))

        def read(recorder: EventRecorder) -> list[int]:
            with recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
                counted = dict(curs.execute(statement, (parts, stop)).fetchall())
            return [counted.get(part, 0) for part in range(parts)]

        return self._read(read)  # type: ignore[no-any-return]

    def max_notification_id(self) -> int | None:
        """The library's read of the newest notification's id (what a health check asks), tried
        again as `select_events` is: a pool that waited its timeout for a connection is not
        waited for nine times more (the library's own tries made a health check of a server
        that went away take 50 s)."""
        return self._read(_MAX_NOTIFICATION_ID)  # type: ignore[no-any-return]

    def _read(self, read: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return self._read_retried(read, *args, **kwargs)
        except _Answered as answered:
            raise answered.error from answered.error.__cause__

    @retry((InterfaceError, OperationalError), max_attempts=CONNECTION_ATTEMPTS, wait=0.2)
    def _read_retried(self, read: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return read(self, *args, **kwargs)
        except (InterfaceError, OperationalError) as error:
            cause = error.__cause__
            if isinstance(cause, PoolTimeout) or getattr(cause, "sqlstate", None):
                raise _Answered(error) from error
            raise

    @retry((InterfaceError, OperationalError), max_attempts=CONNECTION_ATTEMPTS, wait=0.2)
    def _append_retried(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """`_append`, tried again by the library's `retry` when the connection failed; an error
        the server answered (a timeout, a refusal) or a pool that waited already goes out as
        `_Answered`, which `retry` lets through."""
        try:
            return self._append(stored_events, **kwargs)
        except (InterfaceError, OperationalError) as error:
            cause = error.__cause__
            if isinstance(cause, PoolTimeout) or getattr(cause, "sqlstate", None):
                raise _Answered(error) from error
            raise

    def _append(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if not stored_events:
            return None
        size = sum(len(e.state) for e in stored_events)
        if kwargs.get("batch") and PIPELINE_BYTES < size <= BATCH_DOCUMENT_BYTES:
            ids = self._append_in_one_call(stored_events, **kwargs)  # not pipelined: one statement per document
            if ids is _AGAIN:
                ids = self._append_plain(stored_events, **kwargs)
        elif size > PIPELINE_BYTES:
            ids = self._append_plain(stored_events, **kwargs)
        else:
            ids = self._append_pipelined(stored_events, **kwargs)
        self._committed(stored_events)
        return ids

    def _append_plain(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self._insert_events(curs, stored_events, **kwargs)
            self._insert_stored_events(curs, stored_events, **kwargs)  # lock, NOTIFY, INSERT
            return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)

    def _append_pipelined(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Appends in one statement (`_append_in_one_call`); when the append holds what that
        cannot carry, or failed for a reason that is not the events' own, appends as the
        library does (`_append_synced`), so that a failing view statement rolls back to its
        savepoint and the events are still stored."""
        ids = self._append_in_one_call(stored_events, **kwargs)
        if ids is _AGAIN:
            return self._append_synced(stored_events, **kwargs)
        return ids

    def _append_function(self) -> str | None:
        """Returns the schema-qualified name of `APPEND_FUNCTION`, creating it once where it is
        missing (a store an earlier version made); None where it cannot be had (a read-only
        database, a role without CREATE): appends then go as statements."""
        name = self._function
        if name is None:
            schema = self.datastore.schema
            name = f'"{schema}".{APPEND_FUNCTION}'
            exists = SQL("SELECT to_regprocedure({}) IS NOT NULL").format(f"{name}(jsonb)")
            try:
                with self.datastore.get_connection() as conn:
                    create_once(conn, lock_key(schema), exists, [append_function_statement(schema, self.events_table_name)])
            except (psycopg.Error, PersistenceError):
                name = ""
            self._function = name
        return name or None

    def _generation_function(self, conn: psycopg.Connection[Any], generation: int) -> str | None:
        """Returns the schema-qualified name of generation `generation`'s append function,
        creating it once (`generation_function_statement`) where it is missing; None where it
        cannot be made."""
        schema = self.datastore.schema
        name = f'"{schema}".{generation_function_name(generation)}'
        ready = self._generations_ready
        if generation in ready:
            return name
        exists = SQL("SELECT to_regprocedure({}) IS NOT NULL").format(f"{name}(jsonb)")
        try:
            create_once(conn, lock_key(schema), exists,
                        [generation_function_statement(schema, self.events_table_name, generation)])
        except psycopg.Error:
            return None
        ready.add(generation)
        return name

    def _append_in_one_call(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Any:
        """Sends the whole append as one statement, a call of `APPEND_FUNCTION` (of the
        generation's function where it holds view rows) with the writes gathered as data
        (`AppendDocument`); returns the notification ids, or `_AGAIN` when the
        append holds what the document cannot carry, or failed for a reason that is not the
        events' own (the append then runs synced, `_append_synced`). Raises a taken
        version, a failed assumption, a timeout and a lost connection as they are.

        An append of several conversations' events (a batch, `ConversationStore.handle_batch`;
        each conversation's events together, in order) sends one document per conversation, in
        one transaction: each document's `conversation` names the conversation whose index and
        view rows the writer's `inline(cursor)` writes into it."""
        function = self._append_function()
        if function is None:
            return _AGAIN
        groups: list[list[StoredEvent]] = []
        for event in stored_events:
            if groups and groups[-1][0].originator_id == event.originator_id:
                groups[-1].append(event)
            else:
                groups.append([event])
        if len({str(group[0].originator_id) for group in groups}) != len(groups):
            return _AGAIN  # a conversation's events apart: as statements
        with self.datastore.get_connection() as conn:
            _AT_ONCE.on = True
            generation = None
            try:
                if len(groups) == 1:
                    return self._call_document(conn, function, stored_events, None, **kwargs)
                ids: list[int] = []
                heads: dict[UUID, tuple[int, bytes]] = {}
                sealing = getattr(self, "_sealing", None)  # a chained recorder's heads of each document
                with conn.transaction():
                    # the index rows of every conversation first, in the order of their ids (as the
                    # groups are, `ConversationStore.handle_batch`), before the first document takes the
                    # events table's lock: a writer of one of them (its index row, then that lock) is
                    # waited for, never waited for while this holds the lock it waits for
                    with conn.cursor() as curs:
                        curs.execute(SQL("SELECT cid FROM {}.chatrecord_index WHERE cid = ANY(%s) ORDER BY cid FOR UPDATE")
                                     .format(Identifier(self.datastore.schema)),
                                     (sorted(str(group[0].originator_id) for group in groups),))
                    for group in groups:
                        ids.extend(self._call_document(conn, function, group, originator_uuid(group[0].originator_id),
                                                       **kwargs))
                        heads.update(getattr(sealing, "heads", None) or {})
                if sealing is not None:
                    sealing.heads = heads
                return ids
            except Unfit:
                return _AGAIN
            except Exception as error:
                generation = getattr(error, "generation", None)
                if isinstance(error, psycopg.errors.UndefinedFunction):
                    self._generations_ready.discard(generation)  # dropped meanwhile: made again next time
                if self._events_own(error):
                    raise
                return _AGAIN
            finally:
                _AT_ONCE.on = False

    def _call_document(self, conn: psycopg.Connection[Any], function: str, stored_events: Sequence[StoredEvent],
                       conversation: UUID | None, **kwargs: Any) -> list[int]:
        """Gathers one conversation's append into an `AppendDocument` and calls its function;
        returns the notification ids. `conversation`: the document's (a part of a batch), which
        the writer's `inline(cursor)` writes alone. Raises Unfit, or the server's error with the
        generation of its views (`generation`) set on it."""
        generation = None
        try:
            document = AppendDocument(conn, str(stored_events[0].originator_id), self._views_lock)
            document.conversation = conversation
            self._insert_events(document, stored_events, **kwargs)
            self._insert_stored_events(document, stored_events, **kwargs)
            views = document.doc.get("views")
            generation = views["g"] if views is not None else None
            if generation is not None:
                named = self._generation_function(conn, generation)
                if named is None:
                    raise Unfit("no append function of the views' generation")
                function = named
            return document.call(function)
        except Exception as error:
            error.generation = generation  # type: ignore[attr-defined]
            raise

    def _events_own(self, error: Exception) -> bool:
        """Says whether `error` of an append in one round trip is the events' own (then the
        synced append would meet it again): a taken version, a timeout, a lost connection."""
        if isinstance(error, ChainBroken):
            return True  # the previous event has no hash row: refused, whichever way it is sent
        if not isinstance(error, psycopg.Error):
            return False  # a view's fold raised: the synced append catches it at the savepoint
        if error.sqlstate is None or error.sqlstate in ("55P03", "57014", "22012"):
            return True  # lock_not_available, query_canceled, division_by_zero (an assumption failed)
        return isinstance(error, psycopg.IntegrityError) and error.diag.table_name == self.events_table_name

    def _append_synced(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """The library's own pipelined append: the writes before the insert go out without
        waiting for each answer; the views' savepoint is synced before it is released, and the
        insert before the COMMIT, so a taken version raises IntegrityError there."""
        failure: Exception | None = None
        ids: Sequence[int] | None = None
        with self.datastore.get_connection() as conn:
            with conn.pipeline() as pipeline, conn.transaction():
                with conn.cursor() as curs:
                    self._insert_events(curs, stored_events, **kwargs)
                with conn.cursor() as curs:
                    try:
                        self._insert_stored_events(curs, stored_events, **kwargs)
                        pipeline.sync()  # a taken version raises IntegrityError here, not at COMMIT
                        ids = self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
                    except Exception as error:  # noqa: BLE001 - raised once the pipeline has closed
                        failure = error
            if failure is not None:
                raise failure
        return ids

    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Called once the transaction that stored `stored_events` has committed."""


class ChainedPostgresRecorder(ChainedRecorder, EventRecorder):
    """The PostgreSQL application recorder (`EventRecorder`: pipelined up to PIPELINE_BYTES,
    else one ordinary transaction) with the hash chain, in the store's schema. The library's
    optional database function for inserts (POSTGRES_ENABLE_DB_FUNCTIONS) would bypass the
    chain, so it is switched off."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.datastore.enable_db_functions = False
        self.chain_heads = ChainHeads()
        self._sealing = threading.local()  # the heads of this thread's transaction, until it commits
        self.chain_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(CHAIN_TABLE))
        self.sql_create_statements.append(
            SQL("CREATE TABLE IF NOT EXISTS {} (originator_id uuid NOT NULL, originator_version bigint NOT NULL, "
                "hash bytea NOT NULL, PRIMARY KEY (originator_id, originator_version))").format(self.chain_table)
        )
        self.events_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(self.events_table_name))
        # The lock timeout is a connection option (`PostgresFactory`), not a SET LOCAL per append.
        self.lock_table_statements = [SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(self.events_table)]

    def _notify_channel(self, curs: Any) -> None:
        """Sends no NOTIFY: nothing here LISTENs (the read models are applied in the events'
        transaction, not by a subscription), and a NOTIFY makes every commit take the server's
        one notification queue lock, serialising writers of every conversation."""

    def _insert_stored_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        if isinstance(curs, AppendDocument):  # the function takes the table lock and inserts them
            curs.put("events", [[str(e.originator_id), e.originator_version, e.topic,
                                 base64.b64encode(state_bytes(e.state)).decode()] for e in stored_events],
                     (self.events_table_name,))
            self._sealing.heads = self._seal(curs, stored_events)
            return
        super()._insert_stored_events(curs, stored_events, **kwargs)
        # another cursor of the same transaction: the ids are read from `curs` afterwards
        with curs.connection.cursor() as own:
            self._sealing.heads = self._seal(own, stored_events)

    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Keeps the hashes this thread's transaction just committed (`ChainHeads`)."""
        heads, self._sealing.heads = getattr(self._sealing, "heads", None), None
        if heads:
            self.chain_heads.remember(heads)

    def _insert_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        # before the events, in their transaction: an error here rolls both back
        super()._insert_events(curs, stored_events, **kwargs)
        run_inline(kwargs, curs)

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        cursor.execute(SQL("SELECT hash FROM {} WHERE originator_id = %s AND originator_version = %s")
                       .format(self.chain_table), (key, version))
        row = cursor.fetchone()
        return state_bytes(row["hash"]) if row else None

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        if isinstance(cursor, AppendDocument) and not missing_only:
            cursor.put("chain", [[str(key), version, base64.b64encode(digest).decode()] for key, version, digest in rows],
                       (CHAIN_TABLE,))
            return
        conflict = SQL(" ON CONFLICT DO NOTHING") if missing_only else SQL("")
        statement = SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(self.chain_table) + conflict
        if len(rows) == 1:
            cursor.execute(statement, rows[0])
        else:
            cursor.executemany(statement, rows)

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        cursor.execute(SQL("SELECT originator_version, topic, state FROM {} WHERE originator_id = %s "
                           "AND originator_version <= %s ORDER BY originator_version").format(self.events_table),
                       (key, upto))
        return [(key, r["originator_version"], r["topic"], state_bytes(r["state"])) for r in cursor.fetchall()]

    def _page(self, table: Any, columns: str, after: tuple[UUID, int] | None, only: UUID | None) -> list[Any]:
        where, params = [], []
        if only is not None:
            where.append(SQL("originator_id = %s"))
            params.append(only)
        if after is not None:
            where.append(SQL("(originator_id, originator_version) > (%s, %s)"))
            params += [after[0], after[1]]
        clause = SQL("WHERE {} ").format(SQL(" AND ").join(where)) if where else SQL("")
        statement = SQL("SELECT originator_id, originator_version, {} FROM {} {}"
                        "ORDER BY originator_id, originator_version LIMIT {}").format(
            SQL(columns), table, clause, PAGE)
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(statement, params)
            return curs.fetchall()

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        rows = self._page(self.events_table, "topic, state", after, only)
        return [(r["originator_id"], r["originator_version"], r["topic"], state_bytes(r["state"])) for r in rows]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Link]:
        rows = self._page(self.chain_table, "hash", after, only)
        return [(r["originator_id"], r["originator_version"], state_bytes(r["hash"])) for r in rows]


def keys_statements(schema: str) -> list[Composed]:
    """Returns the CREATE statements of the data keys' table and the master key's check table
    in `schema` (`adapters.store.keys`)."""
    return [
        SQL("CREATE TABLE IF NOT EXISTS {}.{} (conversation uuid PRIMARY KEY, wrapped_key bytea, "
            "erased_at timestamptz)").format(Identifier(schema), Identifier(KEYS_TABLE)),
        SQL("CREATE TABLE IF NOT EXISTS {}.{} (id integer PRIMARY KEY CHECK (id = 1), "
            "sealed bytea NOT NULL)").format(Identifier(schema), Identifier(MASTER_TABLE)),
    ]


class PostgresDataKeys(DataKeys):
    """Keys and the master key's check row in the store's PostgreSQL schema."""

    def __init__(self, datastore: PostgresDatastore, master: bytes | None, *, create_table: bool = True) -> None:
        super().__init__(master)
        self.datastore = datastore
        self.table = SQL("{}.{}").format(Identifier(datastore.schema), Identifier(KEYS_TABLE))
        self.master_table = SQL("{}.{}").format(Identifier(datastore.schema), Identifier(MASTER_TABLE))
        if create_table:
            with datastore.transaction(commit=True) as curs:
                for statement in keys_statements(datastore.schema):
                    curs.execute(statement)

    def _select(self, originator_id: UUID) -> Row | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT wrapped_key, erased_at FROM {} WHERE conversation = %s").format(self.table),
                         (originator_id,))
            row = curs.fetchone()
        return (row["wrapped_key"], row["erased_at"]) if row else None

    def _insert(self, originator_id: UUID, wrapped: bytes, check: bytes | None) -> None:
        if check is None:
            guard, params = SQL("NOT EXISTS (SELECT 1 FROM {})").format(self.master_table), ()
        else:
            guard = SQL("EXISTS (SELECT 1 FROM {} WHERE id = 1 AND sealed = %s)").format(self.master_table)
            params = (check,)
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("INSERT INTO {} (conversation, wrapped_key) SELECT %s, %s WHERE {} "
                             "ON CONFLICT DO NOTHING").format(self.table, guard), (originator_id, wrapped, *params))

    def _select_check(self) -> bytes | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT sealed FROM {} WHERE id = 1").format(self.master_table))
            row = curs.fetchone()
        return bytes(row["sealed"]) if row else None

    def _insert_check(self, sealed: bytes) -> bool:
        try:
            with self.datastore.transaction(commit=True) as curs:
                curs.execute(SQL("INSERT INTO {} SELECT 1, %s WHERE NOT EXISTS (SELECT 1 FROM {} WHERE "
                                 "substring(wrapped_key FROM 1 FOR 1) = '\\x00'::bytea) ON CONFLICT DO NOTHING")
                             .format(self.master_table, self.table), (sealed,))
        except PersistenceError as error:
            if isinstance(error.__cause__, psycopg.errors.ReadOnlySqlTransaction):
                return False  # a hot standby: reading commands go on; a writer checks again
            raise
        return True

    def _wrapped_sample(self) -> tuple[UUID, bytes] | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT conversation, wrapped_key FROM {} "
                             "WHERE substring(wrapped_key FROM 1 FOR 1) = '\\x01'::bytea LIMIT 1").format(self.table))
            row = curs.fetchone()
        return (row["conversation"], bytes(row["wrapped_key"])) if row else None

    def _erase(self, originator_id: UUID, at: datetime) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("INSERT INTO {} VALUES (%s, NULL, %s) ON CONFLICT (conversation) DO UPDATE SET "
                             "wrapped_key = NULL, erased_at = COALESCE({}.erased_at, excluded.erased_at)")
                         .format(self.table, Identifier(KEYS_TABLE)), (originator_id, at))

    def _counts(self) -> tuple[int, int, int]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(SQL("SELECT count(*) FILTER (WHERE substring(wrapped_key FROM 1 FOR 1) = '\\x01'::bytea) AS wrapped, "
                             "count(*) FILTER (WHERE substring(wrapped_key FROM 1 FOR 1) = '\\x00'::bytea) AS plain, "
                             "count(*) FILTER (WHERE wrapped_key IS NULL) AS erased FROM {}").format(self.table))
            row = curs.fetchone()
        return int(row["wrapped"]), int(row["plain"]), int(row["erased"])

    def _rewrap(self, change: Callable[[UUID, bytes], bytes], sealed: bytes | None) -> int:
        with self.datastore.transaction(commit=True) as curs:
            # EXCLUSIVE: another process's key insert (ROW EXCLUSIVE) waits for this transaction,
            # then reads the check row as it left it; readers go on
            curs.execute(SQL("LOCK TABLE {}, {} IN EXCLUSIVE MODE").format(self.table, self.master_table))
            curs.execute(SQL("SELECT conversation, wrapped_key FROM {} WHERE wrapped_key IS NOT NULL").format(self.table))
            rows = curs.fetchall()
            update = SQL("UPDATE {} SET wrapped_key = %s WHERE conversation = %s").format(self.table)
            for r in rows:  # each written as it is made: a failure part-way rolls back the ones before
                curs.execute(update, (change(r["conversation"], bytes(r["wrapped_key"])), r["conversation"]))
            if sealed is None:
                curs.execute(SQL("DELETE FROM {}").format(self.master_table))
            else:
                curs.execute(SQL("INSERT INTO {} VALUES (1, %s) ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed")
                             .format(self.master_table), (sealed,))
        return len(rows)

    def scrub(self) -> None:
        with self.datastore.get_connection() as conn:
            autocommit = conn.autocommit
            conn.autocommit = True  # VACUUM cannot run inside a transaction
            try:
                conn.execute(SQL("VACUUM FULL {}").format(self.table))
            finally:
                conn.autocommit = autocommit


def _marks(rows: Sequence[tuple[Any, ...]]) -> str:
    """Returns the placeholders of a VALUES list of `rows` (equal-length tuples): `(%s, %s), (%s, %s)`."""
    one = f"({', '.join(['%s'] * len(rows[0]))})"
    return ", ".join([one] * len(rows))


class PostgresHistoryTables(SQLHistoryTables):
    """The history index in the store's schema, created once with it (`PostgresFactory`).
    One command's lookups are autocommit reads, each its own statement: they need not agree
    with each other, because the command's events carry the next version after the index's,
    and their insert fails (and the command is decided again) if another writer came between."""

    checks_assumptions = True

    def __init__(self, datastore: PostgresDatastore) -> None:
        super().__init__(datastore, "%s", datastore.schema, (f'"{datastore.schema}".{CHAIN_TABLE}', lambda cid: cid))
        self.t = {name: f'"{datastore.schema}".{name}' for name in HISTORY_TABLES}
        self.chain_table = f'"{datastore.schema}".{CHAIN_TABLE}'

    def create(self) -> None:
        """Does nothing: the tables are made with the store's schema (`PostgresFactory`)."""

    def _holds(self, cid: UUID, assumed: AssumedHistory) -> tuple[str, tuple[Any, ...]]:
        """Returns the SQL condition (and its parameters) that the index of `cid` is at
        `assumed.version` with `assumed.count` card outcomes, and that none of the lines,
        segments and cut runs `assumed` took as unrecorded is there. Used as a divisor, it is no
        constant, so the planner cannot fold the division: the server raises division_by_zero
        (22012, which no other statement of an append can raise) and `EventRecorder` turns it
        into AssumptionFailed."""
        t, key = self.t, str(cid)
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
            f"(SELECT 1 FROM {t['chatrecord_messages']} WHERE cid = %s AND number = m.number AND live = m.live))",
            (key, assumed.version, assumed.count, key, assumed.digests, key, assumed.segments, key, assumed.runs,
             assumed.tip, key, assumed.version, assumed.tip, list(assumed.records),
             [r.model_dump_json() for r in assumed.records.values()], key, list(assumed.messages),
             [int(live) for live in assumed.messages.values()], key),
        )

    def _checked_write(self, cid: UUID, state: Any, events: list[Any], curs: Any, rebuild: bool, follows: bool,
                       assumed: AssumedHistory | None) -> int | None:
        """An append's index (`follows`, not a rebuild) in one statement: the events folded
        into a `HeldIndex` (its reads go to the rows through `curs`), then the check of
        `assumed` (if any) and every held row as data-modifying CTEs of one INSERT: no row is
        written twice, since the held index keeps one write per key, and all of them see the
        index as it stood before the statement, as the check needs. Other writes as the base."""
        if rebuild or not follows or not events:
            return super()._checked_write(cid, state, events, curs, rebuild, follows, assumed)
        base = self.writer(curs, cid)
        held = HeldIndex(AssumedBase(base, assumed) if assumed is not None and assumed.known else base)
        index_events(held, state, events)
        t, key = self.t, str(cid)
        if isinstance(curs, AppendDocument):
            if assumed is not None:
                curs.put("assumed", {"version": assumed.version, "count": assumed.count,  # each key checked once
                                     "digests": list(dict.fromkeys(assumed.digests)),
                                     "segments": list(dict.fromkeys(assumed.segments)),
                                     "runs": list(dict.fromkeys(assumed.runs)),
                                     "records": [[g, r.model_dump_json()] for g, r in assumed.records.items()],
                                     "live": [[n, int(live)] for n, live in assumed.messages.items()],
                                     "tip": base64.b64encode(assumed.tip).decode() if assumed.tip is not None else None})
            curs.put("index", {
                "sources": [[d, first, last] for d, (first, last) in held.top.sources.items()],
                "segments": [[r.segment, r.run, r.message, r.version, int(r.cut), r.model_dump_json()]
                             for r in held.top.records.values()],
                "messages": [[number, int(live)] for number, live in held.top.messages.items()],
                "version": held.version, "added": held.delta,
            }, HISTORY_TABLES)
            return held.delta
        ctes: list[str] = []
        params: list[Any] = []
        if assumed is not None:
            condition, checks = self._holds(cid, assumed)
            ctes.append(f"ok AS MATERIALIZED (SELECT 1 / (CASE WHEN {condition} THEN 1 ELSE 0 END) AS one)")
            params.extend(checks)
        if held.top.sources:
            rows = [(key, d, first, last) for d, (first, last) in held.top.sources.items()]
            ctes.append(f"s AS (INSERT INTO {t['chatrecord_sources']} (cid, digest, first, last) VALUES {_marks(rows)} "
                        "ON CONFLICT (cid, digest) DO UPDATE SET last = excluded.last)")
            params.extend(v for row in rows for v in row)
        if held.top.records:
            rows = [(key, r.segment, r.run, r.message, r.version, int(r.cut), r.model_dump_json())
                    for r in held.top.records.values()]
            ctes.append(f"g AS (INSERT INTO {t['chatrecord_segments']} (cid, segment, run, message, version, cut, body) "
                        f"VALUES {_marks(rows)} ON CONFLICT (cid, segment) DO UPDATE SET cut = excluded.cut, "
                        "body = excluded.body)")
            params.extend(v for row in rows for v in row)
        if held.top.messages:
            rows = [(key, number, int(live)) for number, live in held.top.messages.items()]
            ctes.append(f"m AS (INSERT INTO {t['chatrecord_messages']} (cid, number, live) VALUES {_marks(rows)} "
                        "ON CONFLICT (cid, number) DO UPDATE SET live = excluded.live)")
            params.extend(v for row in rows for v in row)
        index = t["chatrecord_index"]
        head = f"WITH {', '.join(ctes)} " if ctes else ""
        source = "FROM ok WHERE ok.one = 1" if assumed is not None else ""  # used, so it is computed
        curs.execute(f"{head}INSERT INTO {index} (cid, version, outcomes) SELECT %s, %s, %s {source} "
                     f"ON CONFLICT (cid) DO UPDATE SET version = excluded.version, "
                     f"outcomes = {index}.outcomes + excluded.outcomes",
                     (*params, key, held.version, held.delta))
        return held.delta

    @contextmanager
    def _reading(self, cid: UUID) -> Iterator[SQLHistory]:
        with self.datastore.cursor() as curs:  # autocommit reads, no transaction to end
            yield SQLHistory(self._through(curs), cid, self.p, self.schema, memo=True, chain=self._chain_of(cid))


COLUMN_TYPES = {
    "seq": "bigint", "segment": "text", "body": "text", "v": "bigint", "sub": "bigint", "card": "text", "after": "bigint",
    "idx": "bigint", "block_end": "bigint", "role": "text", "number": "bigint", "message": "bigint", "page": "bigint",
    "version": "bigint", "at": "text",
}
"""The PostgreSQL types of the view tables' columns (`adapters.views.rows.create_statements`)."""


class PostgresBufferedRows(BufferedRows):
    """`BufferedRows` whose flush sends each table's held rows as one statement over one JSON
    array of rows (`jsonb_array_elements`: parsed once, each field then found at once), not one
    statement per row: in pipeline mode nothing is synced, and the server runs one statement
    per table however many rows a rebuild's page holds. In an append gathered for one call
    (`AppendDocument`) the rows go into its document instead."""

    _views: dict[str, Any] | None = None

    def _document(self) -> dict[str, Any] | None:
        """The views section of the append's document, when the rows are written into one
        (found once per rows object: its cursor is one append's)."""
        views = self._views
        if views is None and isinstance(self.curs, AppendDocument):
            generation = int(self.t["heads"].rsplit("views_g", 1)[1].split("_", 1)[0])
            views = self._views = self.curs.views(generation)
        return views

    def _kind(self, table: str, columns: tuple[str, ...]) -> str:
        kind = next(k for k, name in self.t.items() if name == table)
        return "ended" if kind == "messages" and "block_end" in columns else kind

    def _write_head(self, head: Any) -> None:
        views = self._document()
        if views is None:
            super()._write_head(head)
        else:
            views["head"] = [head.version, head.model_dump_json()]

    def _insert_many(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], tail: str) -> None:
        if not rows:
            return
        views = self._document()
        if views is not None:
            views[self._kind(table, columns)].extend(list(row) for row in rows)
            return
        # the rows as one JSON array of arrays (orjson, in C): psycopg's array dumpers work per
        # element in Python, holding the GIL a rebuild's fold needs; the server takes them apart
        values = ", ".join(f"(e->>{i})::{COLUMN_TYPES[c]}" for i, c in enumerate(columns))
        self.curs.execute(f"INSERT INTO {table} (cid, {', '.join(columns)}) SELECT %s, {values} "
                          f"FROM jsonb_array_elements(%s::jsonb) AS e {tail}", (self.cid, orjson.dumps(rows).decode()))

    def _set_aside_rows(self) -> None:
        views = self._document()
        if views is None:  # one statement per kind, the rows as one JSON array (as `_insert_many`)
            entries, aside = self.t["entries"], self.aside_cid
            if self._drop_aside:
                self.curs.execute(f"DELETE FROM {entries} WHERE cid = %s", (aside,))
            if self._moves:
                self.curs.execute(f"UPDATE {entries} SET cid = %s WHERE cid = %s "
                                  "AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)::bigint))",
                                  (aside, self.cid, orjson.dumps(self._moves).decode()))
            if self._aside:
                self.curs.execute(f"INSERT INTO {entries} (cid, seq, segment, body) SELECT %s, (e->>0)::bigint, "
                                  "e->>1, e->>2 FROM jsonb_array_elements(%s::jsonb) AS e",
                                  (aside, orjson.dumps(self._aside).decode()))
            return
        if self._drop_aside:  # what an earlier flush into this document set aside goes too
            views["delete_entries"].extend(views["aside"])
            views["aside"], views["aside_rows"], views["drop_aside"] = [], [], True
        views["aside"].extend(self._moves)
        views["aside_rows"].extend(list(row) for row in self._aside)

    def _delete_entries(self, seqs: list[int]) -> None:
        views = self._document() if seqs else None
        if views is not None:
            views["delete_entries"].extend(seqs)
        elif seqs:
            self.curs.execute(f"DELETE FROM {self.t['entries']} WHERE cid = %s "
                              "AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)::bigint))",
                              (self.cid, orjson.dumps(seqs).decode()))

    def _end_blocks(self, ends: list[tuple[int, int | None]]) -> None:
        views = self._document() if ends else None
        if views is not None:
            views["ends"].extend([index, end] for index, end in ends)
        elif ends:
            self.curs.execute(f"UPDATE {self.t['messages']} m SET block_end = (u.e->>1)::bigint "
                              "FROM jsonb_array_elements(%s::jsonb) AS u(e) WHERE m.cid = %s AND m.idx = (u.e->>0)::bigint",
                              (orjson.dumps(ends).decode(), self.cid))


READ_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
"""How a read of several statements begins (`PostgresBackend.reading`): all see one snapshot."""


class OneStatement:
    """A cursor (`cursor`, in autocommit) that runs one statement: the second raises
    NeedsSnapshot, before it is sent, as two statements in autocommit would read two snapshots."""

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


class PostgresBackend(SQLBackend):
    """The views' tables in the store's schema (`adapters.views.backends.SQLBackend`), with a
    turn's rows read in one statement and a savepoint that works in pipeline mode."""

    p = "%s"
    buffered_rows = PostgresBufferedRows
    reads_ahead = True
    folds_in_parts = True
    heads_storage = " WITH (fillfactor = 50)"
    """A head row (about 1 KB) is rewritten by every append: with half of each page left free,
    the update goes on the same page (a HOT update) and the server prunes the page's dead
    copies before it fills. With the default (100) the page fills first and each new copy goes
    to a new page: 2 KB of dead copies per segment that a plain VACUUM frees but never gives back
    (measured: 8.3 KB per segment at 1,000 segments with a turn read after each, 6.4 with 50)."""

    @contextmanager
    def reading(self, snapshot: bool = True) -> Iterator[Any]:
        """Yields a cursor of a pooled connection for a read of the read models. With
        `snapshot`, inside one REPEATABLE READ, READ ONLY transaction (`READ_SNAPSHOT`; it ends
        with ROLLBACK, having written nothing), so every statement of the read (the one that
        finds the head, entries and outcomes, then any transcript rows or older entries it reads
        after) sees one version of the conversation, never the head of one append and the rows
        of the next: each statement in autocommit, as of READ COMMITTED, is a snapshot of its own.
        Without, in autocommit and for one statement only (`OneStatement`): a turn read that
        one statement answers (kept notes, or notes placed from kept rows) pays no BEGIN and no
        ROLLBACK; a second statement raises NeedsSnapshot, and the caller reads again with a
        snapshot. Raises ReadMoved when a statement names a table a rebuild elsewhere dropped
        (this process's live generation is out of date)."""
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
        """Runs a turn read's statement prepared: the server plans it once per connection. The
        pool's connections prepare nothing by themselves (`PostgresFactory`: a pipelined append
        must never send a named statement), so the connection's `prepare_threshold` is set only
        while this statement runs, outside pipeline mode, and restored at once: psycopg then
        keeps the statement's name, which only a statement executed with a threshold set uses."""
        conn = curs.connection
        if conn.pgconn.pipeline_status != pq.PipelineStatus.OFF:
            curs.execute(sql, params, prepare=False)
            return curs
        threshold = conn.prepare_threshold
        conn.prepare_threshold = PREPARE_THRESHOLD if threshold is None else threshold
        try:
            curs.execute(sql, params, prepare=True)
        finally:
            conn.prepare_threshold = threshold
        return curs

    def turn_rows(self, curs: Any, cid: UUID, generation: int, newest: int,
                  kept_at: int | None = None, entries: int | None = None, since: int | None = None,
                  tail_from: int = 0) -> TurnRows | None:
        """Reads, in one statement, what a turn read needs besides older transcript messages:
        the live pointer, the head row of `cid` in generation `generation` (the caller's
        guess), the log's version, the newest `entries` (default `newest`) kept run record
        entries, the `newest` card outcomes and, with `since` (the head version of the rows
        the caller keeps, `KnownBlocks`), the topics of the events after it and the transcript
        rows from index `tail_from` on (`TurnRows.topics`, `TurnRows.tail`: each row found by
        its key, at most TAIL_ROWS + 1, after at most TAIL_EVENTS events). Entries, outcomes
        and rows are left unread (`TurnRows.skipped`) when the head is at version `kept_at`
        (the caller keeps that version's notes already). Returns None when the pointer table
        is not known yet or the guess was wrong (the caller reads row by row, and guesses the
        live generation next time)."""
        if not self._has_pointer:
            return None
        t = table_names(generation, self.schema)
        # the topics and the tail: only with `since`, within TAIL_EVENTS, and not for kept notes
        unkept = "CASE WHEN h.version = %(kept)s OR %(since)s < 0 OR h.version - %(since)s > %(events)s THEN NULL ELSE "
        row = self.run(curs, (
            "SELECT p.generation, p.rules, p.next, h.body AS head, h.version = %(kept)s AS skipped, "
            f"(SELECT max(originator_version) FROM {self._t(self.events_table)} WHERE originator_id = %(key)s) AS logged, "
            "CASE WHEN h.version = %(kept)s THEN NULL ELSE "
            "(SELECT string_agg(body, chr(30) ORDER BY seq) FROM (SELECT seq, body FROM "
            f"{t['entries']} WHERE cid = %(cid)s ORDER BY seq DESC LIMIT %(entries)s) e) END AS entries, "
            "CASE WHEN h.version = %(kept)s THEN NULL ELSE "
            "(SELECT string_agg(body, chr(30) ORDER BY v, sub) FROM (SELECT v, sub, body FROM "
            f"{t['outcomes']} WHERE cid = %(cid)s ORDER BY v DESC, sub DESC LIMIT %(newest)s) o) END AS outcomes, "
            f"{unkept}(SELECT COALESCE(string_agg(DISTINCT topic, chr(30)), '') FROM "
            f"{self._t(self.events_table)} WHERE originator_id = %(key)s "
            "AND originator_version > %(since)s AND originator_version <= h.version) END AS topics, "
            f"{unkept}(SELECT COALESCE(string_agg(concat_ws(chr(31), idx, role, COALESCE(number::text, ''), "
            "COALESCE(block_end::text, ''), body), chr(30) ORDER BY idx), '') FROM (SELECT idx, role, number, "
            f"block_end, body FROM {t['messages']} WHERE cid = %(cid)s AND idx >= %(tail)s ORDER BY idx "
            "LIMIT %(rows)s) m) END AS tail, "
            + (f"(SELECT hash FROM {self._t(CHAIN_TABLE)} WHERE originator_id = %(key)s "
               "AND originator_version = h.version) AS tip, "
               f"(SELECT hash FROM {self._t(CHAIN_TABLE)} WHERE originator_id = %(key)s "
               "AND originator_version = %(since)s) AS since_tip " if self.chained else
               "NULL::bytea AS tip, NULL::bytea AS since_tip ") +
            f"FROM {self._t(POINTER)} p LEFT JOIN {t['heads']} h ON h.cid = %(cid)s WHERE p.id = 1"),
            {"cid": str(cid), "key": cid, "newest": newest, "entries": entries or newest,
             "kept": -1 if kept_at is None else kept_at, "since": -1 if since is None else since,
             "tail": tail_from, "events": TAIL_EVENTS, "rows": TAIL_ROWS + 1}).fetchone()
        if row is None:
            return None
        live = Pointer(int(row["generation"]), row["rules"], int(row["next"]))
        if live.generation != generation:
            return TurnRows(live, None, 0, "", "", matches=False)
        return TurnRows(live, row["head"], int(row["logged"] or 0), row["entries"] or "", row["outcomes"] or "",
                        skipped=bool(row["skipped"]), topics=row["topics"], tail=row["tail"],
                        tip=_bytes(row["tip"]), since_tip=_bytes(row["since_tip"]))

    @contextmanager
    def savepoint(self, curs: Any, on_failure: Callable[[Exception], object] | None = None) -> Iterator[Any]:
        """As `Backend.savepoint`, through psycopg's nested transaction. In pipeline mode (a
        small append, `EventRecorder`) the savepoint's statements are synced before it is
        released, so a failing view statement rolls back to it here rather than failing the
        events' transaction at its end. An error raised while the savepoint is taken belongs
        to the transaction's earlier statements (in pipeline mode their results arrive there,
        e.g. a read-only database refusing the history index's INSERT): it is raised, not
        taken for the views'. In an append gathered for one call (`EventRecorder._append_in_one_call`)
        there is no savepoint and nothing is caught: a failure fails that append, which then
        runs again synced, with this savepoint."""
        if getattr(_AT_ONCE, "on", False):
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
        except Exception as error:  # noqa: BLE001 - the events stand; a later read catches up
            if not entered:
                raise
            retried = on_failure(error) if on_failure is not None else False
            if retried is not True:
                not_updated(error)

    def __init__(self, datastore: PostgresDatastore, events_table: str, chained: bool = False) -> None:
        super().__init__(datastore, events_table)
        self.schema = datastore.schema
        self._views_lock = views_lock_key(self.schema)
        self.chained = chained
        """Whether the store keeps a hash chain (`chatrecord_chain`), whose hash at the head's
        version a turn read takes (`TurnRows.tip`)."""

    def _tables(self, curs: Any) -> list[str]:
        rows = self._x(curs, "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                       (self.schema,)).fetchall()
        return [r["table_name"] for r in rows]

    def _exists(self, curs: Any, name: str) -> bool:
        row = self._x(curs, "SELECT to_regclass(?) AS t", (f'"{self.schema}".{name}',)).fetchone()
        return row["t"] is not None

    def queued(self) -> QueuedStatements:
        """Returns a cursor whose statements run on a connection of the pool, on a thread of
        their own (a rebuild's pages: the server writes one while the next is folded). A page's
        commit does not wait for the server to flush its WAL (synchronous_commit off): the
        generation a rebuild writes is not live until its switch, whose commit does wait, and
        with it for everything the server logged before it; a page lost in a crash before that
        (whole: its rows and heads commit together) is one more gap a read fills from the log."""
        return QueuedStatements(self.datastore.get_connection,
                                begin=("BEGIN", "SET LOCAL synchronous_commit TO OFF"))

    def _dropped(self, curs: Any, generation: int) -> None:
        """Drops the generation's append function (`generation_function_statement`) with its
        tables, and the views function an earlier version made for it."""
        self._x(curs, f'DROP FUNCTION IF EXISTS "{self.schema}".{generation_function_name(generation)}(jsonb)', ())
        self._x(curs, f'DROP FUNCTION IF EXISTS "{self.schema}".chatrecord_append_g{int(generation)}_v5(jsonb)', ())
        old = OLD_VIEWS_FUNCTION.format(generation=int(generation))  # a store an earlier version wrote into
        self._x(curs, f'DROP FUNCTION IF EXISTS "{self.schema}".{old}(text, jsonb)', ())

    def lock(self, curs: Any, exclusive: bool) -> None:
        """Takes the views' lock of this schema (`views_lock_key`): shared, or exclusive (a
        rebuild's switch), then also the lock earlier versions took for every schema, which
        their appends take shared, so a process of an earlier version still running waits too."""
        if isinstance(curs, AppendDocument) and not exclusive:
            return  # the append function takes the shared lock before it writes the views
        if exclusive:
            self._x(curs, "SELECT pg_advisory_xact_lock(?), pg_advisory_xact_lock(?)",
                    (self._views_lock, LOCK_KEY))
        else:
            self._x(curs, "SELECT pg_advisory_xact_lock_shared(?)", (self._views_lock,))

    def _id(self, cid: UUID) -> Any:
        return cid


class RecentFirst(deque):  # type: ignore[type-arg]
    """A connection pool's idle connections (psycopg_pool keeps them in a deque, `_pool`),
    the one returned last handed out first. psycopg_pool hands out the one idle longest, so a
    writer's appends go round all of the pool's connections, each served by a server process
    whose caches (and PL/pgSQL plans) have gone cold by its turn; taking the last one keeps
    one warm: about 0.2 ms less per append, measured alternating both ways in one process.
    The pool takes from the deque only with `popleft` (also when it shrinks: it then closes
    the connection used last, which costs at most a reconnect)."""

    def popleft(self) -> Any:
        return self.pop()


class PostgresFactory(StoreFactory, es_postgres.PostgresFactory):
    """The library's PostgreSQL persistence with `ChainedPostgresRecorder`, `ensure_schema`
    instead of the library's CREATE on every open (`CREATE_TABLE=n` skips it, as in the
    library), and a `statement_timeout` of `POSTGRES_STATEMENT_TIMEOUT` seconds on every
    connection. The chain, the data keys and the history index are in the store's schema, all
    created once with the library's tables; it hands out the schema's history index, views and
    idempotency keys."""

    application_recorder_class = ChainedPostgresRecorder
    POSTGRES_STATEMENT_TIMEOUT = "POSTGRES_STATEMENT_TIMEOUT"
    POSTGRES_CONNINFO = "POSTGRES_CONNINFO"
    """libpq's conninfo of the store's connections (`adapters.store.settings.postgres_env` puts the
    whole URL there, but its `schema`); where set, it replaces the library's host, port, user,
    password and database name."""
    driver_errors = (psycopg.Error,)

    @classmethod
    def describe(cls, env: Mapping[str, str]) -> str:
        schema = env.get("POSTGRES_SCHEMA") or "public"
        hosts = (env.get("POSTGRES_HOST") or "").split(",")
        ports = (env.get("POSTGRES_PORT") or "5432").split(",")
        ports = ports * len(hosts) if len(ports) == 1 else ports  # one port for every host, as libpq reads it
        where = ",".join(f"{host}:{port or 5432}" for host, port in zip(hosts, ports, strict=False))
        return f"PostgreSQL {env.get('POSTGRES_USER')}@{where}/{env.get('POSTGRES_DBNAME')} (schema {schema})"

    @classmethod
    def server_reason(cls, env: Mapping[str, str]) -> str | None:
        """Returns why the server refuses a connection (a missing database or role, a wrong
        password), found by one direct connection attempt; None when it connects."""
        try:
            timeout = int(env.get("POSTGRES_CONNECT_TIMEOUT") or 5)
            if env.get(cls.POSTGRES_CONNINFO):
                psycopg.connect(env[cls.POSTGRES_CONNINFO], connect_timeout=timeout).close()
            else:
                psycopg.connect(
                    dbname=env.get("POSTGRES_DBNAME"), host=env.get("POSTGRES_HOST"), port=env.get("POSTGRES_PORT"),
                    user=env.get("POSTGRES_USER"), password=env.get("POSTGRES_PASSWORD") or None,
                    connect_timeout=timeout,
                ).close()
        except psycopg.Error as error:
            return one_line(str(error)) or type(error).__name__
        return None

    @classmethod
    def problem(cls, driver: BaseException, env: Mapping[str, str], text: str, backend: str) -> str | None:
        if isinstance(driver, psycopg.errors.InvalidSchemaName):
            schema = env.get("POSTGRES_SCHEMA") or "public"
            named = schema if schema == schema.lower() else f'"{schema}"'  # unquoted, the server folds case
            return (
                f"CHATRECORD_DATABASE_URL: schema {schema!r} does not exist in database "
                f"{env.get('POSTGRES_DBNAME')!r}; create it (CREATE SCHEMA {named};) or leave out "
                "?schema= to use public"
            )
        if isinstance(driver, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled)):
            return (
                f"the store ({backend}) did not finish in time ({text}): another process held the "
                f"events table for {env.get('POSTGRES_LOCK_TIMEOUT') or WRITE_LOCK_TIMEOUT} s or a statement "
                f"ran {env.get('POSTGRES_STATEMENT_TIMEOUT') or STATEMENT_TIMEOUT} s; nothing of it was "
                "stored, try again"
            )
        if isinstance(driver, psycopg.errors.TransactionRollback):  # deadlock, serialization failure
            return (
                f"the store ({backend}) gave way to another process's write ({text}); nothing of it "
                "was stored, try again"
            )
        if isinstance(driver, psycopg.errors.ReadOnlySqlTransaction):
            return (
                f"the store ({backend}) is read-only ({text}): commands that only read work here; "
                "run this one against the primary"
            )
        if isinstance(driver, PoolTimeout):  # the pool only says it waited; ask the server why
            text = cls.server_reason(env) or text
        if isinstance(driver, (psycopg.OperationalError, psycopg.InterfaceError,
                               psycopg.errors.InsufficientPrivilege, psycopg.errors.InvalidCatalogName)):
            return (
                f"the store ({backend}) cannot be used: {text}; check CHATRECORD_DATABASE_URL "
                "and that the server answers"
            )
        return None

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        text = self.env.get(self.POSTGRES_STATEMENT_TIMEOUT) or str(STATEMENT_TIMEOUT)
        if not (text.isascii() and text.isdigit()):
            raise OSError(f"'{self.POSTGRES_STATEMENT_TIMEOUT}' must be whole seconds, not {text!r}")
        kwargs = self.datastore.pool.kwargs
        assert isinstance(kwargs, dict)
        lock = int(self.datastore.lock_timeout or 0)
        options = f"-c statement_timeout={int(text) * 1000} -c lock_timeout={lock * 1000}"
        conninfo = self.env.get(self.POSTGRES_CONNINFO)
        if conninfo:  # the whole URL reaches libpq: TLS, several hosts, every parameter it knows
            for key in ("dbname", "host", "port", "user", "password"):  # a keyword would win over it
                kwargs.pop(key, None)
            self.datastore.pool.conninfo = conninfo
            given = conninfo_to_dict(conninfo).get("options")
            options = f"{given} {options}" if given else options
        kwargs["options"] = options
        # No automatic server-side prepared statements: a pipelined append that fails part-way
        # (a conflict, a view statement) can leave psycopg believing a statement was prepared
        # whose Parse the server skipped ("prepared statement _pg3_9 does not exist" on the next
        # use). With the threshold at None psycopg prepares nothing, not even a statement that
        # asks for it; a turn read's statements are prepared by setting it for their own
        # execution (`PostgresBackend.run`), outside pipeline mode.
        kwargs["prepare_threshold"] = None
        pool = self.datastore.pool  # not open yet: no connection is in its deque
        if type(getattr(pool, "_pool", None)) is deque:
            pool._pool = RecentFirst(pool._pool)
        self.created: list[str] = []
        """The tables this factory created (empty when the store existed already)."""

    def env_create_table(self) -> bool:
        return False  # the library's own CREATE runs on every open; `_ready` creates once

    def _ready(self, recorder: Any) -> Any:
        if strtobool(self.env.get(self.CREATE_TABLE) or "yes") and ensure_schema(recorder):
            self.created.append(recorder.events_table_name)
        else:
            recorder.datastore.register_type_adapters()
        return recorder

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        return self._ready(super().aggregate_recorder(purpose))

    def application_recorder(self) -> ApplicationRecorder:
        recorder = super().application_recorder()
        schema = self.datastore.schema
        recorder.sql_create_statements.extend([  # type: ignore[attr-defined]
            *keys_statements(schema),
            *(SQL(statement) for statement in history_statements(schema)),
        ])
        recorder.extra_tables = (CHAIN_TABLE, KEYS_TABLE, MASTER_TABLE, *HISTORY_TABLES)  # type: ignore[attr-defined]
        return self._ready(recorder)

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return PostgresDataKeys(self.datastore, master, create_table=False)  # made with the schema

    @classmethod
    def history_tables(cls, store: Any) -> PostgresHistoryTables:
        return PostgresHistoryTables(store.recorder.datastore)

    @classmethod
    def views_backend(cls, store: Any) -> PostgresBackend:
        return PostgresBackend(store.recorder.datastore, store.recorder.events_table_name,
                               chained=getattr(store.recorder, "chain_table", None) is not None)

    @classmethod
    def idempotency_keys(cls, store: Any) -> SQLKeys:
        datastore = store.recorder.datastore
        table = '"' + datastore.schema.replace('"', '""') + '".' + TABLE
        return SQLKeys(datastore, table, "%s", [
            f"SELECT pg_advisory_xact_lock(hashtext('{TABLE}'))",
            f"CREATE TABLE IF NOT EXISTS {table} {COLUMNS}",
        ])


def _bytes(value: Any) -> bytes | None:
    """Returns a bytea column's value as bytes (psycopg gives memoryview or bytes), None as None."""
    return None if value is None else bytes(value)
