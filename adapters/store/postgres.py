"""The PostgreSQL store: the library's persistence, with its schema created once and writes that end.

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
- **Timeouts.** A write waits at most `POSTGRES_LOCK_TIMEOUT` seconds (default
  `WRITE_LOCK_TIMEOUT`) for the events table's write lock, and any statement runs at most
  `POSTGRES_STATEMENT_TIMEOUT` seconds (default `STATEMENT_TIMEOUT`); then it fails with the
  server's error (`adapters.store.settings.store_problem` makes it one line) instead of holding the
  store.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
import psycopg.errors
from eventsourcing import postgres as es_postgres
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InterfaceError,
    OperationalError,
    StoredEvent,
)
from psycopg_pool import PoolTimeout
from eventsourcing.utils import strtobool
from psycopg.sql import SQL, Composable, Composed, Identifier

from domain.errors import ChatrecordError

WRITE_LOCK_TIMEOUT = 10
"""Seconds a write waits for another process's write on the events table (`lock_timeout`)."""
STATEMENT_TIMEOUT = 60
"""Seconds any one statement may run (`statement_timeout`), reads and writes alike."""
PIPELINE_BYTES = 256 * 1024
"""An append whose events' states hold at most this many bytes goes through psycopg's pipeline
mode (as the library's own recorder does); a larger one through an ordinary transaction."""
CONNECTION_ATTEMPTS = 5
"""Tries of a write whose connection failed (not of one that timed out)."""

Statement = str | Composable


class SchemaNotCreated(ChatrecordError):
    """Raised when the store's tables are missing and cannot be created: a read-only database,
    a role without CREATE on the schema, or another database error (named in the message)."""


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


class EventRecorder(es_postgres.PostgresApplicationRecorder):
    """The library's application recorder, appending in one ordinary transaction instead of
    psycopg's pipeline mode (see the module's docstring)."""

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Appends `stored_events` under the events table's write lock and returns their
        notification ids; tries again when the connection fails, never after a timeout.

        Raises the library's IntegrityError when a version is taken already, OperationalError
        when the lock or the statement timed out.
        """
        for attempt in range(1, CONNECTION_ATTEMPTS + 1):
            try:
                return self._append(stored_events, **kwargs)
            except (InterfaceError, OperationalError) as error:
                cause = error.__cause__
                if attempt == CONNECTION_ATTEMPTS or isinstance(cause, PoolTimeout) or getattr(cause, "sqlstate", None):
                    raise  # the pool waited already, or the server answered (a timeout, a refusal)
                time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    def _append(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if not stored_events:
            return None
        if sum(len(e.state) for e in stored_events) > PIPELINE_BYTES:
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
        """The library's own pipelined append: the writes before the insert go out without
        waiting for each answer; only a read waits (and the sync after the insert)."""
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

class PostgresFactory(es_postgres.PostgresFactory):
    """The library's PostgreSQL persistence with `EventRecorder`, `ensure_schema` instead of
    the library's CREATE on every open (`CREATE_TABLE=n` skips it, as in the library), and a
    `statement_timeout` of `POSTGRES_STATEMENT_TIMEOUT` seconds on every connection."""

    application_recorder_class = EventRecorder
    POSTGRES_STATEMENT_TIMEOUT = "POSTGRES_STATEMENT_TIMEOUT"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        text = self.env.get(self.POSTGRES_STATEMENT_TIMEOUT) or str(STATEMENT_TIMEOUT)
        if not (text.isascii() and text.isdigit()):
            raise OSError(f"'{self.POSTGRES_STATEMENT_TIMEOUT}' must be whole seconds, not {text!r}")
        kwargs = self.datastore.pool.kwargs
        assert isinstance(kwargs, dict)
        kwargs["options"] = f"-c statement_timeout={int(text) * 1000}"
        # No automatic server-side prepared statements: a pipelined append that fails part-way
        # (a conflict, a view statement) can leave psycopg believing a statement was prepared
        # whose Parse the server skipped ("prepared statement _pg3_9 does not exist" on the next
        # use). The library's own statements that ask for preparing still are.
        kwargs["prepare_threshold"] = None
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
        return self._ready(super().application_recorder())


Factory = PostgresFactory
