"""A store remembers its master key (`DataKeys.check_master`), once per backend: a process with
another master key or with none is refused at open with one line and stores nothing; a store
without one is protected by the first process that has one; a store of the previous version
(wrapped data keys, no check row) gets its check row from the right key; processes opening a
fresh store at once with one key all work."""

from __future__ import annotations

import base64
import sqlite3
import threading
from typing import Any

import psycopg
import pytest
from psycopg import sql

from adapters.backends.settings import memory_env, postgres_env
from adapters.bootstrap import build_store
from adapters.service import master_key as keys_service
from adapters.service.master_key import NothingToRotate
from adapters.store import keys as keys_module
from adapters.store.application import ConversationStore
from adapters.store.crypto import MASTER_MISSING, MASTER_WRONG, BadMasterKey, seal_check
from adapters.store.crypto import wrap as crypto_wrap
from adapters.store.keys import KEYS_TABLE, MASTER_TABLE, MASTER_UNBOUND, KeyState
from domain import conversation as c
from domain.events import UserMessagePosted, conversation_uuid
from tests.integration.backends import PostgresStores, SQLiteStores
from tests.integration.test_store import Command

A = base64.b64encode(bytes(range(32))).decode()
B = base64.b64encode(bytes(range(100, 132))).decode()
NONE = ""  # overrides a CHATRECORD_MASTER_KEY of the test's own environment


def write(store: ConversationStore, conversation: str, text: str = "Titel prüfen") -> None:
    store.handle(Command(conversation, c.start_conversation, conversation, "chat", 7))
    store.handle(Command(conversation, c.post_user_message, 1, text, 42, None))


def erase_key(store: ConversationStore, conversation: str) -> None:
    store.mapper.keys.erase(conversation_uuid(conversation))  # type: ignore[attr-defined]


def texts(store: ConversationStore, conversation: str) -> list[str]:
    return [e.text for e in store.events(conversation) if isinstance(e, UserMessagePosted)]


class MasterKeyContract:
    """Tests; backends say how to open a store and how to run SQL on its database."""

    def open_store(self, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        """Runs `statement` on the store's database (its tables unqualified) and returns its rows."""
        raise NotImplementedError

    def opened(self, key: str) -> ConversationStore:
        return self.open_store(CHATRECORD_MASTER_KEY=key)

    def counts(self, key: str = A) -> tuple[int, int, int]:
        """Returns the stored events, the key rows and the check rows (the store opened with `key`)."""
        events = len(
            self.open_store(CHATRECORD_MASTER_KEY=key, MASTER_KEY_UNBOUND="allow").recorder.select_notifications(None, 100_000)
        )
        [(keys,)] = self.sql(f"SELECT count(*) FROM {KEYS_TABLE}")
        [(checks,)] = self.sql(f"SELECT count(*) FROM {MASTER_TABLE}")
        return events, keys, checks

    def test_another_master_key_is_refused_at_open_and_nothing_is_stored(self) -> None:
        write(self.opened(A), "conv-a")
        before = self.counts()

        with pytest.raises(BadMasterKey) as refused:
            write(self.opened(B), "conv-b")

        assert str(refused.value) == MASTER_WRONG
        assert str(refused.value).startswith("CHATRECORD_MASTER_KEY is not the master key of this store")
        assert self.counts() == before == (2, 1, 1)
        assert texts(self.opened(A), "conv-a") == ["Titel prüfen"]

    def test_a_process_without_the_master_key_is_refused_at_open(self) -> None:
        write(self.opened(A), "conv-a")
        before = self.counts()

        with pytest.raises(BadMasterKey) as refused:
            write(self.opened(NONE), "conv-plain")

        assert str(refused.value) == MASTER_MISSING
        assert "set CHATRECORD_MASTER_KEY to it" in str(refused.value)
        assert self.counts() == before

    def test_a_master_key_on_a_store_without_one_is_refused_at_open_and_changes_nothing(self) -> None:
        # issue 20, item 6: opening (even to read) used to bind the store to the key for good
        write(self.opened(NONE), "conv-plain")
        before = (self.counts(), self.sql(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE}"))

        with pytest.raises(BadMasterKey) as refused:
            self.opened(A)

        assert str(refused.value) == MASTER_UNBOUND
        assert "run `chatrecord keys wrap`" in str(refused.value)
        assert (self.counts(), self.sql(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE}")) == before
        assert texts(self.opened(NONE), "conv-plain") == ["Titel prüfen"]  # works without a key, as before

    def test_wrap_binds_a_store_to_the_master_key_and_a_process_without_it_adds_no_key(self) -> None:
        write(self.opened(NONE), "conv-plain")
        early = self.opened(NONE)  # opened before the store is protected, still running after
        assert self.sql(f"SELECT count(*) FROM {MASTER_TABLE}") == [(0,)]

        change = keys_service.wrap(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"))

        assert (change.changed, change.rewrapped, change.state) == (True, 1, KeyState(True, 1, 0, 0))
        protected = self.opened(A)
        write(protected, "conv-a")
        assert texts(protected, "conv-plain") == ["Titel prüfen"]  # the same data key, now wrapped
        assert [bytes(w)[:1] for (w,) in self.sql(f"SELECT wrapped_key FROM {KEYS_TABLE}")] == [b"\x01", b"\x01"]
        with pytest.raises(BadMasterKey, match="set CHATRECORD_MASTER_KEY to it"):
            self.opened(NONE)
        early.handle(Command("conv-late", c.start_conversation, "conv-late", "chat", 7))  # no text: no key
        before = self.counts()
        with pytest.raises(BadMasterKey, match="set CHATRECORD_MASTER_KEY to it"):
            early.handle(Command("conv-late", c.post_user_message, 1, "geheim", 42, None))
        assert self.counts() == before  # neither the event nor an unwrapped key
        assert texts(self.opened(A), "conv-late") == []
        again = keys_service.wrap(self.opened(A))
        assert (again.changed, again.rewrapped) == (False, 0)

    def test_rotate_rewraps_every_key_and_the_old_key_opens_nothing(self) -> None:
        write(self.opened(A), "conv-a")
        write(self.opened(A), "conv-b", "Zweiter Text")
        erase_key(self.opened(A), "conv-b")
        early = self.opened(A)  # opened before the rotation, still running after
        early.handle(Command("conv-late", c.start_conversation, "conv-late", "chat", 7))

        change = keys_service.rotate(self.opened(A), B)

        assert (change.rewrapped, change.state) == (1, KeyState(True, 1, 0, 1))
        with pytest.raises(BadMasterKey, match="is not the master key of this store"):
            self.opened(A)
        before = self.counts(B)
        with pytest.raises(BadMasterKey, match="is not the master key of this store"):
            early.handle(Command("conv-late", c.post_user_message, 1, "geheim", 42, None))  # no key by the old one
        assert self.counts(B) == before
        assert texts(self.opened(B), "conv-a") == ["Titel prüfen"]
        write(self.opened(B), "conv-c", "Dritter Text")
        assert texts(self.opened(B), "conv-c") == ["Dritter Text"]
        with pytest.raises(NothingToRotate, match="is the store's master key already"):
            keys_service.rotate(self.opened(B), B)

    def test_unwrap_removes_the_master_key_and_every_text_reads_without_it(self) -> None:
        write(self.opened(A), "conv-a")

        change = keys_service.unwrap(self.opened(A))

        assert (change.rewrapped, change.state) == (1, KeyState(False, 0, 1, 0))
        assert self.sql(f"SELECT count(*) FROM {MASTER_TABLE}") == [(0,)]
        assert texts(self.opened(NONE), "conv-a") == ["Titel prüfen"]
        with pytest.raises(BadMasterKey, match="run `chatrecord keys wrap`"):
            self.opened(A)
        with pytest.raises(NothingToRotate, match="has no master key to rotate"):
            keys_service.rotate(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"), B)

    @pytest.mark.parametrize("action", ["wrap", "rotate", "unwrap"])
    def test_a_key_change_that_fails_half_way_changes_nothing(self, action: str, monkeypatch: pytest.MonkeyPatch) -> None:
        key = NONE if action == "wrap" else A
        for n in range(3):
            write(self.opened(key), f"conv-{n}", f"Text {n}")
        before = (
            self.sql(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE} ORDER BY conversation"),
            self.sql(f"SELECT sealed FROM {MASTER_TABLE}"),
        )
        store = self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow")
        calls = []

        def wrap_then_fail(*args: Any) -> bytes:  # a crash after two keys were rewritten
            calls.append(args)
            if len(calls) == 3:
                raise RuntimeError("the process died here")
            return crypto_wrap(*args)

        monkeypatch.setattr(keys_module, "wrap", wrap_then_fail)
        with pytest.raises(RuntimeError, match="the process died here"):
            {"wrap": keys_service.wrap, "unwrap": keys_service.unwrap, "rotate": lambda s: keys_service.rotate(s, B)}[action](
                store
            )
        monkeypatch.undo()

        assert len(calls) == 3
        assert (
            self.sql(f"SELECT conversation, wrapped_key FROM {KEYS_TABLE} ORDER BY conversation"),
            self.sql(f"SELECT sealed FROM {MASTER_TABLE}"),
        ) == before
        reader = self.opened(key)
        assert [texts(reader, f"conv-{n}") for n in range(3)] == [[f"Text {n}"] for n in range(3)]

    def test_a_store_of_the_previous_version_gets_its_check_row_from_the_right_key(self) -> None:
        write(self.opened(A), "conv-a")
        self.sql(f"DELETE FROM {MASTER_TABLE}")  # as the previous version left it: wrapped keys only

        with pytest.raises(BadMasterKey, match="is not the master key of this store"):
            self.opened(B)
        with pytest.raises(BadMasterKey, match="set CHATRECORD_MASTER_KEY to it"):
            self.opened(NONE)
        assert self.sql(f"SELECT count(*) FROM {MASTER_TABLE}") == [(0,)]  # a refusal writes nothing

        store = self.opened(A)
        assert texts(store, "conv-a") == ["Titel prüfen"]
        assert self.sql(f"SELECT count(*) FROM {MASTER_TABLE}") == [(0,)]  # nor does an open that reads
        write(store, "conv-2", "Zweiter Text")  # the first new key writes it
        assert self.sql(f"SELECT count(*) FROM {MASTER_TABLE}") == [(1,)]
        assert (texts(store, "conv-a"), texts(store, "conv-2")) == (["Titel prüfen"], ["Zweiter Text"])
        with pytest.raises(BadMasterKey, match="is not the master key of this store"):
            self.opened(B)

    def test_stores_opened_at_once_with_one_key_on_a_fresh_database_all_work(self) -> None:
        errors: list[BaseException] = []
        go = threading.Barrier(6)

        def open_and_write(n: int) -> None:
            try:
                go.wait()
                write(self.opened(A), f"conv-{n}", f"Text {n}")
            except BaseException as error:  # noqa: BLE001 - any error is the finding
                errors.append(error)

        threads = [threading.Thread(target=open_and_write, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert errors == []
        store = self.opened(A)
        assert [texts(store, f"conv-{n}") for n in range(6)] == [[f"Text {n}"] for n in range(6)]
        assert self.counts() == (12, 6, 1)
        with pytest.raises(BadMasterKey, match="is not the master key of this store"):
            self.opened(B)

    def key_literal(self, conversation: str) -> str:
        return f"'{conversation_uuid(conversation)}'"


class TestSQLiteMasterKey(SQLiteStores, MasterKeyContract):
    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.path, timeout=10) as conn:
            return conn.execute(statement).fetchall()


class TestPostgresMasterKey(PostgresStores, MasterKeyContract):
    def open_store(self, **overrides: str) -> ConversationStore:  # type: ignore[override]
        return super().open_store(POSTGRES_POOL_SIZE="2", **overrides)

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, options=f"-c search_path={self.schema}") as conn:
            cursor = conn.execute(statement)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []


def test_in_memory_the_rule_holds_within_the_process() -> None:
    store = build_store({**memory_env(), "CHATRECORD_MASTER_KEY": A})
    keys = store.mapper.keys  # type: ignore[attr-defined]
    assert keys.rows.sealed is None and keys.check is None  # opening writes nothing
    write(store, "conv-a")
    assert keys.rows.sealed is not None and keys.check == keys.rows.sealed  # the first data key binds a fresh store
    keys.rows.sealed = seal_check(bytes(range(100, 132)))  # as if another key had protected it meanwhile
    with pytest.raises(BadMasterKey, match="is not the master key of this store"):
        write(store, "conv-b")
    assert len(keys.rows.kept) == 1
    plain = build_store({**memory_env(), "CHATRECORD_MASTER_KEY": NONE})
    write(plain, "conv-a")
    assert plain.mapper.keys.rows.sealed is None  # type: ignore[attr-defined]


READ_ONLY = "options=-c%20default_transaction_read_only%3Don"
"""The URL parameter that makes every transaction of a connection read-only, as on a hot standby
(the server refuses each write with ReadOnlySqlTransaction, as for `ALTER DATABASE … SET
default_transaction_read_only = on`, without a database of the test's own, whose DROP DATABASE
waits for a checkpoint of the whole server)."""


def test_a_read_only_database_opens_for_reading_with_the_right_key_and_writes_nothing(
    postgres_url: str, postgres_schema: str
) -> None:
    joiner = "&" if "?" in postgres_url else "?"

    def opened(key: str, read_only: bool = True) -> ConversationStore:
        url = f"{postgres_url}{joiner}{READ_ONLY}" if read_only else postgres_url
        return build_store(
            {**postgres_env(url), "POSTGRES_SCHEMA": postgres_schema, "POSTGRES_POOL_SIZE": "1", "CHATRECORD_MASTER_KEY": key}
        )

    store = opened(A, read_only=False)
    write(store, "conv-a")
    write(store, "conv-b")
    store.close()
    master = sql.Identifier(postgres_schema, MASTER_TABLE)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DELETE FROM {}").format(master))  # a store of the previous version

    reader = opened(A)  # verifies A on a wrapped key; cannot write the check row, and need not
    with reader.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
        assert conn.execute("SHOW transaction_read_only").fetchone() == {"transaction_read_only": "on"}
    assert texts(reader, "conv-b") == ["Titel prüfen"]
    reader.close()
    with pytest.raises(BadMasterKey, match="is not the master key of this store"):
        opened(B)
    with pytest.raises(BadMasterKey, match="set CHATRECORD_MASTER_KEY to it"):
        opened(NONE)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(master)).fetchone() == (0,)


def test_keeping_a_verdict_on_a_read_only_database_runs_no_ddl_where_the_tables_exist(
    postgres_url: str, postgres_schema: str
) -> None:
    # a verify on a read-only database (a standby, a read-only role) cannot keep its verdict; the
    # server must refuse the verdict's row, not a CREATE TABLE of tables that are there
    from datetime import UTC, datetime

    from eventsourcing.persistence import InternalError

    from adapters.store.chain_checks import VerifiedPosition
    from domain.events import conversation_uuid

    joiner = "&" if "?" in postgres_url else "?"
    settings = {"POSTGRES_SCHEMA": postgres_schema, "POSTGRES_POOL_SIZE": "1"}
    store = build_store({**postgres_env(postgres_url), **settings})
    write(store, "conv-a")
    store.close()
    reader = build_store({**postgres_env(f"{postgres_url}{joiner}{READ_ONLY}"), **settings})
    position = VerifiedPosition(conversation_uuid("conv-a"), 1, b"\0" * 32, datetime.now(UTC), "test")
    with pytest.raises(InternalError, match="cannot execute INSERT in a read-only transaction"):
        reader.recorder.keep_verdicts([position], ())  # type: ignore[attr-defined]
    reader.close()
