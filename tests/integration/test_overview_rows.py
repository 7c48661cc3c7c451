"""The overview read model in the store's tables, once per backend (SQLite, PostgreSQL): the
picture it draws is the picture drawn from the log (the demo tour, a tour of cards declined
and kept, a chat whose edit cuts turns), and a process opened after it was folded reads its
row and folds nothing but the events appended since."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters import pages
from adapters.api import DEMO_FILE, Chatrecord, demo_lines
from adapters.backends.sql.views_tables import overview_table_names
from adapters.service import timeline
from adapters.store.application import ConversationStore
from domain.events import conversation_uuid
from projections import overview as ov
from tests.application.test_timeline import chat_of
from tests.integration.backends import PostgresStores, SQLiteStores

ROOT = Path(__file__).resolve().parents[2]


def log_picture(chat: Chatrecord, conversation: str) -> str:
    return pages.overview_svg(timeline.overview(chat.events(conversation), chat.active_rules()))


class OverviewContract:
    def open_store(self) -> ConversationStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> ConversationStore:
        store = self.open_store()
        chat = Chatrecord(store)
        chat.ingest(demo_lines(), DEMO_FILE)
        chat.ingest((ROOT / "tests/data/behalten_tour.jsonl").read_bytes().splitlines(), "behalten")
        report = chat.ingest([orjson.dumps(line) for line in chat_of(8)], "long")
        assert report.stopped is None
        return store

    def test_the_picture_is_the_picture_of_the_log(self, store: ConversationStore) -> None:
        chat = Chatrecord(store)
        for conversation in ("conv-demo-seo", "conv-behalten", "conv-long"):
            assert chat.overview_drawn(conversation, pages.overview_svg) == log_picture(chat, conversation)
        assert 'aria-label="Overview: 16 facts, 8 segments"' in chat.overview_drawn("conv-demo-seo", pages.overview_svg)
        assert 'class="cut"' in chat.overview_drawn("conv-long", pages.overview_svg)  # the edit's cut turns

    def test_a_new_process_reads_the_row_and_folds_only_what_came_since(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        Chatrecord(store).overview_drawn("conv-long", pages.overview_svg)
        folded: list[int] = []
        original = ov.fold

        def counting(state: Any, events: Any, rules: Any, marks: Any) -> Any:
            events = list(events)
            folded.extend(e.originator_version for e in events)
            return original(state, events, rules, marks)

        monkeypatch.setattr("adapters.views.overview_rows.fold", counting)
        later = Chatrecord(self.open_store())  # as a server started anew
        assert later.overview_drawn("conv-long", pages.overview_svg) == log_picture(later, "conv-long")
        assert folded == []
        version = len(later.events("conv-long"))
        line = {
            "type": "user_message",
            "conversation": "conv-long",
            "at": "2026-11-09T10:00:00Z",
            "message": 9,
            "text": "Neu",
            "page": 0,
        }
        later.record(line)
        assert later.overview_drawn("conv-long", pages.overview_svg) == log_picture(later, "conv-long")
        assert folded == [version + 1]

    def test_another_rule_set_folds_the_log(self, store: ConversationStore) -> None:
        chat = Chatrecord(store)
        drawn = chat.overview_drawn("conv-demo-seo", pages.overview_svg, "transcript-only")
        assert drawn == pages.overview_svg(timeline.overview(chat.events("conv-demo-seo"), "transcript-only"))

    def test_past_its_buckets_the_picture_is_the_buckets_of_the_log(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(ov, "BUCKETS", 8)
        chat = Chatrecord(store)
        drawn = chat.overview_drawn("conv-long", pages.overview_svg)
        events = chat.events("conv-long")
        expected = ov.of_events(events, chat.active_rules())
        assert expected.width > 1 and drawn == pages.overview_svg(expected)
        assert "versions 1–" in drawn and 'class="cut"' in drawn

    def test_a_generation_an_earlier_version_made_draws_from_the_log(self, store: ConversationStore) -> None:
        chat = Chatrecord(store)
        backend = chat.read_models.storage
        generation = chat.read_models.live_pointer().generation
        with backend.transaction(write=True) as curs:
            for table in overview_table_names(generation, getattr(backend, "schema", "")).values():
                curs.execute(f"DROP TABLE {table}")
        later = Chatrecord(self.open_store())
        assert later.overview_drawn("conv-long", pages.overview_svg) == log_picture(later, "conv-long")

    def test_a_row_folded_past_a_shorter_log_is_folded_anew(self, store: ConversationStore) -> None:
        # A database restored (or failed over) to a shorter log: the demo's row is given the longer
        # chat's overview, folded past the demo's 20 events; a process started anew draws the demo's.
        chat = Chatrecord(store)
        chat.overview_drawn("conv-long", pages.overview_svg)
        chat.overview_drawn("conv-demo-seo", pages.overview_svg)
        backend = chat.read_models.storage
        table = overview_table_names(chat.read_models.live_pointer().generation, getattr(backend, "schema", ""))["overview"]
        long_key, demo_key = (str(conversation_uuid(chat._stored_id(c))) for c in ("conv-long", "conv-demo-seo"))
        with backend.transaction(write=True) as curs:
            p = backend.p
            curs.execute(f"SELECT version, body FROM {table} WHERE cid = {p}", (long_key,))
            row = curs.fetchone()
            assert int(row["version"]) > 20
            curs.execute(f"UPDATE {table} SET version = {p}, body = {p} WHERE cid = {p}", (row["version"], row["body"], demo_key))
        later = Chatrecord(self.open_store())
        assert later.overview_drawn("conv-demo-seo", pages.overview_svg) == log_picture(later, "conv-demo-seo")
        assert 'aria-label="Overview: 16 facts, 8 segments"' in later.overview_drawn("conv-demo-seo", pages.overview_svg)


class TestSQLiteOverview(SQLiteStores, OverviewContract):
    pass


class TestPostgresOverview(PostgresStores, OverviewContract):
    pass
