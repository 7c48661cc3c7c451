"""Shared fixtures: the test PostgreSQL server and a fresh schema per test.

The server is `CHATRECORD_TEST_DATABASE_URL` (default postgresql://postgres@127.0.0.1:5432/test).
If it does not answer, PostgreSQL tests fail when CI is set (`.ci/run` guarantees a server)
and are skipped, with the reason, on a developer's machine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

DEFAULT_TEST_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """Returns the URL of the test PostgreSQL server, after checking that it answers."""
    import psycopg

    url = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or DEFAULT_TEST_DATABASE_URL
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as e:
        message = f"PostgreSQL at {url} does not answer ({e}); set CHATRECORD_TEST_DATABASE_URL or run .ci/run"
        if _in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return url


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[str]:
    """Yields the name of a new, empty schema on the test server; drops it afterwards."""
    import psycopg
    from psycopg import sql

    name = f"chatrecord_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keeps the tests of a module on one pytest-xdist worker when they share a module-scoped
    fixture (a `chatrecord serve`, a throwaway server, a browser's store), so that it starts
    once, not once on each worker (`--dist loadgroup` in pyproject.toml; tryfirst: before
    xdist reads the marks). Every other test goes to whichever worker is free."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))
