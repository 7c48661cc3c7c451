"""The PostgreSQL store's own parts (`adapters.backends.postgres`): writes that end, a schema made once.

Tests that could hang without the fix run in a subprocess with a timeout, so a regression
fails with a message instead of stopping the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import orjson
import psycopg
import psycopg.errors
import pytest
from eventsourcing import persistence as es_persistence
from psycopg import sql

from adapters.backends import backend_of
from adapters.backends.postgres import (
    PlainEventRecorder,
    PostgresFactory,
    PostgresHistoryTables,
    PostgresViewStorage,
    create_once,
    schema_lock_name,
)
from adapters.backends.sql.idempotency import SQLIdempotencyKeys
from adapters.bootstrap import open_store, view_storage_of
from adapters.ingest import read_lines
from adapters.service.record_lines import RecordLines
from domain.events import conversation_uuid

ROOT = Path(__file__).resolve().parents[2]

LARGE_SEGMENT = textwrap.dedent("""
    import socket, sys
    import orjson
    from adapters.ingest import read_lines
    from adapters.bootstrap import open_store
    from adapters.service.record_lines import RecordLines

    url, steps = sys.argv[1], int(sys.argv[2])
    store = open_store({"CHATRECORD_DATABASE_URL": url}, POSTGRES_POOL_SIZE="1", POSTGRES_MAX_OVERFLOW="0")
    with store.recorder.datastore.get_connection() as conn:  # the pool's only connection
        sock = socket.socket(fileno=conn.pgconn.socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # a slow network: short sends
        sock.detach()
    c, at = "big", "2026-10-28T09:00:00Z"
    step = {"kind": "tool", "round": 1, "durationMs": 1.5, "toolName": "t", "toolIsError": False}
    lines = [
        {"type": "conversation_started", "conversation": c, "at": at, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": c, "at": at, "message": 1, "text": "x", "page": 1},
        {"type": "segment_returned", "conversation": c, "at": at, "segment": "s1", "run": "r", "trigger": "turn",
         "outcome": "completed", "answer": "ok", "steps": [step] * steps, "pending": []},
    ]
    for line in read_lines([orjson.dumps(line) for line in lines], "big.jsonl"):
        store.handle(RecordLines([line]))
    print(len(store.events(c)), len(store.events(c)[-1].steps))
""")


def schema_url(postgres_url: str, schema: str) -> str:
    return f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"


def test_a_large_segment_is_stored_when_the_network_sends_it_in_pieces(postgres_url: str, postgres_schema: str) -> None:
    # psycopg's pipeline mode (the library's write path) stopped sending after a short send
    # and waited forever for the reply, holding the events table's lock (issue 8, item 7)
    done = subprocess.run(
        [sys.executable, "-c", LARGE_SEGMENT, schema_url(postgres_url, postgres_schema), "5000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "5000"]


def pg_env(postgres_url: str, schema: str, **overrides: str) -> dict[str, str]:
    return {"CHATRECORD_DATABASE_URL": schema_url(postgres_url, schema), **overrides}


def segment_line(conversation: str, segment: str = "s1") -> list[bytes]:
    import orjson

    at = "2026-10-28T09:00:00Z"
    return [
        orjson.dumps(line)
        for line in (
            {"type": "conversation_started", "conversation": conversation, "at": at, "kind": "chat", "owner": 7},
            {"type": "user_message", "conversation": conversation, "at": at, "message": 1, "text": "x", "page": 1},
            {
                "type": "segment_returned",
                "conversation": conversation,
                "at": at,
                "segment": segment,
                "run": "r",
                "trigger": "turn",
                "outcome": "completed",
                "answer": "ok",
                "steps": [],
                "pending": [],
            },
        )
    ]


def ingest(store, lines: list[bytes]) -> None:
    from adapters.ingest import read_lines

    for line in read_lines(lines, "t.jsonl"):
        store.handle(RecordLines([line]))


def test_create_once_runs_its_statements_only_when_the_check_says_they_are_missing(
    postgres_url: str, postgres_schema: str
) -> None:
    table = sql.SQL("{}.{}").format(sql.Identifier(postgres_schema), sql.Identifier("once"))
    exists = sql.SQL("SELECT to_regclass({}) IS NOT NULL").format(f"{postgres_schema}.once")
    statements = [sql.SQL("CREATE TABLE {} (n int)").format(table), sql.SQL("INSERT INTO {} VALUES (1)").format(table)]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert create_once(conn, schema_lock_name(postgres_schema), exists, statements) is True
        assert create_once(conn, schema_lock_name(postgres_schema), exists, statements) is False
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone() == (1,)


def test_stores_opened_at_once_on_a_fresh_schema_all_work(postgres_url: str, postgres_schema: str) -> None:
    # every process used to run the library's CREATE statements: two at once failed with
    # "tuple concurrently updated" or an IntegrityError on pg_type (issue 8, item 2)
    errors: list[BaseException] = []
    go = threading.Barrier(8)

    def open_and_write(n: int) -> None:
        go.wait()
        try:
            store = open_store(pg_env(postgres_url, postgres_schema))
            ingest(store, segment_line(f"conv-{n}"))
            store.close()
        except BaseException as error:  # noqa: BLE001 - any error is the finding
            errors.append(error)

    threads = [threading.Thread(target=open_and_write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    store = open_store(pg_env(postgres_url, postgres_schema))
    assert sorted(store.conversation_ids()) == [f"conv-{n}" for n in range(8)]
    assert store.factory.created == []  # it existed: this open created nothing
    store.close()


def test_opening_an_existing_store_does_not_wait_for_a_writer(postgres_url: str, postgres_schema: str) -> None:
    # the library's CREATE UNIQUE INDEX IF NOT EXISTS queued behind any write in flight, so
    # even `audit` waited for it; now an open only reads the catalog
    first = open_store(pg_env(postgres_url, postgres_schema))
    ingest(first, segment_line("conv-1"))
    first.close()
    with psycopg.connect(postgres_url) as writer:
        writer.execute(
            sql.SQL("LOCK TABLE {}.conversationstore_events IN EXCLUSIVE MODE").format(sql.Identifier(postgres_schema))
        )
        store = open_store(pg_env(postgres_url, postgres_schema), POSTGRES_STATEMENT_TIMEOUT="5")
        assert [type(e).__name__ for e in store.events("conv-1")] == [
            "ConversationStarted",
            "UserMessagePosted",
            "SegmentReturned",
        ]
        store.close()


def test_a_write_that_cannot_get_the_lock_fails_with_one_line(postgres_url: str, postgres_schema: str) -> None:
    from adapters.backends.settings import store_problem

    store = open_store(pg_env(postgres_url, postgres_schema), POSTGRES_LOCK_TIMEOUT="1")
    ingest(store, segment_line("conv-1")[:1])
    with psycopg.connect(postgres_url) as writer:
        writer.execute(
            sql.SQL("LOCK TABLE {}.conversationstore_events IN EXCLUSIVE MODE").format(sql.Identifier(postgres_schema))
        )
        with pytest.raises(Exception) as raised:
            ingest(store, segment_line("conv-1")[1:2])
    problem = store_problem(raised.value, store)
    assert problem is not None and "\n" not in str(problem)
    assert str(problem).startswith(
        f"the store (PostgreSQL postgres@127.0.0.1:5432/test (schema {postgres_schema})) "
        "did not finish in time (canceling statement due to lock timeout"
    )
    assert "held the events table for 1 s" in str(problem) and "nothing of it was stored" in str(problem)
    assert len(store.events("conv-1")) == 1  # the message was not stored; the store is free again
    ingest(store, segment_line("conv-1")[1:2])
    assert len(store.events("conv-1")) == 2
    store.close()


def test_a_read_of_a_table_ddl_holds_fails_once_after_the_lock_timeout(postgres_url: str, postgres_schema: str) -> None:
    store = open_store(pg_env(postgres_url, postgres_schema), POSTGRES_LOCK_TIMEOUT="1")
    ingest(store, segment_line("conv-1")[:1])
    tries = []
    read = store.recorder._read_retried.__wrapped__  # type: ignore[attr-defined]
    store.recorder._read_retried = lambda *a, **k: tries.append(1) or read(store.recorder, *a, **k)  # type: ignore[attr-defined]
    with psycopg.connect(postgres_url) as ddl:
        ddl.execute(
            sql.SQL("LOCK TABLE {}.conversationstore_events IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(postgres_schema))
        )
        with pytest.raises(es_persistence.OperationalError, match="lock timeout"):
            store.recorder.select_events(conversation_uuid("conv-1"))
        with pytest.raises(es_persistence.OperationalError, match="lock timeout"):
            store.recorder.max_notification_id()  # a health check's read
    assert tries == [1, 1]  # the server answered: neither tried again
    assert len(store.events("conv-1")) == 1
    store.close()


def test_a_statement_that_runs_too_long_is_cancelled(postgres_url: str, postgres_schema: str) -> None:
    store = open_store(pg_env(postgres_url, postgres_schema), POSTGRES_STATEMENT_TIMEOUT="1")
    with pytest.raises(Exception) as raised, store.recorder.datastore.transaction(commit=False) as curs:
        curs.execute("SELECT pg_sleep(3)")
    assert isinstance(raised.value.__cause__, psycopg.errors.QueryCanceled)
    assert "statement timeout" in str(raised.value)
    store.close()


def test_a_refused_connection_is_explained_by_the_server(postgres_url: str) -> None:
    from adapters.backends.settings import server_reason, store_env

    env = store_env({"CHATRECORD_DATABASE_URL": postgres_url.replace("://postgres@", "://no_such_role@")})
    assert 'role "no_such_role" does not exist' in server_reason(env)
    assert server_reason(store_env({"CHATRECORD_DATABASE_URL": postgres_url})) is None


def test_the_postgres_factory_hands_out_the_schemas_pieces(postgres_url: str, postgres_schema: str) -> None:
    store = open_store({"CHATRECORD_DATABASE_URL": schema_url(postgres_url, postgres_schema)})
    assert backend_of(store.factory) is type(store.factory) is PostgresFactory
    assert isinstance(store.history, PostgresHistoryTables) and isinstance(view_storage_of(store), PostgresViewStorage)
    keys = PostgresFactory.idempotency_keys(store.recorder)
    assert isinstance(keys, SQLIdempotencyKeys) and f'FROM "{postgres_schema}".chatrecord_idempotency WHERE' in keys.select
    store.close()


def test_the_factorys_tracking_and_process_recorders_get_their_tables(postgres_url: str, postgres_schema: str) -> None:
    """The factory makes no table through the library's own `env_create_table` (it creates the
    store's once, `ensure_schema`); its tracking and process recorders still get theirs, as the
    library's factory makes them, and none where CREATE_TABLE=n."""
    store = open_store({"CHATRECORD_DATABASE_URL": schema_url(postgres_url, postgres_schema)})
    try:
        tracking = store.factory.tracking_recorder()
        tracking.insert_tracking(es_persistence.Tracking("upstream", 3))
        assert tracking.max_tracking_id("upstream") == 3
        process = store.factory.process_recorder()
        assert process.insert_events([], tracking=es_persistence.Tracking("other", 5)) is None
        assert process.max_tracking_id("other") == 5

        store.factory.env.name = "Elsewhere"
        store.factory.env["CREATE_TABLE"] = "n"
        untabled = store.factory.tracking_recorder()
        assert untabled.tracking_table_name == "elsewhere_tracking"  # type: ignore[attr-defined]
        with pytest.raises(es_persistence.ProgrammingError, match="elsewhere_tracking"):
            untabled.max_tracking_id("upstream")
    finally:
        store.close()


class _Flaky:
    """An `_append` that fails with `errors` in turn, then returns [7]."""

    def __init__(self, *errors: Exception) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self, stored_events: object, **kwargs: object) -> list[int]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return [7]


def _lost_connection() -> Exception:
    error = es_persistence.OperationalError("server closed the connection unexpectedly")
    error.__cause__ = psycopg.OperationalError("server closed the connection unexpectedly")  # no sqlstate
    return error


def test_an_append_whose_connection_failed_is_tried_again_by_the_librarys_retry() -> None:
    recorder = PlainEventRecorder.__new__(PlainEventRecorder)
    recorder._append = _Flaky(_lost_connection(), _lost_connection())  # type: ignore[method-assign]

    assert recorder.insert_events([]) == [7]
    assert recorder._append.calls == 3  # type: ignore[attr-defined]


def test_an_append_the_server_answered_with_a_timeout_is_not_tried_again() -> None:
    timeout = es_persistence.OperationalError("canceling statement due to lock timeout")
    timeout.__cause__ = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
    recorder = PlainEventRecorder.__new__(PlainEventRecorder)
    recorder._append = _Flaky(timeout)  # type: ignore[method-assign]

    with pytest.raises(es_persistence.OperationalError, match="lock timeout") as raised:
        recorder.insert_events([])
    assert raised.value is timeout and recorder._append.calls == 1  # type: ignore[attr-defined]


def test_an_append_in_one_call_runs_prepared_and_leaves_the_pool_preparing_nothing(
    postgres_url: str, postgres_schema: str
) -> None:
    """The append's one statement (the append function's call) is parsed and planned once per
    connection: after three appends on the pool's only connection the server holds it as a
    prepared statement, once, and the connection is left preparing nothing by itself."""
    store = open_store(
        {"CHATRECORD_DATABASE_URL": schema_url(postgres_url, postgres_schema)}, POSTGRES_POOL_SIZE="1", POSTGRES_MAX_OVERFLOW="0"
    )
    c, at = "prepared", "2026-10-28T09:00:00Z"
    lines = [{"type": "conversation_started", "conversation": c, "at": at, "kind": "chat", "owner": 7}] + [
        {"type": "user_message", "conversation": c, "at": at, "message": n, "text": "x", "page": 1} for n in (1, 2, 3)
    ]
    for line in read_lines([orjson.dumps(line) for line in lines], "prepared.jsonl"):
        store.handle(RecordLines([line]))
    with store.recorder.datastore.get_connection() as conn:
        assert conn.prepare_threshold is None
        calls = conn.execute(
            "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s", ("%chatrecord_append_%",)
        ).fetchall()
    assert len(calls) == 1, calls
    assert len(store.events(c)) == 4


def test_the_upkeep_warning_says_whether_the_servers_autovacuum_is_off(postgres_url: str, postgres_schema: str) -> None:
    store = open_store(pg_env(postgres_url, postgres_schema))
    try:
        warning = store.factory.upkeep_warning()
    finally:
        store.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        setting = conn.execute("SHOW autovacuum").fetchone()
    assert setting is not None
    if setting[0] == "on":
        assert warning is None
    else:
        assert warning is not None and warning.startswith("the PostgreSQL server's autovacuum is off")
    assert open_store(memory=True).factory.upkeep_warning() is None  # no server: nothing to warn of
