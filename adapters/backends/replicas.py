"""Reads from PostgreSQL standbys that never go back in time for their caller.

A write answers with its *read-after position* (`write_position`): the primary's WAL insert
position (`pg_current_wal_insert_lsn()`) read right after the write committed, so it lies at or
past the end of the write's commit record. A caller hands it back with a read; the read is
served by the standby only once the standby has replayed up to it (`replayed`:
`pg_last_wal_replay_lsn()`, asked again until it has or the wait, CHATRECORD_READ_WAIT_MS, is
over), and by the primary otherwise. The position is an opaque token to the caller (its text is
PostgreSQL's `pg_lsn`, e.g. `0/3016040`, which `POSITION` checks).

A standby's statement that recovery cancels (a row it read was vacuumed away on the primary and
the standby's `max_standby_streaming_delay` ran out: SQLSTATE 40001, "canceling statement due
to conflict with recovery") is read again (`recovery_conflict` finds it), not shown.

Only PostgreSQL has standbys; on any other backend `write_position` returns None.
"""

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
    """Returns True once the server of `store` (a standby) has replayed up to `position`, asking
    again (waits of FIRST_PAUSE up to LAST_PAUSE s) for at most `wait` seconds; False when it has
    not by then, or when the standby cannot be asked (the primary serves the read then)."""
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
    """Returns the SQLSTATE of a psycopg error, None for another error (psycopg is imported
    here, not with the module: a store on SQLite never loads it)."""
    from psycopg import Error

    return error.sqlstate if isinstance(error, Error) else None


def wrote_on_standby(error: BaseException) -> bool:
    """Returns True when `error`, or an error it was raised from, is a write the standby refused
    (SQLSTATE 25006, a read-only transaction): a read that had to bring the read models up to
    date first, which only the primary can."""
    seen: BaseException | None = error
    while seen is not None:
        if _sqlstate(seen) == "25006":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def recovery_conflict(error: BaseException) -> bool:
    """Returns True when `error`, or an error it was raised from, is a standby's statement that
    recovery cancelled (SQLSTATE 40001 with "conflict with recovery" in its message)."""
    seen: BaseException | None = error
    while seen is not None:
        if _sqlstate(seen) == "40001" and "conflict with recovery" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
