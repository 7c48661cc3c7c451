"""A statement run prepared on a pooled connection that prepares nothing by itself."""

from __future__ import annotations

from typing import Any

from psycopg import pq

PREPARE_THRESHOLD = 5
"""psycopg's own default, set on a connection only while a statement runs prepared
(`run_prepared`); the statement asks for preparing itself, so the number is not used."""


def run_prepared(curs: Any, sql: str, params: Any) -> Any:
    """Runs `sql` on `curs` prepared: the server plans it once per connection. The connection's
    `prepare_threshold` is set only while it runs, outside pipeline mode, then restored. In pipeline mode
    it runs unprepared. Returns `curs`; raises psycopg's errors."""
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
