"""What the backend sets on psycopg_pool's `ConnectionPool` after the library built it: connection options
(`connect_with`) and the idle order (`hand_out_recent_first`). The library gives no way to pass them.
tests/unit/test_pool_order.py fails where psycopg_pool changes shape."""

from __future__ import annotations

from collections import deque
from typing import Any

from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool


class RecentFirst(deque[Any]):
    """A pool's idle connections, the one returned last handed out first. The pool takes only with
    `popleft`; when it shrinks it closes the last used."""

    def popleft(self) -> Any:
        return self.pop()


def connect_with(pool: ConnectionPool[Any], conninfo: str | None, options: str, **kwargs: Any) -> None:
    """Opens the pool's connections with libpq's `conninfo`, the server `options` and `kwargs`. `conninfo`
    is the whole URL; None: the library's host, port, user, password and database. The pool reads
    `conninfo` and `kwargs` at each connect; set them before it opens."""
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
    """Makes the pool hand out the idle connection returned last, not the one idle longest. Returns False,
    leaving the pool's order, where psycopg_pool keeps them otherwise. A warm server process serves the
    next append (figure: docs/benchmarks.md, "Figures moved from docstrings"). psycopg_pool has no public
    way to choose, so this replaces its private deque `_pool` (3.2, 3.3) before the pool opens."""
    idle = getattr(pool, "_pool", None)
    if type(idle) is not deque or idle:
        return False
    pool._pool = RecentFirst(idle)
    return True
