"""The store's tables, made once: the catalog check, the advisory lock ids, the schema's problems.
`ensure_schema` makes the tables only when one is missing, in one transaction under the schema's advisory
lock (`create_once`). A store whose tables exist is only read at open. `views_lock_id` is the views'
generations' lock."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import psycopg
import psycopg.errors
from eventsourcing import postgres as es_postgres
from psycopg.sql import SQL, Composable, Composed

from domain.errors import ChatrecordError

OLD_VIEWS_LOCK_ID = 0x63687276  # "chrv": the views' lock of versions before 2 December 2026, one for every schema

Statement = str | Composable


class SchemaNotCreated(ChatrecordError):
    """Raised when the store's tables are missing and cannot be created: a read-only database, a role
    without CREATE, or another database error named in the message."""


def views_lock_id(schema: str) -> int:
    """Returns the advisory lock (a signed 64-bit id) of the views' generations in `schema`. Appends take it
    shared, a rebuild's switch exclusive. One per schema."""
    digest = hashlib.blake2b(f"chatrecord views {schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def schema_lock_name(schema: str) -> str:
    """Returns the advisory lock name that serialises creating the store in `schema`."""
    return f"chatrecord schema {schema}"


def create_once(conn: psycopg.Connection[Any], lock_name: str, exists: Statement, statements: Iterable[Statement]) -> bool:
    """Runs `statements` on `conn` unless the catalog query `exists` says they ran; returns True when it ran
    them. One transaction takes the advisory lock `lock_name` and asks `exists` again, so one process
    creates and others wait. A statement failing with DuplicateObject is skipped. `conn`'s transaction
    state is kept. Raises psycopg's errors (e.g. ReadOnlySqlTransaction)."""
    if _holds(conn, exists):
        return False
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (lock_name,))
        if _holds(conn, exists):
            return False
        for statement in statements:
            try:
                with conn.transaction():  # a savepoint: one duplicate does not end the rest
                    conn.execute(statement, prepare=False)  # type: ignore[arg-type]  # the store's own SQL, not a LiteralString
            except psycopg.errors.DuplicateObject:
                continue
    return True


def _holds(conn: psycopg.Connection[Any], query: Statement) -> bool:
    row = conn.execute(query, prepare=False).fetchone()  # type: ignore[arg-type]  # the store's own SQL, not a LiteralString
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
        checks.append(
            SQL(
                "EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = {} AND p.proname = {})"
            ).format(schema, recorder.pg_function_name_insert_events)
        )
    return SQL("SELECT ") + SQL(" AND ").join(checks)


def ensure_schema(recorder: es_postgres.PostgresAggregateRecorder) -> bool:
    """Creates `recorder`'s tables, type, index and function once and registers the type; returns True when
    it created them. Raises SchemaNotCreated, with the server's reason, when they are missing and cannot
    be made. Raises the library's errors when no connection can be had."""
    datastore = recorder.datastore
    statements = recorder.sql_create_statements
    is_type = ["CREATE TYPE" in s.as_string() for s in statements]
    ordered = [s for s, t in zip(statements, is_type, strict=True) if t] + [
        s for s, t in zip(statements, is_type, strict=True) if not t
    ]
    with datastore.get_connection() as conn:
        try:
            created = create_once(conn, schema_lock_name(datastore.schema), schema_exists_query(recorder), ordered)
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
