"""The PostgreSQL backend: the library's persistence, with its schema created once and writes that end.

`PostgresFactory` makes the chained recorder and the data keys. It hands out the history index, the
views' tables and the idempotency keys.

- **Schema once.** `create_once` asks the catalog whether the store's objects exist. Only when one is
  missing does it create them, in one transaction under the schema's advisory lock. Concurrent first
  processes wait for each other. A store whose tables exist is only read at open, so reading commands
  work on a hot standby.
- **Large writes without pipeline mode.** psycopg's pipeline mode can hang on a large message.
  `EventRecorder` pipelines an append of at most `PIPELINE_BYTES`; a larger one goes in one ordinary
  transaction.
- **Turn reads prepared, appends not.** Connections prepare nothing by themselves; a pipelined append
  must never send a named statement. A turn read runs in autocommit, its statements prepared
  (`PostgresViewStorage.run`).
- **Subscriptions.** Every append sends the library's NOTIFY, so the library's `subscribe` works.
- **Timeouts.** A write waits at most `POSTGRES_LOCK_TIMEOUT` seconds (default `WRITE_LOCK_TIMEOUT`) for
  the events table's lock. A statement runs at most `POSTGRES_STATEMENT_TIMEOUT` seconds (default
  `STATEMENT_TIMEOUT`). Then it fails with the server's error (`store_problem`).

Modules (`PERSISTENCE_MODULE` names `adapters.backends.postgres:PostgresFactory`):
- `schema`: the tables made once, the advisory lock ids, `SchemaNotCreated`.
- `append`: `AppendDocument`, `Unfit` and the append functions (`*.sql`).
- `recorder`: `EventRecorder` and `PlainEventRecorder`, which writes no chain.
- `chained_recorder`: `ChainedPostgresRecorder`, with the hash chain.
- `data_keys`, `history_tables`: the data keys; the history index and its assumption check.
- `view_tables`: `PostgresViewStorage`, `OneStatement`; `buffered_rows`: `PostgresBufferedRows`.
- `factory`: `PostgresFactory`, timeouts, the driver's problems in words; `pool_order`: pool settings."""

from adapters.backends.postgres.append import (
    APPEND_FUNCTION,
    ASSUMPTION_FAILED,
    ASSUMPTION_FUNCTION,
    ASSUMPTION_MESSAGE,
    AppendDocument,
    Unfit,
    append_function_statement,
    assumption_function_statement,
    generation_function_name,
    generation_function_statement,
)
from adapters.backends.postgres.buffered_rows import PostgresBufferedRows
from adapters.backends.postgres.chained_recorder import ChainedPostgresRecorder
from adapters.backends.postgres.data_keys import PostgresDataKeys, keys_statements
from adapters.backends.postgres.factory import STATEMENT_TIMEOUT, WRITE_LOCK_TIMEOUT, PostgresFactory
from adapters.backends.postgres.history_tables import PostgresHistoryTables
from adapters.backends.postgres.pool_order import RecentFirst
from adapters.backends.postgres.recorder import BATCH_DOCUMENT_BYTES, PIPELINE_BYTES, EventRecorder, PlainEventRecorder
from adapters.backends.postgres.schema import (
    OLD_VIEWS_LOCK_ID,
    SchemaNotCreated,
    create_once,
    ensure_schema,
    schema_exists_query,
    schema_lock_name,
    table_exists,
    views_lock_id,
)
from adapters.backends.postgres.view_tables import OneStatement, PostgresViewStorage

__all__ = [
    "APPEND_FUNCTION",
    "ASSUMPTION_FAILED",
    "ASSUMPTION_FUNCTION",
    "ASSUMPTION_MESSAGE",
    "BATCH_DOCUMENT_BYTES",
    "OLD_VIEWS_LOCK_ID",
    "PIPELINE_BYTES",
    "STATEMENT_TIMEOUT",
    "WRITE_LOCK_TIMEOUT",
    "AppendDocument",
    "ChainedPostgresRecorder",
    "EventRecorder",
    "PlainEventRecorder",
    "OneStatement",
    "PostgresViewStorage",
    "PostgresBufferedRows",
    "PostgresDataKeys",
    "PostgresFactory",
    "PostgresHistoryTables",
    "RecentFirst",
    "SchemaNotCreated",
    "Unfit",
    "append_function_statement",
    "assumption_function_statement",
    "create_once",
    "ensure_schema",
    "generation_function_name",
    "generation_function_statement",
    "keys_statements",
    "schema_lock_name",
    "schema_exists_query",
    "table_exists",
    "views_lock_id",
]
