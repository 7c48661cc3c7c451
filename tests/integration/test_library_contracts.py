"""The library's own persistence contracts, run against chatrecord's recorders and factories.

The cases are eventsourcing's (the pinned 9.5.6, `eventsourcing.tests.persistence`):
`AggregateRecorderTestCase`, `ApplicationRecorderTestCase` (its concurrency tests and its
contiguous notification ids included), `NonInterleavingNotificationIDsBaseCase`,
`TrackingRecorderTestCase`, `ProcessRecorderTestCase` and `InfrastructureFactoryTestCase`. The 9.5.6 wheel ships no
PostgreSQL or SQLite subclasses of them (only `persistence`, `postgres_utils`, `domain`,
`application` and `projection` under `eventsourcing.tests`), so each backend's subclass is here.

Every recorder is the one a store builds: a `ConversationStore` opened by
`adapters.bootstrap.open_store` on a fresh PostgreSQL schema (dropped after the test), a
SQLite file in the test's folder, or memory; the application recorder is `store.recorder`, the
aggregate recorder the store's snapshot recorder, the tracking and process recorders its
factory's. A
factory case starts from the environment such a store reads (`store_environment`).

- PostgreSQL chained: `ChainedPostgresRecorder`, what every store on PostgreSQL writes with.
- PostgreSQL plain: `PlainEventRecorder`, `EventRecorder` without the chain, which
  sends every append its own ways (`write_first`, `write_events`, the append function) and
  reads through the library's reads' `__wrapped__`; the store's factory makes it when the
  library's APPLICATION_RECORDER_TOPIC names it.
- SQLite: `ChainedSQLiteRecorder` on `WaitingSQLiteDatastore`; memory: `ChainedPOPORecorder`.

Each PostgreSQL application recorder's cases run three times, once per way it appends: in one
call of the append function (what a store does by default), as the library's pipelined
statements (`SyncedAppend`) and in one ordinary transaction (`PlainAppend`).

Adapted, and why (each at its class):

- None of the library's application recorder cases is adapted: a chained recorder takes a
  sequence from version 0 (the library's concurrency and interleaving cases write 0…n-1) as
  one from 1, its first event linked to GENESIS (`ChainStarts` shows it, and that the chain
  still finds a deleted first event).
- chatrecord's mapper maps its own (pydantic) events only, so the factory case's wrong
  cipher key test maps a `ConversationStarted` instead of the library's `DomainEvent`.
- Subscriptions are optional in the library (`optional_test_insert_subscribe`, which its own
  SQLite recorder cannot run either): run on memory and on PostgreSQL, on each of its append
  paths (`Subscribed`: every append sends the library's NOTIFY); the SQLite recorder refuses
  `subscribe` at once (`Unsubscribed`), as the library's does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.cipher import AESCipher
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    ProcessRecorder,
    StoredEvent,
    TrackingRecorder,
)
from eventsourcing.popo import POPOAggregateRecorder, POPOProcessRecorder, POPOTrackingRecorder
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresProcessRecorder, PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteProcessRecorder, SQLiteTrackingRecorder
from eventsourcing.tests import persistence as contract
from eventsourcing.utils import Environment, get_topic
from psycopg.sql import SQL, Identifier

from adapters.api import Chatrecord, demo_lines
from adapters.backends.memory import ChainedPOPORecorder, MemoryFactory
from adapters.backends.postgres import ChainedPostgresRecorder, PlainEventRecorder, PostgresFactory
from adapters.backends.postgres import recorder as postgres_recorder
from adapters.backends.settings import store_env
from adapters.backends.sqlite import ChainedSQLiteRecorder, SQLiteFactory
from adapters.bootstrap import open_store
from adapters.store.application import ConversationStore
from adapters.store.chain import GENESIS, VersionRefused, link
from adapters.store.serialization import PydanticMapper
from adapters.store.verify import verdicts
from domain.events import ConversationStarted, conversation_uuid

# ------------------------------------------------------------------ how the stores are opened


def store_environment(settings: dict[str, str]) -> Environment:
    """Returns the environment a ConversationStore reads for `settings` (the store's class env,
    then os.environ, then `settings`: the library's `Application.construct_env`), a copy the
    factory cases may change."""
    return ConversationStore.__new__(ConversationStore).construct_env(ConversationStore.name, settings)


class Stores:
    """Opens stores the way the product does (`open_store`) and closes them after the test;
    `settings` is the CHATRECORD_* environment of the test's database (`None` for memory)."""

    stores: list[ConversationStore]
    settings: dict[str, str] | None

    def open(self, **overrides: str) -> ConversationStore:
        if self.settings is None:
            store = open_store({}, memory=True, **overrides)
        else:
            store = open_store(self.settings, **overrides)
        self.stores.append(store)
        return store

    def library_env(self) -> dict[str, str]:
        """Returns the library's keys `store_env` picks for this test's database."""
        return store_env(self.settings or {}, memory=self.settings is None)

    def _close_all(self) -> None:
        # The library's concurrency case (`test_concurrent_no_conflicts`) sets its readers' stop
        # event but never joins them: a reader still inside `select_notifications` when the store
        # closed its connections read a closed SQLite connection, and the worker process died of a
        # segmentation fault (once in a whole run, its xdist worker lost). Wait for them first.
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and getattr(thread, "_target", None) is not None:
                if getattr(thread._target, "__name__", "") == "read_continuously":  # type: ignore[attr-defined]
                    thread.join(timeout=30)
        for store in self.stores:
            store.close()


class PostgresStores(Stores):
    """Stores on a fresh schema of the test server (`postgres_schema`, dropped after the test)."""

    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str, postgres_schema: str) -> Iterator[None]:
        joiner = "&" if "?" in postgres_url else "?"
        self.schema = postgres_schema
        self.settings = {"CHATRECORD_DATABASE_URL": f"{postgres_url}{joiner}schema={postgres_schema}"}
        self.stores = []
        self.env = store_environment(self.library_env())
        yield
        self._close_all()


class SQLiteStores(Stores):
    """Stores in a SQLite file in the test's folder."""

    @pytest.fixture(autouse=True)
    def _database(self, tmp_path: Path) -> Iterator[None]:
        self.settings = {"CHATRECORD_DB": str(tmp_path / "chatrecord.sqlite")}
        self.stores = []
        self.env = store_environment(self.library_env())
        yield
        self._close_all()


class MemoryStores(Stores):
    """Stores in memory."""

    @pytest.fixture(autouse=True)
    def _database(self) -> Iterator[None]:
        self.settings = None
        self.stores = []
        self.env = store_environment(self.library_env())
        yield
        self._close_all()


# ------------------------------------------------------------------ the chain's start


class ChainStarts:
    """Mixin for a chained recorder, not the library's: a sequence may start at version 0, as
    the library's tests write them, or at 1, as chatrecord's conversations do; either way its
    first event links to GENESIS and the chain verifies. `reopened` is a recorder of the same
    store that knows none of the links this one wrote (another process's)."""

    def reopened(self) -> Any:
        return self.stores[-1].recorder  # type: ignore[attr-defined]  # memory and SQLite keep no links

    def events(self, key: Any, versions: Sequence[int]) -> list[StoredEvent]:
        return [StoredEvent(originator_id=key, originator_version=v, topic="topic", state=b"state%d" % v) for v in versions]

    def test_a_sequence_from_version_0_is_chained_from_genesis(self) -> None:
        recorder = self.create_recorder()  # type: ignore[attr-defined]
        key = uuid4()
        recorder.insert_events(self.events(key, [0]))
        self.reopened().insert_events(self.events(key, [1]))  # links to version 0 without knowing it
        recorder.insert_events(self.events(key, [2, 3]))
        expected, digest = [], GENESIS
        for version in range(4):
            digest = link(digest, key, version, "topic", b"state%d" % version, recorder.chain_key)
            expected.append((key, version, digest))
        assert recorder.chain_links(None, key) == expected
        verdict = next(v for v in verdicts(self.stores[-1]) if v.originator_id == key)  # type: ignore[attr-defined]
        assert (verdict.ok, verdict.version, verdict.events, verdict.hash) == (True, 3, 4, digest)

    def test_version_0_of_a_sequence_from_version_1_is_refused(self) -> None:
        recorder = self.create_recorder()  # type: ignore[attr-defined]
        key = uuid4()
        recorder.insert_events(self.events(key, [1, 2]))
        for writer in (recorder, self.reopened()):
            with pytest.raises(VersionRefused) as refused:
                writer.insert_events(self.events(key, [0]))
            assert (refused.value.problem, refused.value.version) == ("before_first", 0)
        assert [e.originator_version for e in recorder.select_events(key)] == [1, 2]
        assert [v for _, v, _ in recorder.chain_links(None, key)] == [1, 2]

    def test_a_deleted_first_event_of_a_sequence_from_version_0_is_found(self) -> None:
        """The chain's detection of a deleted first event holds for a sequence from 0: the
        event at version 1 links to version 0's hash, not to GENESIS."""
        recorder = self.create_recorder()  # type: ignore[attr-defined]
        key = uuid4()
        recorder.insert_events(self.events(key, [0, 1, 2]))
        self.delete_first(key)
        verdict = next(v for v in verdicts(self.stores[-1]) if v.originator_id == key)  # type: ignore[attr-defined]
        assert not verdict.ok and verdict.version == 1

    def delete_first(self, key: Any) -> None:
        """Deletes the event at version 0 of `key` and its link, as by hand."""
        raise NotImplementedError


class Subscribed:
    """Mixin: the library's optional subscription test (`optional_test_insert_subscribe`, which
    its own memory and PostgreSQL recorder tests run) is run too."""

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()  # type: ignore[attr-defined]


class LineWakesSubscription:
    """Mixin, not the library's: what a downstream consumer of the log sees. A store's `record`
    of a demo line wakes a subscription started before it (the subscription has read the log
    up to then and waits for a notification), which yields the line's events, in order, with
    the notification ids the store gave them."""

    def listeners(self, recorder: Any) -> int:
        """Returns how many sessions LISTEN on `recorder`'s channel (memory: none)."""
        return 0

    def test_a_recorded_line_wakes_a_subscription_started_before_it(self) -> None:
        store = self.open()  # type: ignore[attr-defined]
        chat = Chatrecord(store)
        lines = demo_lines()
        chat.record(lines[0])
        first = store.recorder.max_notification_id()
        before = self.listeners(store.recorder)
        with store.recorder.subscribe(gt=first - 1) as subscription:
            stop = threading.Timer(30, subscription.stop)  # a subscription never woken fails, not hangs
            stop.start()
            try:
                assert next(subscription).id == first  # read from the log: the subscription is waiting now
                deadline = time.monotonic() + 10  # its LISTEN runs in a thread of its own: wait for it
                while self.listeners(store.recorder) <= before and time.monotonic() < deadline:
                    time.sleep(0.01)
                result = chat.record(lines[1])
                got = [next(subscription) for _ in result.appended]
            finally:
                stop.cancel()
        assert result.appended
        assert [(n.originator_id, n.originator_version) for n in got] == [
            (e.originator_id, e.originator_version) for e in result.appended
        ]
        stored = store.recorder.select_notifications(first + 1, 100)
        assert [(n.id, n.originator_version, n.topic) for n in got] == [(n.id, n.originator_version, n.topic) for n in stored]
        assert got[-1].id == result.position


class Unsubscribed:
    """Mixin for a recorder without subscriptions (the library's SQLite recorder): the
    library's optional subscription test cannot apply; `subscribe` says so at once, as the
    library's SQLite recorder does, instead of waiting forever."""

    def test_subscribe_is_refused(self) -> None:
        recorder = self.create_recorder()  # type: ignore[attr-defined]
        with pytest.raises(NotImplementedError, match="does not support subscriptions"):
            recorder.subscribe(gt=None)


class StoreMapper:
    """Mixin for a factory's contract: the mapper is the store's (`PydanticMapper`, named by the
    store's MAPPER_TOPIC), which maps chatrecord's pydantic events only, so the wrong cipher
    key test maps a `ConversationStarted`, not the library's `DomainEvent` (which has no
    pydantic fields to dump). It is otherwise the library's test, step for step."""

    def test_mapper_with_wrong_cipher_key(self) -> None:
        env, factory = self.env, self.factory  # type: ignore[attr-defined]
        env.name = "App1"
        env[factory.CIPHER_TOPIC] = get_topic(AESCipher)
        env["APP1_" + AESCipher.CIPHER_KEY] = AESCipher.create_key(16)
        env["APP2_" + AESCipher.CIPHER_KEY] = AESCipher.create_key(16)

        mapper1 = factory.mapper(transcoder=self.transcoder)  # type: ignore[attr-defined]
        assert type(mapper1) is PydanticMapper
        started = ConversationStarted(
            originator_id=conversation_uuid("c1"),
            originator_version=1,
            timestamp=datetime(2026, 1, 2, tzinfo=UTC),
            conversation="c1",
            kind="chat",
            owner=7,
        )
        stored_event = mapper1.to_stored_event(started)
        assert mapper1.to_domain_event(stored_event) == started

        env.name = "App2"
        mapper2 = factory.mapper(transcoder=self.transcoder)  # type: ignore[attr-defined]
        # the factory reads another cipher key for another application name
        with pytest.raises(ValueError):
            mapper2.to_domain_event(stored_event)


# ------------------------------------------------------------------ PostgreSQL


class PostgresLineWakesSubscription(LineWakesSubscription):
    """`LineWakesSubscription` on PostgreSQL: the subscription's thread LISTENs on the
    recorder's channel, which the append function NOTIFYs."""

    def listeners(self, recorder: Any) -> int:
        with recorder.datastore.get_connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE query = %s",
                (SQL("LISTEN {}").format(Identifier(recorder.channel_name)).as_string(conn),),
            ).fetchone()
        return int(row["n"])


class TestPostgresAggregateRecorder(PostgresStores, contract.AggregateRecorderTestCase):
    """The snapshot recorder of a store on PostgreSQL (the library's, created by `ensure_schema`)."""

    def create_recorder(self) -> AggregateRecorder:
        recorder = self.open().snapshots.recorder  # type: ignore[union-attr]
        assert type(recorder) is PostgresAggregateRecorder
        return recorder


class TestPostgresChainedApplicationRecorder(
    PostgresLineWakesSubscription, Subscribed, ChainStarts, PostgresStores, contract.ApplicationRecorderTestCase
):
    """`ChainedPostgresRecorder`, the recorder of every store on PostgreSQL."""

    def create_recorder(self) -> ApplicationRecorder:
        recorder = self.open().recorder
        assert type(recorder) is ChainedPostgresRecorder
        return recorder

    def reopened(self) -> Any:
        return self.open().recorder  # a recorder of its own, which knows no link of the first

    def test_the_librarys_insert_function_is_never_called(self) -> None:
        """With the library's POSTGRES_ENABLE_DB_FUNCTIONS on, an append is still chained: the
        recorder appends its own ways, never through the library's insert function."""
        recorder = self.open(POSTGRES_ENABLE_DB_FUNCTIONS="y").recorder
        assert recorder.datastore.enable_db_functions
        key = uuid4()
        recorder.insert_events(self.events(key, [1, 2]))
        digest = link(GENESIS, key, 1, "topic", b"state1", recorder.chain_key)
        assert recorder.chain_links(None, key) == [
            (key, 1, digest),
            (key, 2, link(digest, key, 2, "topic", b"state2", recorder.chain_key)),
        ]

    def delete_first(self, key: Any) -> None:
        recorder = self.stores[-1].recorder
        with recorder.datastore.transaction(commit=True) as curs:
            curs.execute("SET LOCAL session_replication_role = replica")  # past the store's guard, as a forger goes
            for table in (recorder.events_table_name, "chatrecord_chain"):
                curs.execute(
                    SQL("DELETE FROM {} WHERE originator_id = %s AND originator_version = 0").format(
                        Identifier(self.schema, table)
                    ),
                    (key,),
                )


class TestPostgresPlainApplicationRecorder(Subscribed, PostgresStores, contract.ApplicationRecorderTestCase):
    """`PlainEventRecorder`, the PostgreSQL recorder without the chain, made by the store's factory
    when the library's APPLICATION_RECORDER_TOPIC names it."""

    def create_recorder(self) -> ApplicationRecorder:
        recorder = self.open(APPLICATION_RECORDER_TOPIC=get_topic(PlainEventRecorder)).recorder
        assert type(recorder) is PlainEventRecorder
        return recorder


class AppendPath:
    """Mixin for a PostgreSQL recorder's cases on another append path: the cases that check
    what is stored (`test_insert_select`, `test_concurrent_no_conflicts`, the chain's
    refusal) and the subscription (each path sends the NOTIFY it wakes on) run again; the
    ones that only print a rate (`test_performance`, `test_concurrent_throughput`) do not
    (they add some 10 s to the file and check nothing more)."""

    test_performance = None
    test_concurrent_throughput = None


class SyncedAppend(AppendPath):
    """Mixin: the recorder appends as the library's own pipelined statements
    (`EventRecorder._append_synced`), as it does where the append function cannot be had (a
    role without CREATE on the schema, a read-only database) or an append holds a statement
    the function's document cannot carry."""

    def create_recorder(self) -> ApplicationRecorder:
        recorder = super().create_recorder()  # type: ignore[misc]
        getattr(recorder, "recorder", recorder)._function = ""  # the append function: none to be had
        return recorder  # type: ignore[no-any-return]


class PlainAppend(AppendPath):
    """Mixin: every append is larger than PIPELINE_BYTES, so the recorder appends in one
    ordinary transaction (`EventRecorder._append_plain`), as it does a large segment."""

    @pytest.fixture(autouse=True)
    def _every_append_large(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(postgres_recorder, "PIPELINE_BYTES", 0)


class TestPostgresChainedSyncedAppend(SyncedAppend, TestPostgresChainedApplicationRecorder):
    pass


class TestPostgresChainedPlainAppend(PlainAppend, TestPostgresChainedApplicationRecorder):
    pass


class TestPostgresPlainSyncedAppend(SyncedAppend, TestPostgresPlainApplicationRecorder):
    pass


class TestPostgresPlainPlainAppend(PlainAppend, TestPostgresPlainApplicationRecorder):
    pass


class TestPostgresChainedNonInterleaving(PostgresStores, contract.NonInterleavingNotificationIDsBaseCase):
    """Two conversations' appends at once get blocks of notification ids that do not
    interleave."""

    def create_recorder(self) -> ApplicationRecorder:
        return self.open().recorder


class TestPostgresPlainNonInterleaving(PostgresStores, contract.NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> ApplicationRecorder:
        return self.open(APPLICATION_RECORDER_TOPIC=get_topic(PlainEventRecorder)).recorder


class TestPostgresTrackingRecorder(PostgresStores, contract.TrackingRecorderTestCase):
    """The tracking recorder a store's factory hands out (chatrecord keeps no tracking itself)."""

    def create_recorder(self) -> TrackingRecorder:
        return self.open().factory.tracking_recorder()


class TestPostgresProcessRecorder(PostgresStores, contract.ProcessRecorderTestCase):
    """The process recorder a store's factory hands out (the store keeps none itself)."""

    def create_recorder(self) -> ProcessRecorder:
        return self.open().factory.process_recorder()


class PostgresTrackingSubclass(PostgresTrackingRecorder):
    pass


class TestPostgresFactory(StoreMapper, PostgresStores, contract.InfrastructureFactoryTestCase[PostgresFactory]):
    def expected_factory_class(self) -> type[PostgresFactory]:
        return PostgresFactory

    def expected_aggregate_recorder_class(self) -> type[AggregateRecorder]:
        return PostgresAggregateRecorder

    def expected_application_recorder_class(self) -> type[ApplicationRecorder]:
        return ChainedPostgresRecorder

    def expected_tracking_recorder_class(self) -> type[TrackingRecorder]:
        return PostgresTrackingRecorder

    def tracking_recorder_subclass(self) -> type[TrackingRecorder]:
        return PostgresTrackingSubclass

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        return PostgresProcessRecorder


# ------------------------------------------------------------------ SQLite


class TestSQLiteAggregateRecorder(SQLiteStores, contract.AggregateRecorderTestCase):
    """The snapshot recorder of a store in a SQLite file (the library's, on `WaitingSQLiteDatastore`)."""

    def create_recorder(self) -> AggregateRecorder:
        recorder = self.open().snapshots.recorder  # type: ignore[union-attr]
        assert type(recorder) is SQLiteAggregateRecorder
        return recorder


class TestSQLiteApplicationRecorder(Unsubscribed, ChainStarts, SQLiteStores, contract.ApplicationRecorderTestCase):
    """`ChainedSQLiteRecorder`, the recorder of every store in a SQLite file."""

    def create_recorder(self) -> ApplicationRecorder:
        recorder = self.open().recorder
        assert type(recorder) is ChainedSQLiteRecorder
        return recorder

    def delete_first(self, key: Any) -> None:
        recorder = self.stores[-1].recorder
        with recorder.datastore.transaction(commit=True) as curs:
            for table in (recorder.events_table_name, "chatrecord_chain"):
                curs.execute(f"DELETE FROM {table} WHERE originator_id = ? AND originator_version = 0", (key.hex,))


class TestSQLiteNonInterleaving(SQLiteStores, contract.NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> ApplicationRecorder:
        return self.open().recorder


class TestSQLiteTrackingRecorder(SQLiteStores, contract.TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        return self.open().factory.tracking_recorder()


class TestSQLiteProcessRecorder(SQLiteStores, contract.ProcessRecorderTestCase):
    """The process recorder a store's factory hands out (the store keeps none itself)."""

    def create_recorder(self) -> ProcessRecorder:
        return self.open().factory.process_recorder()


class SQLiteTrackingSubclass(SQLiteTrackingRecorder):
    pass


class TestSQLiteFactory(StoreMapper, SQLiteStores, contract.InfrastructureFactoryTestCase[SQLiteFactory]):
    def expected_factory_class(self) -> type[SQLiteFactory]:
        return SQLiteFactory

    def expected_aggregate_recorder_class(self) -> type[AggregateRecorder]:
        return SQLiteAggregateRecorder

    def expected_application_recorder_class(self) -> type[ApplicationRecorder]:
        return ChainedSQLiteRecorder

    def expected_tracking_recorder_class(self) -> type[TrackingRecorder]:
        return SQLiteTrackingRecorder

    def tracking_recorder_subclass(self) -> type[TrackingRecorder]:
        return SQLiteTrackingSubclass

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        return SQLiteProcessRecorder


# ------------------------------------------------------------------ memory


class TestMemoryAggregateRecorder(MemoryStores, contract.AggregateRecorderTestCase):
    def create_recorder(self) -> AggregateRecorder:
        recorder = self.open().snapshots.recorder  # type: ignore[union-attr]
        assert type(recorder) is POPOAggregateRecorder
        return recorder


class TestMemoryApplicationRecorder(
    LineWakesSubscription, Subscribed, ChainStarts, MemoryStores, contract.ApplicationRecorderTestCase
):
    """`ChainedPOPORecorder`, the recorder of every store in memory."""

    def create_recorder(self) -> ApplicationRecorder:
        recorder = self.open().recorder
        assert type(recorder) is ChainedPOPORecorder
        return recorder

    def delete_first(self, key: Any) -> None:
        recorder = self.stores[-1].recorder
        recorder.chain.pop((key, 0))
        recorder._stored_events_index[str(key)].pop(0)  # the library's in-memory rows: no other way in


class TestMemoryNonInterleaving(MemoryStores, contract.NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> ApplicationRecorder:
        return self.open().recorder


class TestMemoryTrackingRecorder(MemoryStores, contract.TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        return self.open().factory.tracking_recorder()


class TestMemoryProcessRecorder(MemoryStores, contract.ProcessRecorderTestCase):
    """The process recorder a store's factory hands out (the store keeps none itself)."""

    def create_recorder(self) -> ProcessRecorder:
        return self.open().factory.process_recorder()


class MemoryTrackingSubclass(POPOTrackingRecorder):
    pass


class TestMemoryFactory(StoreMapper, MemoryStores, contract.InfrastructureFactoryTestCase[MemoryFactory]):
    def expected_factory_class(self) -> type[MemoryFactory]:
        return MemoryFactory

    def expected_aggregate_recorder_class(self) -> type[AggregateRecorder]:
        return POPOAggregateRecorder

    def expected_application_recorder_class(self) -> type[ApplicationRecorder]:
        return ChainedPOPORecorder

    def expected_tracking_recorder_class(self) -> type[TrackingRecorder]:
        return POPOTrackingRecorder

    def tracking_recorder_subclass(self) -> type[TrackingRecorder]:
        return MemoryTrackingSubclass

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        return POPOProcessRecorder
