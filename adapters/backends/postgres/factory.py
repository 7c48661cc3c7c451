"""The store's factory (`PostgresFactory`): the library's PostgreSQL persistence with chatrecord's recorder,
the schema made once, connection options, and words for a driver's errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

import psycopg
import psycopg.errors
from eventsourcing import postgres as es_postgres
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    ProcessRecorder,
)
from eventsourcing.utils import strtobool
from psycopg.sql import SQL
from psycopg_pool import PoolTimeout

from adapters.backends import StoreFactory, one_line
from adapters.backends.postgres.append import assumption_function_statement
from adapters.backends.postgres.chained_recorder import ChainedPostgresRecorder
from adapters.backends.postgres.data_keys import PostgresDataKeys, keys_statements
from adapters.backends.postgres.history_tables import PostgresHistoryTables
from adapters.backends.postgres.pool_order import connect_with, hand_out_recent_first
from adapters.backends.postgres.schema import ensure_schema
from adapters.backends.postgres.view_tables import PostgresViewStorage
from adapters.backends.sql import reproductions
from adapters.backends.sql.dialect import POSTGRES_PARAM, Dialect
from adapters.backends.sql.history_statements import TABLES as HISTORY_TABLES
from adapters.backends.sql.history_statements import create_statements as history_statements
from adapters.backends.sql.idempotency import TABLE, SQLIdempotencyKeys, create_statements
from adapters.store.chain import CHAIN_TABLE, ChainedRecorder
from adapters.store.crypto import ViewTexts
from adapters.store.keys import KEYS_TABLE, MASTER_TABLE, DataKeys

R = TypeVar("R")

WRITE_LOCK_TIMEOUT = 10
"""Seconds a write waits for another process's write on the events table (`lock_timeout`)."""
STATEMENT_TIMEOUT = 60
"""Seconds any one statement may run (`statement_timeout`), reads and writes alike."""
CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")
"""SQLSTATEs (or classes) of a lost or refused connection: connection exceptions, and a server
that is shutting down, crashed or starting (`PostgresFactory.connection_lost`)."""


class PostgresFactory(StoreFactory, es_postgres.PostgresFactory):
    """The library's PostgreSQL persistence with `ChainedPostgresRecorder`. `ensure_schema` replaces the
    library's CREATE on every open; `CREATE_TABLE=n` skips it. Every connection has a `statement_timeout`
    of `POSTGRES_STATEMENT_TIMEOUT` seconds. The chain, data keys and history index live in the store's
    schema. It hands out the history index, views and idempotency keys."""

    application_recorder_class = ChainedPostgresRecorder
    POSTGRES_STATEMENT_TIMEOUT = "POSTGRES_STATEMENT_TIMEOUT"
    POSTGRES_CONNINFO = "POSTGRES_CONNINFO"
    """libpq's conninfo of the store's connections (`adapters.backends.settings.postgres_env` puts the
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
        """Returns why the server refuses a connection (missing database or role, wrong password), from one
        direct attempt. None when it connects."""
        try:
            timeout = int(env.get("POSTGRES_CONNECT_TIMEOUT") or 5)
            if env.get(cls.POSTGRES_CONNINFO):
                psycopg.connect(env[cls.POSTGRES_CONNINFO], connect_timeout=timeout).close()
            else:
                psycopg.connect(
                    dbname=env.get("POSTGRES_DBNAME"),
                    host=env.get("POSTGRES_HOST"),
                    port=env.get("POSTGRES_PORT"),
                    user=env.get("POSTGRES_USER"),
                    password=env.get("POSTGRES_PASSWORD") or None,
                    connect_timeout=timeout,
                ).close()
        except psycopg.Error as error:
            return one_line(str(error)) or type(error).__name__
        return None

    @classmethod
    def connection_lost(cls, error: BaseException) -> bool:
        """True where `error`, or one it was raised from, is a lost connection. That is psycopg's
        OperationalError or InterfaceError with no SQLSTATE or one of CONNECTION_STATES, or PoolTimeout.
        A statement the server answered with an error is not."""
        seen: BaseException | None = error
        while seen is not None:
            if isinstance(seen, PoolTimeout):
                return True
            if isinstance(seen, (psycopg.OperationalError, psycopg.InterfaceError)):
                state = seen.sqlstate
                return state is None or state.startswith(CONNECTION_STATES)
            seen = seen.__cause__
        return False

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
            return f"the store ({backend}) gave way to another process's write ({text}); nothing of it was stored, try again"
        if isinstance(driver, psycopg.errors.UndefinedTable) and env.get("CREATE_TABLE") == "n":
            return (  # a reading store (a standby) never makes a table: the primary's have not reached it
                f"the reading store ({backend}, CHATRECORD_READ_DATABASE_URL) has no chatrecord tables "
                f"({str(driver).splitlines()[0]}): run `chatrecord init` against the primary (CHATRECORD_DATABASE_URL) and let "
                "the standby replay it"
            )
        if isinstance(driver, psycopg.errors.ReadOnlySqlTransaction):
            return (
                f"the store ({backend}) is read-only ({text}): commands that only read work here; "
                "run this one against the primary"
            )
        if isinstance(driver, PoolTimeout):  # the pool only says it waited; ask the server why
            text = cls.server_reason(env) or text
        if isinstance(
            driver,
            (
                psycopg.OperationalError,
                psycopg.InterfaceError,
                psycopg.errors.InsufficientPrivilege,
                psycopg.errors.InvalidCatalogName,
            ),
        ):
            return f"the store ({backend}) cannot be used: {text}; check CHATRECORD_DATABASE_URL and that the server answers"
        return None

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        text = self.env.get(self.POSTGRES_STATEMENT_TIMEOUT) or str(STATEMENT_TIMEOUT)
        if not (text.isascii() and text.isdigit()):
            raise OSError(f"'{self.POSTGRES_STATEMENT_TIMEOUT}' must be whole seconds, not {text!r}")
        lock = int(self.datastore.lock_timeout or 0)
        # No automatic prepared statements (`prepare_threshold` None): a pipelined append that fails
        # part-way can leave psycopg taking a statement as prepared whose Parse the server skipped
        # ("prepared statement _pg3_9 does not exist"). Turn reads prepare theirs (`PostgresViewStorage.run`).
        connect_with(
            self.datastore.pool,  # not open yet
            self.env.get(self.POSTGRES_CONNINFO) or None,
            f"-c statement_timeout={int(text) * 1000} -c lock_timeout={lock * 1000}",
            prepare_threshold=None,
        )
        hand_out_recent_first(self.datastore.pool)
        self.created: list[str] = []
        """The tables this factory created (empty when the store existed already)."""

    def env_create_table(self) -> bool:
        return False  # the library's own CREATE runs on every open; `_ready` creates once

    def upkeep_warning(self) -> str | None:
        """Returns a warning when the server's autovacuum is off: the dead copies of updated rows then stay.
        None when it is on."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SHOW autovacuum")
            row = curs.fetchone()
        value = str(next(iter(row.values())) if isinstance(row, dict) else row[0]) if row else "on"
        if value.lower() in ("on", "true", "yes", "1"):
            return None
        return (
            "the PostgreSQL server's autovacuum is off: the dead copies of the rows each append updates "
            "(a conversation's list row) pile up until a VACUUM of the store's tables; turn it on "
            "(autovacuum = on) or run VACUUM from time to time"
        )

    def _creates(self) -> bool:
        """Whether tables are to be made (the library's CREATE_TABLE, default yes)."""
        return strtobool(self.env.get(self.CREATE_TABLE) or "yes")

    def _ready(self, recorder: R) -> R:
        made = cast(es_postgres.PostgresAggregateRecorder, recorder)  # what the library's PostgreSQL factory makes
        if self._creates() and ensure_schema(made):
            self.created.append(made.events_table_name)
        else:
            made.datastore.register_type_adapters()
        return recorder

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        return self._ready(super().aggregate_recorder(purpose))

    def application_recorder(self) -> ApplicationRecorder:
        recorder = super().application_recorder()
        schema = self.datastore.schema
        recorder.sql_create_statements.extend(  # type: ignore[attr-defined]  # the library's PostgreSQL recorder
            [
                *keys_statements(schema),
                *(SQL(statement) for statement in history_statements(Dialect(POSTGRES_PARAM, schema))),
                SQL(assumption_function_statement(schema)),
            ]
        )
        recorder.extra_tables = (CHAIN_TABLE, KEYS_TABLE, MASTER_TABLE, *HISTORY_TABLES)  # type: ignore[attr-defined]  # ours, for ensure_schema
        return self._ready(recorder)

    def tracking_recorder(self, tracking_recorder_class: Any = None) -> Any:
        """The library's tracking recorder, its table made by the library's CREATE unless CREATE_TABLE=n.
        The store keeps no tracking of its own."""
        recorder = super().tracking_recorder(tracking_recorder_class)
        if self._creates():
            recorder.create_table()
        return recorder

    def process_recorder(self) -> ProcessRecorder:
        """The library's process recorder, its tables made as `tracking_recorder`'s."""
        recorder = super().process_recorder()
        if self._creates():
            recorder.create_table()  # type: ignore[attr-defined]
        return recorder

    def construct_data_keys(self, master: bytes | None) -> DataKeys:
        return DataKeys(master, PostgresDataKeys(self.datastore, create_table=False))  # made with the schema

    @classmethod
    def history_index(cls, recorder: Any) -> PostgresHistoryTables:
        return PostgresHistoryTables(recorder.datastore)

    @classmethod
    def view_storage(cls, recorder: Any, texts: ViewTexts | None) -> PostgresViewStorage:
        return PostgresViewStorage(
            recorder.datastore,
            recorder.events_table_name,
            chained=isinstance(recorder, ChainedRecorder),
            texts=texts,
        )

    @classmethod
    def idempotency_keys(cls, recorder: Any) -> SQLIdempotencyKeys:
        """The keys' table in the store's schema, made under an advisory lock so starting processes do not
        race."""
        dialect = Dialect(POSTGRES_PARAM, recorder.datastore.schema)
        lock = f"SELECT pg_advisory_xact_lock(hashtext('{TABLE}'))"
        return SQLIdempotencyKeys(recorder.datastore, dialect, [lock, *create_statements(dialect)])

    @classmethod
    def reproduction_rows(cls, recorder: Any) -> reproductions.SQLReproductionRows:
        """The reproductions' table in the store's schema, made under an advisory lock."""
        dialect = Dialect(POSTGRES_PARAM, recorder.datastore.schema)
        lock = f"SELECT pg_advisory_xact_lock(hashtext('{reproductions.TABLE}'))"
        return reproductions.SQLReproductionRows(recorder.datastore, dialect, [lock, *reproductions.create_statements(dialect)])
