"""Reads from PostgreSQL standbys that never go back in time for their caller.

A write answers with its read-after position (`write_position`): `pg_current_wal_insert_lsn()` after
commit. A read given it is served by a standby once it has replayed that far (`replayed`). It waits
up to CHATRECORD_READ_WAIT_MS, else the primary serves it. The position is an opaque `pg_lsn` token
(`0/3016040`), checked by `POSITION`. A standby statement cancelled by recovery (SQLSTATE 40001) is
read again. On other backends `write_position` returns None."""

from __future__ import annotations

import re
import time
from typing import Any

POSITION = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")
"""A read-after position as `write_position` gives it (PostgreSQL's `pg_lsn` text)."""

_WRITTEN = "SELECT pg_current_wal_insert_lsn()::text"
_REPLAYED = "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END >= %s::pg_lsn"
"""Whether the server has replayed up to a position: a standby by its replay position, a server
that is no standby (promoted, or a primary named as the reading URL) by its own WAL."""
FIRST_PAUSE = 0.001
LAST_PAUSE = 0.02
"""Seconds between two asks of `replayed`: from the first, doubling, up to the last."""


def check_position(position: str) -> str:
    """Returns `position` when it is one `write_position` gives; raises ValueError otherwise."""
    if not isinstance(position, str) or not POSITION.fullmatch(position):
        raise ValueError(f"a read-after position is what a write returned, e.g. '0/3016040', not {position!r}")
    return position


def _datastore(store: Any) -> Any:
    """Returns the library's PostgresDatastore of `store`, None for a store on another backend."""
    datastore = getattr(store.recorder, "datastore", None)
    return datastore if hasattr(datastore, "pool") else None


def write_position(store: Any) -> str | None:
    """Returns the read-after position of everything `store` (on the primary) committed so far:
    its WAL insert position, one statement. None for a store on another backend than PostgreSQL."""
    datastore = _datastore(store)
    if datastore is None:
        return None
    from psycopg.rows import tuple_row

    with datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
        row = curs.execute(_WRITTEN).fetchone()
    return str(row[0]) if row is not None else None


def replayed(store: Any, position: str, wait: float) -> bool:
    """Returns True once the standby has replayed up to `position`, asking for at most `wait` seconds.
    Pauses grow from FIRST_PAUSE to LAST_PAUSE s. Returns False when not by then, or when it cannot
    ask."""
    from eventsourcing.persistence import PersistenceError
    from psycopg import Error
    from psycopg.rows import tuple_row

    datastore = _datastore(store)
    if datastore is None:
        return True
    deadline, pause = time.monotonic() + wait, FIRST_PAUSE
    try:
        with datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row) as curs:
            while True:
                row = curs.execute(_REPLAYED, (position,)).fetchone()
                if row is not None and row[0]:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(pause, left))
                pause = min(pause * 2, LAST_PAUSE)
    except (PersistenceError, Error):
        return False


def _sqlstate(error: BaseException) -> str | None:
    """Returns a psycopg error's SQLSTATE, None for another error."""
    from psycopg import Error

    return error.sqlstate if isinstance(error, Error) else None


def wrote_on_standby(error: BaseException) -> bool:
    """Returns True when `error` or its cause is a write the standby refused (SQLSTATE 25006)."""
    seen: BaseException | None = error
    while seen is not None:
        if _sqlstate(seen) == "25006":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def recovery_conflict(error: BaseException) -> bool:
    """Returns True when `error` or its cause is a statement recovery cancelled (SQLSTATE 40001)."""
    seen: BaseException | None = error
    while seen is not None:
        if _sqlstate(seen) == "40001" and "conflict with recovery" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
