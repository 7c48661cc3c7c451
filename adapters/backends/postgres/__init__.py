"""The PostgreSQL backend: the library's persistence, with its schema created once and writes that end.

`PostgresFactory` makes the chained application recorder (`ChainedPostgresRecorder`) and the
data keys (`PostgresDataKeys`), and hands out the schema's pieces of the store: the history
index (`PostgresHistoryTables`), the views' tables (`PostgresViewStorage`) and the kept idempotency
keys (`adapters.backends.sql.idempotency.SQLIdempotencyKeys`).

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
  read (`PostgresViewStorage.reading`) runs in autocommit, without BEGIN and ROLLBACK, and its two
  statements run prepared (`PostgresViewStorage.run`), with the connection's `prepare_threshold`
  set only while each runs, outside pipeline mode: the server plans them once per connection.
- **Subscriptions.** Every append sends the library's NOTIFY on the events table's channel
  (the append function as the library's own insert function does; the pipelined and plain
  appends through the library's steps), so the library's `subscribe` (a thread that LISTENs)
  works on both recorders.
- **Timeouts.** A write waits at most `POSTGRES_LOCK_TIMEOUT` seconds (default
  `WRITE_LOCK_TIMEOUT`) for the events table's write lock, and any statement runs at most
  `POSTGRES_STATEMENT_TIMEOUT` seconds (default `STATEMENT_TIMEOUT`); then it fails with the
  server's error (`adapters.backends.settings.store_problem` makes it one line) instead of holding the
  store.

The package, one module per job (`PERSISTENCE_MODULE` names `adapters.backends.postgres:PostgresFactory`):

- `schema`: the tables made once (`create_once`, `ensure_schema`), the advisory lock ids, `SchemaNotCreated`.
- `append`: the append as one statement: `AppendDocument`, `Unfit` and the append functions, whose
  PL/pgSQL is in `append_function.sql`, `append_no_views.sql` and `append_views.sql`.
- `recorder`: `EventRecorder`, the application recorder (how an append is sent, and its reads,
  tried again only when the connection failed), and `PlainEventRecorder`, which writes no chain.
- `chained_recorder`: `ChainedPostgresRecorder`, the recorder with the hash chain.
- `data_keys`: `PostgresDataKeys`.
- `history_tables`: `PostgresHistoryTables`, the history index and the check of an assumed index.
- `view_tables`: `PostgresViewStorage` (the views' tables), `OneStatement`; `buffered_rows`: `PostgresBufferedRows`.
- `factory`: `PostgresFactory`, the timeouts and the driver's problems in words; `pool_order`:
  what is set on the library's pool (`connect_with`, `hand_out_recent_first`: `RecentFirst`).
"""

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
