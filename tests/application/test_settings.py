"""Choosing the backend from the environment."""

from __future__ import annotations

import pytest

from adapters.settings import (
    BadDatabaseURL,
    describe_backend,
    open_store,
    postgres_env,
    store_env,
)


def test_the_default_is_a_sqlite_file_in_the_working_directory() -> None:
    assert store_env({}) == {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": "./chatrecord.sqlite"}
    assert describe_backend(store_env({})) == "SQLite file ./chatrecord.sqlite"


def test_chatrecord_db_names_the_sqlite_file() -> None:
    assert store_env({"CHATRECORD_DB": "/data/x.sqlite"})["SQLITE_DBNAME"] == "/data/x.sqlite"


def test_a_database_url_selects_postgresql() -> None:
    env = store_env({"CHATRECORD_DATABASE_URL": "postgresql://app:s%40cret@db.example:6543/chat", "CHATRECORD_DB": "x"})
    assert env == {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": "chat",
        "POSTGRES_HOST": "db.example",
        "POSTGRES_PORT": "6543",
        "POSTGRES_USER": "app",
        "POSTGRES_PASSWORD": "s@cret",
        "POSTGRES_CONNECT_TIMEOUT": "5",
    }
    assert describe_backend(env) == "PostgreSQL app@db.example:6543/chat (schema public)"


def test_a_url_without_password_or_port_uses_trust_auth_on_5432() -> None:
    env = postgres_env("postgres://postgres@127.0.0.1/test?schema=chat")
    assert (env["POSTGRES_PASSWORD"], env["POSTGRES_PORT"], env["POSTGRES_SCHEMA"]) == ("", "5432", "chat")


@pytest.mark.parametrize(
    "url",
    ["mysql://u@h/db", "postgresql://h/db", "postgresql://u@h/", "postgresql://u@h:port/db"],
    ids=["scheme", "no-user", "no-database", "bad-port"],
)
def test_a_url_the_store_cannot_use_is_refused(url: str) -> None:
    with pytest.raises(BadDatabaseURL, match="CHATRECORD_DATABASE_URL"):
        postgres_env(url)


def test_memory_wins_over_everything() -> None:
    env = store_env({"CHATRECORD_DATABASE_URL": "postgresql://u@h/db"}, memory=True)
    assert env == {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def test_an_open_store_describes_its_backend(tmp_path) -> None:
    assert describe_backend(open_store(memory=True)).startswith("in memory")
    path = tmp_path / "c.sqlite"
    store = open_store({"CHATRECORD_DB": str(path)})
    assert describe_backend(store) == f"SQLite file {path}"
    assert path.exists()
    store.close()
