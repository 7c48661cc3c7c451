"""Choosing the backend from the environment."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg.errors
import pytest
from eventsourcing.persistence import (
    DatabaseError,
    IntegrityError,
    OperationalError,
    ProgrammingError,
)

from adapters.backends import backend_of
from adapters.backends.memory import (
    MemoryFactory,
    MemoryHistoryTables,
    MemoryIdempotencyKeys,
    MemoryViewStorage,
)
from adapters.backends.settings import BadDatabaseURL, BadSetting, describe_backend, postgres_env, store_env, store_problem
from adapters.backends.sql.history import SQLHistoryTables
from adapters.backends.sql.idempotency import SQLIdempotencyKeys
from adapters.backends.sqlite import (
    SQLiteFactory,
    SQLiteViewStorage,
    WaitingSQLiteDatastore,
)
from adapters.bootstrap import build_store, open_store, view_storage_of


def test_the_default_is_a_sqlite_file_in_the_working_directory() -> None:
    assert store_env({}) == {
        "PERSISTENCE_MODULE": "adapters.backends.sqlite:SQLiteFactory",
        "SQLITE_DBNAME": "./chatrecord.sqlite",
        "SQLITE_LOCK_TIMEOUT": "10",
    }
    assert describe_backend(store_env({})) == "SQLite file ./chatrecord.sqlite"
    assert describe_backend({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": "x"}) == "SQLite file x"


def test_a_sqlite_writer_takes_the_write_lock_first_and_waits_ten_seconds_for_it(tmp_path) -> None:
    store = open_store({"CHATRECORD_DB": str(tmp_path / "c.sqlite")})
    datastore = store.recorder.datastore

    assert isinstance(datastore, WaitingSQLiteDatastore)
    assert datastore.pool.lock_timeout == 10
    with datastore.transaction(commit=True) as curs:
        curs.execute("SELECT 1")
        other = sqlite3.connect(tmp_path / "c.sqlite", timeout=0)
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            other.execute("BEGIN IMMEDIATE")
        other.close()
    store.close()


def test_chatrecord_db_names_the_sqlite_file() -> None:
    assert store_env({"CHATRECORD_DB": "/data/x.sqlite"})["SQLITE_DBNAME"] == "/data/x.sqlite"


def test_a_database_url_selects_postgresql() -> None:
    env = store_env({"CHATRECORD_DATABASE_URL": "postgresql://app:s%40cret@db.example:6543/chat", "CHATRECORD_DB": "x"})
    assert env == {
        "PERSISTENCE_MODULE": "adapters.backends.postgres:PostgresFactory",
        "POSTGRES_DBNAME": "chat",
        "POSTGRES_HOST": "db.example",
        "POSTGRES_PORT": "6543",
        "POSTGRES_USER": "app",
        "POSTGRES_PASSWORD": "s@cret",
        "POSTGRES_CONNINFO": "user=app password=s@cret dbname=chat host=db.example port=6543",
        "POSTGRES_CONNECT_TIMEOUT": "5",
        "POSTGRES_LOCK_TIMEOUT": "10",
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


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (" ", "CHATRECORD_DATABASE_URL is blank; give postgresql://user[:pw]@host[:port]/db, or unset it to use the SQLite file"),
        ("localhost/db", "CHATRECORD_DATABASE_URL must start with postgresql://, not 'localhost/db'"),
        ("mysql://u@h/db", "CHATRECORD_DATABASE_URL must start with postgresql://, not mysql://"),
    ],
    ids=["blank", "no-scheme", "other-scheme"],
)
def test_a_url_without_the_postgresql_scheme_says_what_it_has(url: str, said: str) -> None:
    with pytest.raises(BadDatabaseURL) as refused:
        store_env({"CHATRECORD_DATABASE_URL": url})

    assert str(refused.value) == said


@pytest.mark.parametrize("schema", ["a;drop", "1abc", "a b", "x" * 64, "", 'a"b'])
def test_a_schema_that_is_not_one_sql_name_is_refused(schema: str) -> None:
    with pytest.raises(BadDatabaseURL) as refused:
        postgres_env(f"postgresql://u@h/db?schema={schema}")

    assert str(refused.value) == (
        f"CHATRECORD_DATABASE_URL: schema {schema!r} is not a schema name; use 1–63 of A-Za-z0-9_, not starting with a digit"
    )


def test_a_schema_given_twice_is_refused_not_taken_as_either() -> None:
    with pytest.raises(BadDatabaseURL) as refused:
        postgres_env("postgresql://u@h/db?schema=mine&schema=public")

    assert str(refused.value) == "CHATRECORD_DATABASE_URL names schema more than once; give each once"


@pytest.mark.parametrize("schema", ["chat", "_x1", "A" * 63])
def test_a_schema_that_is_one_sql_name_is_used(schema: str) -> None:
    assert postgres_env(f"postgresql://u@h/db?schema={schema}")["POSTGRES_SCHEMA"] == schema


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1.5", " "])
def test_a_snapshot_interval_that_is_not_a_whole_number_of_at_least_one_is_refused(value: str) -> None:
    with pytest.raises(BadSetting) as refused:
        store_env({"CHATRECORD_SNAPSHOT_INTERVAL": value})

    assert str(refused.value) == f"CHATRECORD_SNAPSHOT_INTERVAL must be a whole number >= 1, not {value!r}"


def test_an_empty_snapshot_interval_means_the_default() -> None:
    assert "SNAPSHOT_INTERVAL" not in store_env({"CHATRECORD_SNAPSHOT_INTERVAL": ""})


@pytest.mark.parametrize("value, interval", [("1", "1"), ("250", "250"), (" 7 ", "7")])
def test_a_snapshot_interval_of_a_whole_number_is_passed_on(value: str, interval: str) -> None:
    assert store_env({"CHATRECORD_SNAPSHOT_INTERVAL": value})["SNAPSHOT_INTERVAL"] == interval


def _wrapped(library_error: type[Exception], driver_error: Exception) -> Exception:
    try:
        raise library_error(str(driver_error)) from driver_error
    except Exception as error:  # noqa: BLE001
        return error


def _sqlite_error(code: int, name: str, message: str) -> sqlite3.Error:
    error = sqlite3.DatabaseError(message)
    error.sqlite_errorcode, error.sqlite_errorname = code, name
    return error


def test_a_file_that_is_not_sqlite_is_named_with_the_setting_to_change() -> None:
    env = store_env({"CHATRECORD_DB": "notes.txt"})

    problem = store_problem(_sqlite_error(26, "SQLITE_NOTADB", "file is not a database"), env)

    assert str(problem) == (
        "CHATRECORD_DB: notes.txt is not a SQLite database (file is not a database); point CHATRECORD_DB "
        "at a chatrecord store, or at a file that does not exist yet to start a new one"
    )


def test_a_damaged_store_file_is_said_damaged_with_a_backup_to_restore_not_a_new_store(tmp_path: Path) -> None:
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(b"SQLite format 3\x00" + bytes(40))  # a store's first bytes, the rest cut off
    expected = (
        "CHATRECORD_DB: the store file {} is damaged ({}); restore it from a backup "
        "(chatrecord does not repair a damaged store file)"
    )

    corrupt = store_problem(
        _sqlite_error(11, "SQLITE_CORRUPT", "database disk image is malformed"), store_env({"CHATRECORD_DB": "c.sqlite"})
    )
    not_a_database = store_problem(
        _sqlite_error(26, "SQLITE_NOTADB", "file is not a database"), store_env({"CHATRECORD_DB": str(cut)})
    )

    assert str(corrupt) == expected.format("c.sqlite", "database disk image is malformed")
    assert str(not_a_database) == expected.format(cut, "file is not a database")


def test_a_file_locked_longer_than_the_timeout_says_how_long_it_waited() -> None:
    env = store_env({"CHATRECORD_DB": "c.sqlite"})

    problem = store_problem(_wrapped(OperationalError, _sqlite_error(5, "SQLITE_BUSY", "database is locked")), env)

    assert str(problem) == (
        "the SQLite file c.sqlite stayed locked by another process for 10 s (database is locked); "
        "try again when its write has ended"
    )


def test_a_schema_that_does_not_exist_says_how_to_create_it() -> None:
    env = store_env({"CHATRECORD_DATABASE_URL": "postgresql://u@h/chat?schema=missing_schema"})
    driver = psycopg.errors.InvalidSchemaName('schema "missing_schema" does not exist')

    problem = store_problem(_wrapped(ProgrammingError, driver), env)

    assert str(problem) == (
        "CHATRECORD_DATABASE_URL: schema 'missing_schema' does not exist in database 'chat'; "
        "create it (CREATE SCHEMA missing_schema;) or leave out ?schema= to use public"
    )


def test_a_mixed_case_schema_that_does_not_exist_is_created_quoted() -> None:
    env = store_env({"CHATRECORD_DATABASE_URL": "postgresql://u@h/chat?schema=ChatRecord"})
    driver = psycopg.errors.InvalidSchemaName('schema "ChatRecord" does not exist')

    problem = store_problem(_wrapped(ProgrammingError, driver), env)

    assert str(problem) == (  # unquoted, CREATE SCHEMA ChatRecord would make "chatrecord"
        "CHATRECORD_DATABASE_URL: schema 'ChatRecord' does not exist in database 'chat'; "
        'create it (CREATE SCHEMA "ChatRecord";) or leave out ?schema= to use public'
    )


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(OperationalError, _sqlite_error(1, "SQLITE_ERROR", "no such table: stored_events")),
        _wrapped(ProgrammingError, psycopg.errors.UndefinedTable('relation "x" does not exist')),
        _wrapped(IntegrityError, _sqlite_error(19, "SQLITE_CONSTRAINT", "UNIQUE constraint failed")),
        DatabaseError("no driver error behind it"),
    ],
    ids=["sqlite-sql-error", "postgres-undefined-table", "integrity", "library-only"],
)
def test_a_database_error_no_setting_explains_is_left_a_bug(error: Exception) -> None:
    assert store_problem(error, store_env({})) is None


def test_memory_wins_over_everything() -> None:
    env = store_env({"CHATRECORD_DATABASE_URL": "postgresql://u@h/db"}, memory=True)
    assert env == {"PERSISTENCE_MODULE": "adapters.backends.memory:MemoryFactory"}


def test_an_open_store_describes_its_backend(tmp_path) -> None:
    assert describe_backend(open_store(memory=True)).startswith("in memory")
    path = tmp_path / "c.sqlite"
    store = open_store({"CHATRECORD_DB": str(path)})
    assert describe_backend(store) == f"SQLite file {path}"
    assert path.exists()
    store.close()


def test_the_factory_persistence_module_selects_hands_out_its_backends_pieces(tmp_path) -> None:
    memory = open_store(memory=True)
    assert backend_of(memory.factory) is type(memory.factory) is MemoryFactory
    assert isinstance(memory.history, MemoryHistoryTables)
    views = view_storage_of(memory)
    assert (
        isinstance(views, MemoryViewStorage)
        and views.view_tables is view_storage_of(memory).view_tables is memory.recorder.view_tables
    )
    assert isinstance(MemoryFactory.idempotency_keys(memory.recorder), MemoryIdempotencyKeys)
    sqlite = open_store({"CHATRECORD_DB": str(tmp_path / "c.sqlite")})
    assert backend_of(sqlite.factory) is type(sqlite.factory) is SQLiteFactory
    assert isinstance(sqlite.history, SQLHistoryTables) and isinstance(view_storage_of(sqlite), SQLiteViewStorage)
    assert isinstance(SQLiteFactory.idempotency_keys(sqlite.recorder), SQLIdempotencyKeys)
    sqlite.close()


def test_a_library_factory_gets_the_pieces_of_the_store_factory_of_its_backend(tmp_path) -> None:
    plain = build_store({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "p")})
    assert backend_of(plain.factory) is SQLiteFactory
    assert isinstance(plain.history, SQLHistoryTables) and isinstance(view_storage_of(plain), SQLiteViewStorage)
    plain.close()
    assert backend_of(build_store({"PERSISTENCE_MODULE": "eventsourcing.popo"}).factory) is MemoryFactory
    with pytest.raises(LookupError, match="no backend"):
        backend_of(object())  # type: ignore[arg-type]


def test_a_sqlite_database_of_something_else_is_refused_and_left_as_it_was(tmp_path) -> None:
    from adapters.backends.sqlite import ForeignDatabase

    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")

    with pytest.raises(ForeignDatabase) as refused:
        open_store({"CHATRECORD_DB": str(path)})

    assert str(refused.value) == (
        f"CHATRECORD_DB: {path} is a SQLite database of something else (it holds users, and no chatrecord "
        "store); point CHATRECORD_DB at a chatrecord store, or at a file that does not exist yet"
    )
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["users"]
