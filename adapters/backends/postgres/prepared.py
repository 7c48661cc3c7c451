"""A statement run prepared on a pooled connection that prepares nothing by itself."""

from __future__ import annotations

from typing import Any

from psycopg import pq

PREPARE_THRESHOLD = 5
"""psycopg's own default, set on a connection only while a statement runs prepared
(`run_prepared`); the statement asks for preparing itself, so the number is not used."""


def run_prepared(curs: Any, sql: str, params: Any) -> Any:
    """Runs `sql` on `curs` prepared: the server parses and plans it once per connection. The
    pool's connections prepare nothing by themselves (`PostgresFactory`: a pipelined append
    must never send a named statement), so the connection's `prepare_threshold` is set only
    while this statement runs, outside pipeline mode, and restored at once: psycopg then keeps
    the statement's name, which only a statement executed with a threshold set uses. In
    pipeline mode the statement goes unprepared. Returns `curs`; raises psycopg's errors."""
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
