"""The conversation store's contract, run once per backend: in memory, SQLite, PostgreSQL.

`StoreContract` holds the tests; each backend subclasses it and says how to open a store on
the test's own database (`open_store`) and how to read the raw stored bytes (`stored_bytes`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.utils import get_topic
from psycopg import sql

from adapters.backends.settings import memory_env
from adapters.bootstrap import build_store
from adapters.store.application import ConversationStore
from adapters.store.commands import Lookups
from adapters.store.write_retry import WriteConflict
from domain import conversation as c
from domain.events import (
    CardDecided,
    ConversationEvent,
    ConversationStarted,
    SegmentReturned,
    conversation_uuid,
)
from domain.values import RecordRef, StepFact, WaitingCall
from tests.integration.backends import PostgresStores, SQLiteStores

T0 = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)
CARD = WaitingCall(tool_name="update_page_metadata", target=RecordRef(table="pages", uid=42), fields=("title",))
STEPS = (
    StepFact(kind="llm", round=1, duration_ms=2137.0),
    StepFact(kind="tool", round=1, duration_ms=31.7, tool_name="get_page", tool_is_error=False, tool_outcome="ok"),
    StepFact(
        kind="tool_write",
        round=2,
        duration_ms=12.5,
        tool_name="update_page_metadata",
        write_target=RecordRef(table="pages", uid=42),
        write_completeness="complete",
    ),
)


class Command:
    """A fake of the ingester's line: `decide` calls one domain command with the state."""

    def __init__(self, conversation: str, command: Callable[..., list[ConversationEvent]], *args, segment=None, **kw):
        self.conversation, self.segment = conversation, segment
        self.command, self.args, self.kwargs = command, args, kw
        self.kwargs.setdefault("at", T0)

    def decide(self, state: c.Conversation | None, history: c.History) -> list[ConversationEvent]:
        return self.command(state, *self.args, history=history, **self.kwargs)

    def lookups(self) -> Lookups:
        return Lookups(segment=self.segment)


def started(conv: str = "conv-1") -> Command:
    return Command(conv, c.start_conversation, conv, "chat", 7)


def message(n: int, conv: str = "conv-1", skill: str | None = None) -> Command:
    return Command(conv, c.post_user_message, n, f"message {n}", 42, skill, at=T0 + timedelta(minutes=n))


def segment(seg: str, conv: str = "conv-1", outcome: str = "completed", answer: str = "Erledigt.") -> Command:
    waiting = [CARD] if outcome == "awaiting_approval" else []
    return Command(conv, c.return_segment, seg, "run-1", "turn", outcome, answer, False, STEPS, waiting, segment=seg)


class StoreContract:
    """What every backend must do. Subclasses implement `open_store` and `stored_bytes`."""

    shares_database = True  # a second store instance sees the first one's writes

    def open_store(self, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    def stored_bytes(self, store: ConversationStore) -> bytes:
        """Returns every byte the backend keeps of the store's events and snapshots."""
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> ConversationStore:
        return self.open_store()

    def second_store(self, store: ConversationStore) -> ConversationStore:
        return self.open_store() if self.shares_database else store

    # ------------------------------------------------------------------ round trip

    def test_events_reload_as_they_went_in(self, store: ConversationStore) -> None:
        appended = []
        for command in (started(), message(1, skill="3:seo-optimieren"), segment("s1", outcome="awaiting_approval")):
            appended += store.handle(command).appended
        appended += store.handle(Command("conv-1", c.decide_card, "s1", True, "Übernehmen", None, None)).appended

        assert [type(e) for e in appended][-1] is CardDecided
        assert store.events("conv-1") == appended
        assert store.events("conv-1", up_to_version=2) == appended[:2]
        assert self.second_store(store).events("conv-1") == appended
        assert store.get("conv-1") == c.project_conversation(None, appended)
        assert store.conversation_ids() == ["conv-1"]
        assert store.max_notification_id() == len(appended)

    def test_a_conversation_never_started_is_none_with_no_events(self, store: ConversationStore) -> None:
        assert store.get("nobody") is None
        assert store.events("nobody") == []
        assert store.conversation_ids() == []
        assert store.max_notification_id() == 0

    def test_conversation_ids_lists_every_started_conversation(self, store: ConversationStore) -> None:
        for conv in ("b", "a", "c"):
            store.handle(started(conv))
            store.handle(message(1, conv))
        assert store.conversation_ids() == ["b", "a", "c"]

    def test_handle_reports_the_position_of_the_last_appended_event(self, store: ConversationStore) -> None:
        store.handle(started())
        result = store.handle(message(1))
        assert result.position == store.max_notification_id() == 2
        assert result.state == store.get("conv-1")

    # ------------------------------------------------------------------ idempotence

    def test_a_repeated_segment_returns_the_first_result(self, store: ConversationStore) -> None:
        store.handle(started())
        store.handle(message(1))
        first = store.handle(segment("s1", answer="first"))
        again = store.handle(segment("s1", answer="second"))

        assert not first.repeated and again.repeated
        assert again.appended == ()
        assert again.events == first.appended
        assert isinstance(again.events[0], SegmentReturned) and again.events[0].answer == "first"
        assert len(store.events("conv-1")) == 3

    # ------------------------------------------------------------------ concurrency

    def test_a_conflicting_append_is_retried_after_reloading(self, store: ConversationStore) -> None:
        other = self.second_store(store)
        store.handle(started())
        store.handle(message(1))

        class Racing(Command):
            """Lets the other store append message 1's segment after this one has loaded the state."""

            raced = False

            def decide(self, state, history):
                if not self.raced:
                    self.raced = True
                    other.handle(segment("s1"))
                return super().decide(state, history)

        result = store.handle(Racing("conv-1", c.post_user_message, 2, "message 2", 0, None))

        assert result.attempts == 2
        assert store.get("conv-1").last_message == 2
        assert [e.originator_version for e in store.events("conv-1")] == [1, 2, 3, 4]

    def test_an_append_that_always_conflicts_gives_up(self) -> None:
        store = self.open_store(HANDLE_MAX_ATTEMPTS="3")
        other = self.second_store(store)
        store.handle(started())
        n = iter(range(1, 100))

        class AlwaysRacing(Command):
            def decide(self, state, history):
                other.handle(message(next(n)))
                return c.post_user_message(state, state.last_message + 1, "late", 0, None, T0)  # next on a stale state

        with pytest.raises(WriteConflict, match='conversation "conv-1" kept changing under this write: 3 tries') as raised:
            store.handle(AlwaysRacing("conv-1", c.post_user_message))
        assert isinstance(raised.value.__cause__, IntegrityError)
        assert store.get("conv-1").last_message == 3

    # ------------------------------------------------------------------ the history index

    def test_a_redelivered_segment_is_found_in_the_history_index(self, store: ConversationStore) -> None:
        store.handle(started())
        store.handle(message(1))
        first = store.handle(segment("s1"))

        again = store.handle(segment("s1", answer="anders"))

        assert again.repeated and again.events == first.appended
        record = store.history.reader(conversation_uuid("conv-1")).segment("s1")
        assert record is not None and record.version == first.appended[0].originator_version
        assert store.history.reader(conversation_uuid("conv-1")).version == 3

    def test_the_history_index_is_written_in_the_events_transaction(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store.handle(started())

        def broken(*args, **kwargs):
            raise RuntimeError("the index write failed")

        monkeypatch.setattr(store.history, "write", broken)
        with pytest.raises(RuntimeError, match="index write failed"):
            store.handle(message(1))

        assert [e.originator_version for e in store.events("conv-1")] == [1]  # the events went with it
        monkeypatch.undo()
        store.handle(message(1))
        assert store.history.reader(conversation_uuid("conv-1")).message_uncut(1)

    # ------------------------------------------------------------------ snapshots

    def test_loading_starts_from_the_newest_snapshot(self, monkeypatch: pytest.MonkeyPatch) -> None:
        store = self.open_store(SNAPSHOT_INTERVAL="10")
        store.handle(started())
        for n in range(1, 25):
            store.handle(message(n))

        cid = conversation_uuid("conv-1")
        assert [s.originator_version for s in store.snapshots.get(cid)] == [10, 20]  # each small: the state is bounded

        seen: list[ConversationEvent] = []

        def counting(state, events):
            events = list(events)
            seen.extend(events)
            return c.project_conversation(state, events)

        monkeypatch.setattr("adapters.store.application.project_conversation", counting)
        reopened = self.second_store(store)
        if reopened is store:  # in memory: load it cold all the same, as a new process would
            store.repository.cache.get(cid, evict=True)
        state = reopened.get("conv-1")

        assert isinstance(seen[0], c.ConversationSnapshot) and seen[0].originator_version == 20
        assert [e.originator_version for e in seen[1:]] == [21, 22, 23, 24, 25]
        assert state == c.project_conversation(None, store.events("conv-1"))

    def test_a_batch_crossing_the_interval_takes_a_snapshot(self) -> None:
        store = self.open_store(SNAPSHOT_INTERVAL="4")
        store.handle(started())
        store.handle(message(1))
        store.handle(segment("s1", outcome="awaiting_approval"))
        store.handle(message(2))  # CardLeftUndecided + UserMessagePosted: versions 4 and 5

        snapshots = list(store.snapshots.get(conversation_uuid("conv-1")))
        assert [s.originator_version for s in snapshots] == [5]
        assert c.evolve(snapshots[-1], None) == store.get("conv-1")

    # ------------------------------------------------------------------ upcasting

    def test_a_stored_v1_conversation_started_loads_as_a_chat(self, store: ConversationStore) -> None:
        cid = conversation_uuid("old")
        v1_state = {"timestamp": T0.isoformat(), "source": None, "conversation": "old", "owner": 3}
        store.recorder.insert_events([StoredEvent(cid, 1, get_topic(ConversationStarted), orjson.dumps(v1_state))])
        store.handle(message(1, "old"))

        assert store.events("old")[0].kind == "chat"
        assert store.get("old").kind == "chat"
        assert store.get("old").last_message == 1

    def test_a_stored_v1_segment_returned_loads_with_its_usage_unknown(self, store: ConversationStore) -> None:
        store.handle(started())
        store.handle(message(1))
        cid = conversation_uuid("conv-1")
        version = len(store.events("conv-1")) + 1
        v1_state = {
            "timestamp": T0.isoformat(),
            "source": None,
            "segment": "r/1",
            "run": "r",
            "trigger": "turn",
            "outcome": "completed",
            "steps": [{"kind": "llm", "round": 1, "duration_ms": 5.0}, {"kind": "request", "round": 1, "duration_ms": 0.0}],
            "card_outcomes_before": 0,
            "message": 1,
        }
        store.recorder.insert_events([StoredEvent(cid, version, get_topic(SegmentReturned), orjson.dumps(v1_state))])

        loaded = store.events("conv-1")[-1]
        assert isinstance(loaded, SegmentReturned) and loaded.segment == "r/1"
        assert loaded.model is None and loaded.provider is None
        assert [(s.call, s.offered_tools) for s in loaded.steps] == [(None, None), (None, None)]

    def test_a_new_segment_returned_stores_class_version_2_with_its_usage(self, store: ConversationStore) -> None:
        ingest_demo(store)
        stored = store.recorder.select_events(conversation_uuid("conv-demo-seo"))
        state = orjson.loads(next(s.state for s in stored if s.topic == get_topic(SegmentReturned)))
        assert state["class_version"] == 2
        assert state["steps"][2]["call"]["prompt_tokens"] == 1800 and state["steps"][2]["call"]["estimated_cost"] == 0.0041
        assert state["steps"][1]["offered_tools"][-1] == "get_page"

    def test_a_new_conversation_started_stores_its_class_version(self, store: ConversationStore) -> None:
        store.handle(started())
        (stored,) = store.recorder.select_events(conversation_uuid("conv-1"))
        assert orjson.loads(stored.state)["class_version"] == 2
        assert b"originator_id" not in stored.state

    # ------------------------------------------------------------------ privacy on real bytes

    def test_the_demo_reloads_as_it_went_in(self, store: ConversationStore) -> None:
        appended = ingest_demo(store)
        conversations = sorted({e.originator_id for e in appended})
        assert store.conversation_ids() == ["conv-demo-seo"]
        assert [conversation_uuid("conv-demo-seo")] == conversations
        assert store.events("conv-demo-seo") == appended
        assert self.second_store(store).get("conv-demo-seo") == c.project_conversation(None, appended)

    def test_the_demo_stores_no_tool_arguments_results_or_model_text(self, store: ConversationStore) -> None:
        ingest_demo(store)
        store.take_snapshot(conversation_uuid("conv-demo-seo"), projector_func=c.project_conversation)
        stored = self.stored_bytes(store)
        planted = planted_values(DEMO)

        assert b"conv-demo-seo" in stored and "Übernehmen".encode() in stored  # we read the right bytes
        assert len(planted) >= 3
        leaked = [value for value in planted if any(form in stored for form in _forms(value))]
        assert leaked == []
        for key in DROPPED_KEYS:
            assert key.encode() not in stored

    def test_canaries_planted_in_every_dropped_field_never_reach_the_bytes(
        self, store: ConversationStore, tmp_path: Path
    ) -> None:
        ingest_demo(store, plant_canaries(DEMO, tmp_path / "canaries.jsonl"))
        store.take_snapshot(conversation_uuid("conv-demo-seo"), projector_func=c.project_conversation)
        stored = self.stored_bytes(store)

        assert b"conv-demo-seo" in stored
        assert b"canary" not in stored.lower()


# ---------------------------------------------------------------------- the demo

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
DROPPED_KEYS = ("toolArguments", "toolResult", "messagesSent", "requestedToolCalls", "contextBudget", "estimatedCost")


def ingest_demo(store: ConversationStore, path: Path = DEMO) -> list[ConversationEvent]:
    from adapters.ingest import read_file
    from adapters.service.record_lines import RecordLines

    appended: list[ConversationEvent] = []
    for line in read_file(path):
        appended += store.handle(RecordLines([line])).appended
    return appended


def plant_canaries(source: Path, target: Path) -> Path:
    """Writes `source` to `target` with a unique canary in every step's toolArguments,
    toolResult, llm content, in an unknown step key and an unknown line key."""
    out = []
    for n, raw in enumerate(source.read_text(encoding="utf-8").splitlines()):
        line = orjson.loads(raw)
        line["canaryNote"] = f"canary-line-{n}"
        for i, step in enumerate(line.get("steps") or []):
            tag = f"{n}-{i}"
            step["canaryKey"] = f"canary-unknown-{tag}"
            if step["kind"] == "llm":
                step["content"] = f"canary-llm-{tag}"
            if step["kind"] in ("tool", "tool_write"):
                step["toolArguments"] = {"pageUid": 42, "note": f"canary-arg-{tag}"}
                step["toolResult"] = f"canary-result-{tag}"
        out.append(orjson.dumps(line).decode())
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    return target


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def planted_values(path: Path) -> set[str]:
    """Returns the strings the demo plants in toolArguments, toolResult and llm content that
    appear nowhere the store may legitimately keep them (answers, message texts, ids)."""
    planted: set[str] = set()
    allowed: set[str] = set()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = orjson.loads(raw)
        for step in line.pop("steps", None) or []:
            planted.update(_strings([step.get("toolArguments"), step.get("toolResult")]))
            if step.get("kind") == "llm":
                planted.update(_strings(step.get("content")))
            allowed.update(_strings({k: v for k, v in step.items() if k in _KEPT_STEP_KEYS}))
        allowed.update(_strings(line))
    return {v for v in planted if len(v) >= 4 and not any(v in a for a in allowed)}


_KEPT_STEP_KEYS = ("kind", "toolName", "toolOutcome", "writeTargetTable", "writeCompleteness")


def _forms(value: str) -> tuple[bytes, ...]:
    return value.encode(), orjson.dumps(value)[1:-1]


# ---------------------------------------------------------------------- backends


class SharedDatabaseContract:
    """What a backend whose stores share one database must also do: writers in several
    stores (as several processes) on one conversation."""

    open_store: Any
    second_store: Any

    def test_eight_writers_on_one_conversation_store_every_acknowledged_line_once(self) -> None:
        first = self.open_store()
        first.handle(started())
        first.handle(message(1))
        writers, lines = 8, 25
        stores = [self.open_store() for _ in range(writers)]
        acknowledged: list[str] = []
        refused: list[tuple[int, str]] = []
        raw: list[BaseException] = []
        go = threading.Barrier(writers)

        def write(w: int) -> None:
            go.wait()
            for i in range(lines):
                try:
                    result = stores[w].handle(segment(f"w{w}-{i}"))
                except WriteConflict:  # the documented answer when every try conflicted
                    refused.append((w, f"w{w}-{i}"))
                except BaseException as error:  # noqa: BLE001 - any other error is the finding
                    raw.append(error)
                else:
                    acknowledged.extend(e.segment for e in result.appended)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert raw == []
        stored = [e.segment for e in self.second_store(first).events("conv-1") if isinstance(e, SegmentReturned)]
        assert sorted(stored) == sorted(acknowledged)  # nothing refused was stored, nothing twice
        for w, refused_segment in refused:  # the caller acts on the conflict: it sends the line again
            assert stores[w].handle(segment(refused_segment)).appended
        everything = sorted(f"w{w}-{i}" for w in range(writers) for i in range(lines))
        assert sorted(e.segment for e in first.events("conv-1") if isinstance(e, SegmentReturned)) == everything
        assert [e.originator_version for e in first.events("conv-1")] == list(range(1, 3 + writers * lines))
        for store in stores:
            store.close()


class TestInMemoryStore(StoreContract):
    shares_database = False

    def open_store(self, **overrides: str) -> ConversationStore:
        return build_store({**memory_env(), **overrides})

    def stored_bytes(self, store: ConversationStore) -> bytes:
        events = store.recorder.select_notifications(None, 1_000_000)
        snapshots = [s for cid in {e.originator_id for e in events} for s in store.snapshots.recorder.select_events(cid)]
        return b"\n".join(e.state for e in [*events, *snapshots])


class TestSQLiteStore(SQLiteStores, SharedDatabaseContract, StoreContract):
    def stored_bytes(self, store: ConversationStore) -> bytes:
        files = [self.path, self.path.with_name(self.path.name + "-wal")]
        return b"".join(f.read_bytes() for f in files if f.exists())


class TestPostgresStore(PostgresStores, SharedDatabaseContract, StoreContract):
    def stored_bytes(self, store: ConversationStore) -> bytes:
        chunks: list[bytes] = []
        with psycopg.connect(self.url) as conn:
            for table in ("conversationstore_events", "conversationstore_snapshots"):
                query = sql.SQL("SELECT state FROM {}.{}").format(sql.Identifier(self.schema), sql.Identifier(table))
                chunks += [bytes(row[0]) for row in conn.execute(query)]
        assert chunks, "no rows read: the table names may have changed"
        return b"\n".join(chunks)


def test_a_connection_to_a_file_another_process_is_switching_to_wal_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from eventsourcing import sqlite as es_sqlite

    from adapters.backends.sqlite import WaitingSQLiteDatastore

    connect = es_sqlite.SQLiteConnectionPool._create_connection
    tries: list[int] = []

    def locked_twice(pool: es_sqlite.SQLiteConnectionPool) -> es_sqlite.SQLiteConnection:
        tries.append(1)
        if len(tries) < 3:  # what the library's PRAGMA journal_mode=WAL meets while another opens the file
            raise sqlite3.OperationalError("database is locked")
        return connect(pool)

    monkeypatch.setattr(es_sqlite.SQLiteConnectionPool, "_create_connection", locked_twice)
    datastore = WaitingSQLiteDatastore(db_name=str(tmp_path / "c.sqlite"), lock_timeout=1)
    with datastore.transaction(commit=False) as curs:
        curs.execute("SELECT 1")
        assert curs.fetchone()[0] == 1
    assert len(tries) == 3
    datastore.close()

    def broken(pool: es_sqlite.SQLiteConnectionPool) -> es_sqlite.SQLiteConnection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(es_sqlite.SQLiteConnectionPool, "_create_connection", broken)
    datastore = WaitingSQLiteDatastore(db_name=str(tmp_path / "d.sqlite"), lock_timeout=1)
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        with datastore.get_connection(commit=False):
            pass
    datastore.close()
