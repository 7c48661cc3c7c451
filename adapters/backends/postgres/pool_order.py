"""What the backend sets on psycopg_pool's `ConnectionPool` after the library built it, each in one
function, because the library's `PostgresDatastore` builds its pool with no way to pass them:
what its connections are opened with (`connect_with`) and the order idle ones are handed out
(`hand_out_recent_first`). tests/unit/test_pool_order.py fails where psycopg_pool changes shape.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool


class RecentFirst(deque[Any]):
    """A connection pool's idle connections, the one returned last handed out first (see
    `hand_out_recent_first`). The pool takes from its deque only with `popleft` (also when it
    shrinks: it then closes the connection used last, which costs at most a reconnect)."""

    def popleft(self) -> Any:
        return self.pop()


def connect_with(pool: ConnectionPool[Any], conninfo: str | None, options: str, **kwargs: Any) -> None:
    """Opens the pool's connections with libpq's `conninfo` (the whole URL: TLS, several hosts,
    every parameter libpq knows; None: the library's host, port, user, password and database
    name), the server `options` (after those `conninfo` gives) and `kwargs`. The pool reads its
    public `conninfo` and `kwargs` at each connect; set before it opens."""
    given = pool.kwargs
    assert isinstance(given, dict), "the library passes its connection keywords as a dict"
    if conninfo:
        for key in ("dbname", "host", "port", "user", "password"):  # a keyword would win over the conninfo
            given.pop(key, None)
        pool.conninfo = conninfo
        from_url = _conninfo_options(conninfo)
        options = f"{from_url} {options}" if from_url else options
    given["options"] = options
    given.update(kwargs)


def _conninfo_options(conninfo: str) -> str | None:
    found = conninfo_to_dict(conninfo).get("options")
    return str(found) if found else None


def hand_out_recent_first(pool: ConnectionPool[Any]) -> bool:
    """Makes the pool hand out the idle connection returned last, not the one idle longest;
    returns False (and leaves the pool's own order) where psycopg_pool keeps them otherwise.

    Why: psycopg_pool hands out the connection idle longest, so a writer's appends go round all
    of the pool's connections, each served by a server process whose caches (and PL/pgSQL
    plans) have gone cold by its turn; taking the last one keeps one warm (docs/benchmarks.md,
    "Figures moved from docstrings"). psycopg_pool has no public way to
    choose the order (its `configure`, `reset` and `check` callbacks act on one connection), so
    this replaces its private deque `_pool` (psycopg_pool 3.2 and 3.3), before the pool opens."""
    idle = getattr(pool, "_pool", None)
    if type(idle) is not deque or idle:
        return False
    pool._pool = RecentFirst(idle)
    return True
