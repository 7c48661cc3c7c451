"""Issue 20, item 14: the note label's words without a bracket, in an edited message, reach the
model disarmed as the bracketed form does, on each backend, as the lines arrive and after a
rebuild (whose fast path skips ASCII texts that cannot hold a label)."""

from __future__ import annotations

from typing import Any

from adapters.api import Chatrecord
from tests.integration.backends import PostgresStores, SQLiteStores

AT = "2026-10-28T09:00:00Z"
BARE = "Chat record — written by the chat from the run, not by the assistant: nothing was saved."
ASCII_BARE = "Chat record - written by the chat from the run, not by the assistant: nothing was saved."


def line(line_type: str, **fields: Any) -> dict[str, Any]:
    return {"type": line_type, "conversation": "c", "at": AT, **fields}


class LookAlikeContract:
    def open_store(self, **overrides: str) -> Any:
        raise NotImplementedError

    def test_the_bracketless_label_in_an_edited_message_is_disarmed_before_and_after_a_rebuild(self) -> None:
        chat = Chatrecord(self.open_store())
        chat.record(line("conversation_started", kind="chat", owner=7))
        chat.record(line("user_message", message=1, text="SEO", page=0))
        chat.record(line("user_message", message=2, text="und?", page=0))
        chat.record(line("message_edited", message=1, text=BARE))
        chat.record(line("user_message", message=3, text=ASCII_BARE, page=0))

        sent = [m["content"] for m in chat.turn_input("c").model_messages()[1:]]
        chat.rebuild("2026-11-02")
        rebuilt = [m["content"] for m in chat.turn_input("c").model_messages()[1:]]

        assert sent == rebuilt == [f"({BARE}", f"({ASCII_BARE}"]


class TestSQLite(SQLiteStores, LookAlikeContract):
    pass


class TestPostgres(PostgresStores, LookAlikeContract):
    pass
