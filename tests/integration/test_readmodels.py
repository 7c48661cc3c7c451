"""The materialised read models' contract, run once per backend: in memory, SQLite, PostgreSQL.

`ReadModelsContract` holds the tests; each backend says how to open a store on the test's own
database (`open_store`) and which read-model tables that database holds (`tables`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, Tracking

from adapters.application import ConversationStore
from adapters.ingest import read_file, read_lines
from adapters.readmodels import ReadModels, UnknownConversation
from adapters.readmodels_fold import PositionMoved, ReadModelOutOfStep, Row, fold
from adapters.readmodels_views import ReadModelsView
from adapters.settings import memory_env, postgres_env, sqlite_env
from domain.events import conversation_uuid
from projections.rules import UnknownRuleSet, resolve
from projections.turn import NoTurnInEvents, build_turn_input

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
T0 = datetime(2026, 10, 28, 9, 0, tzinfo=timezone.utc)


class Crash(Exception):
    """Stands for the process dying inside a transaction."""


# ---------------------------------------------------------------------- input lines


def ingest(store: ConversationStore, lines: list[dict[str, Any]] | Path) -> None:
    parsed = read_file(lines) if isinstance(lines, Path) else read_lines([orjson.dumps(x) for x in lines], "test")
    for line in parsed:
        store.handle(line)


class Lines:
    """JSON lines of one conversation, as the chat writes them, each a second apart."""

    def __init__(self, conversation: str) -> None:
        self.conversation, self.tick, self.lines = conversation, 0, []

    def add(self, type: str, **fields: Any) -> Lines:
        self.tick += 1
        at = (T0 + timedelta(seconds=self.tick)).isoformat().replace("+00:00", "Z")
        self.lines.append({"type": type, "conversation": self.conversation, "at": at, **fields})
        return self


def model_round(r: int) -> list[dict[str, Any]]:
    return [{"kind": "request", "round": r, "durationMs": 0.0}, {"kind": "llm", "round": r, "durationMs": 2100.0}]


def card(field: str) -> dict[str, Any]:
    return {"toolName": "update_page_metadata", "table": "pages", "uid": 42, "fields": [field]}


def refusal(r: int) -> dict[str, Any]:
    """nr-llm's step for a declined card's call: an error of exactly 0.0 ms."""
    return {"kind": "tool", "round": r, "durationMs": 0.0, "toolName": "update_page_metadata",
            "toolIsError": True, "toolOutcome": "failed"}


def behalten_tour(conversation: str = "conv-behalten") -> list[dict[str, Any]]:
    """An SEO tour of three cards, each answered Behalten, then a question with page 0."""
    fields = ("title", "og_title", "og_description")
    tour = Lines(conversation).add("conversation_started", kind="chat", owner=7)
    tour.add("user_message", message=1, text="SEO optimieren", page=42, skill="3:seo-optimieren")
    steps = [*model_round(1), {"kind": "tool", "round": 1, "durationMs": 31.7, "toolName": "get_page",
                                "toolIsError": False, "toolOutcome": "ok"}]
    tour.add("segment_returned", segment="run/1", run="run", trigger="turn", outcome="awaiting_approval",
             answer="Ich schlage einen Titel vor.", steps=steps, pending=[card("title")])
    for n, field in enumerate(fields, start=1):
        tour.add("card_decided", segment=f"run/{n}", approved=False, answer="Behalten", message=n + 1, text="Behalten")
        last = n == len(fields)
        tour.add("segment_returned", segment=f"run/{n + 1}", run="run", trigger="approval",
                 outcome="completed" if last else "awaiting_approval", answer="Fertig." if last else "Nächster.",
                 steps=[refusal(n), *model_round(n + 1)], pending=[] if last else [card(fields[n])])
    tour.add("tour_ended")
    tour.add("user_message", message=5, text="was ist hier passiert?", page=0)
    return tour.lines


def edited_chat(conversation: str = "conv-edit") -> list[dict[str, Any]]:
    """A chat whose first message is edited after a second one: the edit starts the last turn."""
    chat = Lines(conversation).add("conversation_started", kind="chat", owner=7)
    chat.add("user_message", message=1, text="Hallo", page=42)
    chat.add("segment_returned", segment="a/1", run="a", trigger="turn", outcome="completed", answer="Hi.",
             steps=model_round(1))
    chat.add("user_message", message=2, text="Und?", page=0)
    chat.add("message_edited", message=1, text="Hallo, Seite 42")
    return chat.lines


class ReadModelsContract:
    """What every backend must do. Subclasses implement `open_store` and `tables`."""

    shares_database = True

    def open_store(self) -> ConversationStore:
        raise NotImplementedError

    def tables(self, store: ConversationStore) -> set[str]:
        """Returns the names of the read-model tables the store's database holds."""
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> ConversationStore:
        return self.open_store()

    def second_store(self, store: ConversationStore) -> ConversationStore:
        return self.open_store() if self.shares_database else store

    def from_scratch(self, store: ConversationStore, conversation: str, rules: str) -> Row:
        events = store.events(conversation)
        return fold({}, ((0, e) for e in events), resolve(rules))[conversation_uuid(conversation)]

    # ------------------------------------------------------------------ reads

    def test_the_demos_latest_turn_is_what_the_fold_of_its_log_gives(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        models = ReadModels(store)

        turn = models.turn_input("conv-demo-seo")

        expected = build_turn_input(store.events("conv-demo-seo"), "2026-11-02")
        assert turn.notes == expected.notes and len(turn.notes) == 14
        assert turn.to_json() == expected.to_json()
        assert models.active_rules() == "2026-11-02"

    def test_a_second_reader_on_the_same_database_reads_the_same_rows(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        ReadModels(store).catch_up()

        other = ReadModels(self.second_store(store))

        assert other.catch_up() == 0
        assert other.state("conv-demo-seo") == ReadModels(store).state("conv-demo-seo")

    def test_a_turn_reads_an_event_appended_after_the_last_catch_up(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        models = ReadModels(store)
        assert models.turn_input("conv-demo-seo").message == 3

        later = Lines("conv-demo-seo")
        later.tick = 10**6
        ingest(store, later.add("user_message", message=4, text="und jetzt?", page=42).lines)

        turn = models.turn_input("conv-demo-seo")
        assert (turn.message, turn.messages[-1].text) == (4, "und jetzt?")
        assert turn.to_json() == build_turn_input(store.events("conv-demo-seo")).to_json()

    def test_a_nul_character_in_a_chat_text_is_kept_and_does_not_stop_the_projection(
        self, store: ConversationStore
    ) -> None:
        chat = Lines("conv-nul").add("conversation_started", kind="chat", owner=7)
        ingest(store, chat.add("user_message", message=1, text="a\u0000b", page=0).lines)
        models = ReadModels(store)
        assert models.turn_input("conv-nul").messages[-1].text == "a\u0000b"
        ingest(store, DEMO)
        assert models.turn_input("conv-demo-seo").message == 3
        assert models.rebuild("2026-11-01").conversations == 2

    def test_an_edit_in_one_batch_and_its_cut_in_the_next_start_the_latest_turn(
        self, store: ConversationStore
    ) -> None:
        ingest(store, edited_chat())
        models = ReadModels(store)
        models.batch_size = 1

        turn = models.turn_input("conv-edit")

        assert turn.message == 1
        assert turn.to_json() == build_turn_input(store.events("conv-edit")).to_json()

    def test_an_unknown_conversation_and_one_without_a_turn_are_told_apart(self, store: ConversationStore) -> None:
        ingest(store, Lines("quiet").add("conversation_started", kind="chat", owner=7).lines)
        models = ReadModels(store)

        assert models.state("nobody") is None
        with pytest.raises(UnknownConversation, match='no conversation "nobody"'):
            models.turn_input("nobody")
        with pytest.raises(NoTurnInEvents, match='"quiet" has no user message'):
            models.turn_input("quiet")
        assert models.state("quiet").transcript.kind == "chat"

    # ------------------------------------------------------------------ exactly once

    def test_catch_up_applies_each_event_once_in_notification_order(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        ingest(store, behalten_tour())
        models = ReadModels(store)
        models.batch_size = 7
        seen: list[tuple[int, int]] = []

        assert models.catch_up(lambda done, total: seen.append((done, total))) == store.max_notification_id()
        assert models.catch_up() == 0

        assert seen[-1] == (store.max_notification_id(),) * 2
        view = models.catalog.view(1)
        assert view.position() == store.max_notification_id()
        for conversation in ("conv-demo-seo", "conv-behalten"):
            row = view.row(conversation_uuid(conversation))
            assert row.version == len(store.events(conversation))
            assert row.state == self.from_scratch(store, conversation, "2026-11-02").state

    def test_a_crash_before_commit_applies_nothing_and_the_rerun_applies_each_event_once(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        ingest(store, DEMO)
        models = ReadModels(store)
        models.batch_size = 3
        commits = iter(range(100))

        def crash_in_second_batch(view: ReadModelsView, curs: Any) -> None:
            if next(commits) == 1:
                raise Crash("the process died after writing the rows, before the commit")

        monkeypatch.setattr(ReadModelsView, "_before_commit", crash_in_second_batch)
        with pytest.raises(Crash):
            models.catch_up()

        view = models.catalog.view(1)
        first_three = store.recorder.select_notifications(None, 3)
        assert view.position() == first_three[-1].id
        assert view.row(conversation_uuid("conv-demo-seo")).version == 3

        monkeypatch.undo()
        assert models.catch_up() == len(store.events("conv-demo-seo")) - 3
        row = view.row(conversation_uuid("conv-demo-seo"))
        assert row.version == len(store.events("conv-demo-seo"))
        assert row.state == self.from_scratch(store, "conv-demo-seo", "2026-11-02").state

    def test_reprocessing_an_old_position_is_refused_and_changes_nothing(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        models = ReadModels(store)
        models.catch_up()
        view = models.catalog.view(1)
        key = conversation_uuid("conv-demo-seo")
        end, before = view.position(), view.row(key)
        [(first_id, first)] = [(n.id, store.mapper.to_domain_event(n)) for n in store.recorder.select_notifications(None, 1)]

        def again(rows):
            return fold(rows, [(first_id, first)], resolve("2026-11-02"))

        with pytest.raises(IntegrityError):  # the tracking record does not advance
            view.fold_batch(end, Tracking(view.name, first_id), {key}, lambda rows: {})
        with pytest.raises(PositionMoved):  # the batch was read after another position
            view.fold_batch(0, Tracking(view.name, first_id), {key}, again)
        with pytest.raises(ReadModelOutOfStep):  # the row has that event already
            view.fold_batch(end, Tracking(view.name, end + 1), {key}, again)

        assert view.position() == end
        assert view.row(key) == before

    def test_a_concurrent_catch_up_does_not_apply_a_batch_twice(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        rival = ReadModels(self.second_store(store))
        models = ReadModels(store)
        recorder = store.recorder
        real = recorder.select_notifications
        raced: list[int] = []
        racing_now = False

        def racing(*args: Any, **kwargs: Any) -> Any:
            nonlocal racing_now
            page = real(*args, **kwargs)
            if page and not raced and not racing_now:  # the rival applies this very page before we write it
                racing_now = True
                raced.append(rival.catch_up())
            return page

        recorder.select_notifications = racing  # type: ignore[method-assign]
        try:
            applied = models.catch_up()
        finally:
            del recorder.select_notifications

        assert raced == [len(store.events("conv-demo-seo"))] and applied == 0
        row = models.catalog.view(1).row(conversation_uuid("conv-demo-seo"))
        assert row.version == len(store.events("conv-demo-seo"))
        assert row.state == self.from_scratch(store, "conv-demo-seo", "2026-11-02").state

    # ------------------------------------------------------------------ rebuild

    def test_rebuild_switches_to_fresh_tables_and_drops_the_old_generation(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        ingest(store, behalten_tour())
        models = ReadModels(store)
        models.catch_up()
        old_tables = self.tables(store)
        seen: list[tuple[int, int]] = []

        report = models.rebuild("2026-11-01", lambda done, total: seen.append((done, total)))

        assert (report.rules, report.old_rules, report.conversations) == ("2026-11-01", "2026-11-02", 2)
        assert report.events == store.max_notification_id() and seen[-1] == (report.events, report.events)
        assert models.active_rules() == ReadModels(self.second_store(store)).active_rules() == "2026-11-01"
        assert self.tables(store) == set(report.tables) and not old_tables & set(report.tables)
        assert set(report.dropped) == old_tables
        assert models.catalog.generations() == {2}
        for conversation in ("conv-demo-seo", "conv-behalten"):
            assert models.state(conversation) == self.from_scratch(store, conversation, "2026-11-01").state
            assert models.turn_input(conversation) == build_turn_input(store.events(conversation), "2026-11-01")

    def test_after_a_rebuild_new_events_are_applied_under_the_new_rule_set(self, store: ConversationStore) -> None:
        ingest(store, behalten_tour())
        models = ReadModels(store)
        models.rebuild("2026-11-01")

        ingest(store, DEMO)

        assert models.turn_input("conv-demo-seo") == build_turn_input(store.events("conv-demo-seo"), "2026-11-01")

    def test_a_read_racing_a_rebuild_is_served_by_the_new_generation(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        models = ReadModels(store)
        models.catch_up()
        ingest(store, behalten_tour())
        rival = ReadModels(self.second_store(store))
        recorder = store.recorder
        real = recorder.select_notifications
        rebuilt: list[object] = []

        def racing(*args: Any, **kwargs: Any) -> Any:
            page = real(*args, **kwargs)
            if page and not rebuilt:  # the rival switches generations before we write this page
                rebuilt.append("started")
                rebuilt.append(rival.rebuild("2026-11-01"))
            return page

        recorder.select_notifications = racing  # type: ignore[method-assign]
        try:
            turn = models.turn_input("conv-behalten")
        finally:
            del recorder.select_notifications

        assert rebuilt[-1].dropped and models.catalog.generations() == {2}
        assert turn == build_turn_input(store.events("conv-behalten"), "2026-11-01")

    def test_a_rebuild_under_an_unknown_rule_set_changes_nothing(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        models = ReadModels(store)
        models.catch_up()
        tables = self.tables(store)

        with pytest.raises(UnknownRuleSet):
            models.rebuild("2026-12-24")

        assert self.tables(store) == tables and models.active_rules() == "2026-11-02"

    # ------------------------------------------------------------------ diff

    def test_diff_after_three_behalten_lists_the_refused_calls_no_longer_failed(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        ingest(store, behalten_tour())
        models = ReadModels(store)
        models.rebuild("2026-11-01")
        tables, position = self.tables(store), models.catalog.view(2).position()

        diffs = {d.conversation: d for d in models.diff("2026-11-02")}

        tour = diffs["conv-behalten"]
        assert tour.changed and not diffs["conv-demo-seo"].changed
        assert [segment for segment, _, _ in tour.records_changed] == ["run/2", "run/3", "run/4"]
        for _, before, after in tour.records_changed:
            assert {"name": "update_page_metadata", "calls": 1, "failed": 1} in before["tools"]
            assert not any(t["name"] == "update_page_metadata" for t in after["tools"])
        assert len(tour.notes_removed) == 3 and all("1 failed" in n for n in tour.notes_removed)
        assert len(tour.notes_added) == 3 and not any("failed" in n for n in tour.notes_added)
        after = build_turn_input(store.events("conv-behalten"), "2026-11-02").notes
        assert set(tour.notes_added) <= set(after)
        # nothing switched, nothing written
        assert models.active_rules() == "2026-11-01"
        assert self.tables(store) == tables and models.catalog.view(2).position() == position

    def test_diff_under_the_live_rule_set_changes_nothing(self, store: ConversationStore) -> None:
        ingest(store, DEMO)
        ingest(store, behalten_tour())

        diffs = ReadModels(store).diff("2026-11-02")

        assert [d.conversation for d in diffs] == ["conv-demo-seo", "conv-behalten"]
        assert not any(d.changed for d in diffs)


# ---------------------------------------------------------------------- backends


class TestInMemoryReadModels(ReadModelsContract):
    shares_database = False

    def open_store(self) -> ConversationStore:
        return ConversationStore(env=memory_env())

    def tables(self, store: ConversationStore) -> set[str]:
        catalog = ReadModels(store).catalog
        return {t for g in catalog.generations() for t in catalog.view(g).tables}


class TestSQLiteReadModels(ReadModelsContract):
    @pytest.fixture(autouse=True)
    def _database(self, tmp_path: Path) -> Iterator[None]:
        self.path = tmp_path / "chatrecord.sqlite"
        self.stores: list[ConversationStore] = []
        yield
        for store in self.stores:
            store.close()

    def open_store(self) -> ConversationStore:
        store = ConversationStore(env=sqlite_env(self.path))
        self.stores.append(store)
        return store

    def tables(self, store: ConversationStore) -> set[str]:
        with sqlite3.connect(self.path) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            tracked = {r[0] for r in conn.execute("SELECT application_name FROM tracking")}
        assert "chatrecord_projection" in names and "stored_events" in names
        for name in names:  # every generation's rows table has its tracking row, and only those
            if name.startswith("readmodels_g"):
                assert name.removesuffix("_conversations") in tracked
        assert {t for t in tracked if t.startswith("readmodels_g")} == {
            n.removesuffix("_conversations") for n in names if n.startswith("readmodels_g")
        }
        return {n for n in names if n.startswith("readmodels_")}


class TestPostgresReadModels(ReadModelsContract):
    @pytest.fixture(autouse=True)
    def _database(self, postgres_url: str, postgres_schema: str) -> Iterator[None]:
        self.url, self.schema = postgres_url, postgres_schema
        self.stores: list[ConversationStore] = []
        yield
        for store in self.stores:
            store.close()

    def open_store(self) -> ConversationStore:
        env = {**postgres_env(self.url), "POSTGRES_SCHEMA": self.schema, "POSTGRES_POOL_SIZE": "1"}
        store = ConversationStore(env=env)
        self.stores.append(store)
        return store

    def tables(self, store: ConversationStore) -> set[str]:
        with psycopg.connect(self.url) as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.schema,)
            ).fetchall()
        names = {r[0] for r in rows}
        assert "chatrecord_projection" in names and "conversationstore_events" in names
        return {n for n in names if n.startswith("readmodels_")}
