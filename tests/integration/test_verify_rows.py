"""`verify --rows` (`Chatrecord.verify_rows`): a read-model row rewritten in the database, its
version left as it was, is named by holding the rows against a fold of the log; a turn read
serves it (it does not fold the log, `adapters.views.verify_rows`), and a rebuild writes it again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from adapters.api import DEMO_FILE, Chatrecord, demo_lines
from adapters.store.application import ConversationStore
from domain.errors import UnknownConversation
from domain.events import conversation_uuid
from tests.integration.backends import PostgresStores, SQLiteStores

ROOT = Path(__file__).resolve().parents[2]
DEMO = conversation_uuid("conv-demo-seo")
REWRITE = 'UPDATE {entries} SET body = replace(body, \'"name":"get_page"\', \'"name":"delete_page"\') WHERE cid = {cid}'


class VerifyRowsContract:
    """Backends give `open_store` and `rewrite_entries(statement)` (REWRITE on their tables)."""

    def open_store(self) -> ConversationStore:
        raise NotImplementedError

    def rewrite_entries(self) -> int:
        raise NotImplementedError

    @pytest.fixture
    def chat(self) -> Chatrecord:
        chat = Chatrecord(self.open_store())
        chat.ingest(demo_lines(), DEMO_FILE)
        chat.ingest((ROOT / "tests/data/behalten_tour.jsonl").read_bytes().splitlines(), "behalten")
        return chat

    def test_rows_folded_from_the_log_verify(self, chat: Chatrecord) -> None:
        assert [(v.conversation, v.ok, v.version) for v in chat.verify_rows()] == [
            ("conv-behalten", True, 12),
            ("conv-demo-seo", True, 20),
        ]

    def test_a_rewritten_row_is_named_by_verify_rows_and_written_again_by_a_rebuild(self, chat: Chatrecord) -> None:
        assert "get_page" in " ".join(chat.turn_input("conv-demo-seo").notes)
        assert self.rewrite_entries() > 0

        found = {v.conversation: v for v in chat.verify_rows()}
        served = " ".join(chat.turn_input("conv-demo-seo").notes)

        assert (found["conv-demo-seo"].differs, found["conv-demo-seo"].version) == (("run record",), 20)
        assert found["conv-demo-seo"].line() == (
            "conv-demo-seo: rows differ from the fold of its log at version 20 (run record); run: chatrecord rebuild --rules 2026-11-02"
        )
        assert found["conv-behalten"].ok
        assert "delete_page" in served  # a turn read does not fold the log: it serves the row (documented)
        chat.rebuild(chat.active_rules())
        assert [v.ok for v in chat.verify_rows("conv-demo-seo")] == [True]
        assert "delete_page" not in " ".join(chat.turn_input("conv-demo-seo").notes)

    def test_an_unknown_conversation_is_named(self, chat: Chatrecord) -> None:
        with pytest.raises(UnknownConversation):
            list(chat.verify_rows("conv-nowhere"))


class TestSQLiteVerifyRows(SQLiteStores, VerifyRowsContract):
    def rewrite_entries(self) -> int:
        import sqlite3

        with sqlite3.connect(self.path) as conn:
            return conn.execute(REWRITE.format(entries="views_g1_entries", cid="?"), (str(DEMO),)).rowcount


class TestPostgresVerifyRows(PostgresStores, VerifyRowsContract):
    def rewrite_entries(self) -> int:
        query: Any = sql.SQL(REWRITE).format(entries=sql.Identifier(self.schema, "views_g1_entries"), cid=sql.Placeholder())
        with psycopg.connect(self.url) as conn:
            return conn.execute(query, (str(DEMO),)).rowcount
