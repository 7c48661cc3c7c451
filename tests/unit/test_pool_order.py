"""`adapters.backends.postgres.pool_order`: what the backend sets on psycopg_pool's pool, and that
psycopg_pool still has the shape it is set on (these fail when a new version changes it)."""

from __future__ import annotations

import inspect
from collections import deque

from psycopg_pool import ConnectionPool

from adapters.backends.postgres.pool_order import RecentFirst, connect_with, hand_out_recent_first


def closed_pool() -> ConnectionPool:
    return ConnectionPool(kwargs={"dbname": "d", "host": "h", "port": 1, "user": "u", "password": "p"}, open=False)


def test_the_pool_hands_out_the_connection_returned_last() -> None:
    pool = closed_pool()
    assert type(pool._pool) is deque and not pool._pool  # the private deque of idle connections
    assert "self._pool.popleft()" in inspect.getsource(ConnectionPool._get_ready_connection)  # how a getconn takes one
    assert "self._pool.append(conn)" in inspect.getsource(ConnectionPool._add_to_pool)  # how one comes back

    assert hand_out_recent_first(pool)

    idle = pool._pool
    assert isinstance(idle, RecentFirst)
    idle.append("first")
    idle.append("last")
    assert idle.popleft() == "last"
    assert hand_out_recent_first(pool) is False  # not twice: it is no plain deque any more


def test_the_pool_connects_with_the_whole_url_and_the_options() -> None:
    pool = closed_pool()
    connect_with(pool, "postgresql://u@a,b/d?options=-c%20search_path%3Dx", "-c statement_timeout=5", prepare_threshold=None)
    assert pool.conninfo == "postgresql://u@a,b/d?options=-c%20search_path%3Dx"
    assert pool.kwargs == {"options": "-c search_path=x -c statement_timeout=5", "prepare_threshold": None}
    assert pool._resolve_conninfo() == pool.conninfo and pool._resolve_kwargs() == pool.kwargs  # what each connect reads

    plain = closed_pool()
    connect_with(plain, None, "-c lock_timeout=1")
    assert plain.kwargs == {"dbname": "d", "host": "h", "port": 1, "user": "u", "password": "p", "options": "-c lock_timeout=1"}
