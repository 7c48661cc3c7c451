"""The ConversationStore told as a story, on the library's in-memory store."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from adapters.bootstrap import build_store, open_store
from adapters.ingest import read_file
from adapters.service.record_lines import RecordLines
from adapters.store.commands import Lookups
from domain import conversation as c
from domain.errors import NoCardWaiting
from domain.events import CardDecided, ConversationEvent, conversation_uuid

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
T0 = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)


class Decide:
    """A fake command: any function from state and history index to events, for one conversation."""

    def __init__(self, conversation: str, decide) -> None:
        self.conversation = conversation
        self.decide = decide

    def lookups(self) -> Lookups:
        return Lookups()


def test_the_demo_tour_is_stored_and_read_back() -> None:
    # Construct the application.
    store = open_store(memory=True)

    # Ingest the demo, line by line.
    results = [store.handle(RecordLines([line])) for line in read_file(DEMO)]
    appended = [e for r in results for e in r.appended]

    # Query it.
    state = store.get("conv-demo-seo")
    assert state is not None and state.kind == "chat" and state.skill is None
    history = store.history.reader(state.id)
    assert state.last_message == 3 and history.messages_after(0) == [1, 2, 3]
    assert history.outcomes() == 6
    assert store.events("conv-demo-seo") == appended
    assert store.conversation_ids() == ["conv-demo-seo"]
    assert store.max_notification_id() == len(appended) == results[-1].position

    # Deliver the whole file again: nothing changes, each line answers with its first result.
    again = [store.handle(RecordLines([line])) for line in read_file(DEMO)]
    assert all(r.repeated for r in again)
    assert [r.events for r in again] == [r.appended for r in results]
    assert store.max_notification_id() == len(appended)


def test_a_repeated_card_decision_returns_the_decision_not_its_segment() -> None:
    store = open_store(memory=True)
    lines = list(read_file(DEMO))
    for line in lines:
        store.handle(RecordLines([line]))

    card = next(line for line in lines if line.type == "card_decided")
    result = store.handle(RecordLines([card]))

    assert result.repeated
    assert [type(e) for e in result.events] == [CardDecided]
    assert result.events[0].segment == card.segment


def test_a_command_that_breaks_an_invariant_stores_nothing() -> None:
    store = open_store(memory=True)
    for line in list(read_file(DEMO))[:2]:
        store.handle(RecordLines([line]))
    before = store.max_notification_id()

    with pytest.raises(NoCardWaiting):
        store.handle(
            Decide("conv-demo-seo", lambda s, h: c.decide_card(s, "nope", True, "Übernehmen", None, None, T0, history=h))
        )
    assert store.max_notification_id() == before


def test_a_command_on_a_conversation_never_started_sees_none() -> None:
    store = open_store(memory=True)
    seen = []
    result = store.handle(Decide("new", lambda s, h: seen.append(s) or []))
    assert seen == [None]
    assert result.repeated and result.state is None and result.events == ()


def _many_segments(state: c.Conversation, history: c.History, first: int, count: int) -> list[ConversationEvent]:
    events: list[ConversationEvent] = []
    for n in range(first, first + count):
        new = c.return_segment(state, f"seg-{n}", "run", "turn", "completed", None, False, (), (), T0, history=history)
        state = c.project_conversation(state, new)
        events += new
    return events


def test_a_conversation_of_ten_thousand_segments_loads_from_its_last_snapshot(monkeypatch) -> None:
    store = build_store({"PERSISTENCE_MODULE": "eventsourcing.popo"})
    assert store.snapshot_interval == 100
    store.handle(Decide("long", lambda s, h: c.start_conversation(s, "long", "chat", 7, T0)))
    store.handle(Decide("long", lambda s, h: c.post_user_message(s, 1, "los", 0, None, T0)))
    for batch in range(100):
        store.handle(Decide("long", lambda s, h, b=batch: _many_segments(s, h, b * 100, 100)))

    seen: list[ConversationEvent] = []

    def counting(state, events):
        events = list(events)
        seen.extend(events)
        return c.project_conversation(state, events)

    monkeypatch.setattr("adapters.store.application.project_conversation", counting)
    store.repository.cache.get(conversation_uuid("long"), evict=True)  # a cold load, as in a new process
    state = store.get("long")

    assert state is not None and state.version == 10_002
    assert store.history.reader(state.id).segment("seg-9999").version == 10_002
    assert isinstance(seen[0], c.ConversationSnapshot)
    assert len(seen) <= store.snapshot_interval
    snapshot = next(store.snapshots.get(conversation_uuid("long"), desc=True, limit=1))
    assert snapshot.originator_version == 10_002
    assert len(orjson.dumps(snapshot.state)) < 1_000  # the state is bounded: the past is in the history index


def test_the_snapshot_interval_comes_from_the_environment() -> None:
    store = open_store({"CHATRECORD_SNAPSHOT_INTERVAL": "7"}, memory=True)
    assert store.snapshot_interval == 7
    with pytest.raises(ValueError, match="at least 1"):
        open_store(memory=True, SNAPSHOT_INTERVAL="0")


def test_every_older_version_can_be_loaded() -> None:
    store = open_store(memory=True, SNAPSHOT_INTERVAL="5")
    for line in read_file(DEMO):
        store.handle(RecordLines([line]))
    log = store.events("conv-demo-seo")
    for version in range(1, len(log) + 1):
        assert store.get("conv-demo-seo", version=version) == c.project_conversation(None, log[:version])
    assert store.get("conv-demo-seo", version=3) == c.project_conversation(None, store.events("conv-demo-seo", 3))


def test_a_cached_conversation_is_brought_up_to_date_with_what_another_writer_stored(tmp_path) -> None:
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "shared.sqlite")}
    first, second = build_store(env), build_store(env)
    first.handle(Decide("c", lambda s, h: c.start_conversation(s, "c", "chat", 7, T0)))
    first.handle(Decide("c", lambda s, h: c.post_user_message(s, 1, "eins", 0, None, T0)))
    assert first.repository.cache.get(conversation_uuid("c")).version == 2  # cached after the save

    second.handle(Decide("c", lambda s, h: c.post_user_message(s, 2, "zwei", 0, None, T0)))
    result = first.handle(Decide("c", lambda s, h: c.post_user_message(s, 3, "drei", 0, None, T0)))

    assert (result.attempts, result.state.last_message, result.state.version) == (1, 3, 4)
