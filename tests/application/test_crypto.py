"""The data keys and the master key: how keys are stored, and what a store without the right
master key can read."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import pytest

from adapters.backends.settings import memory_env, sqlite_env
from adapters.bootstrap import build_store, read_models
from adapters.service.erase import erase
from adapters.store import keys as data_keys
from adapters.store.application import ConversationStore
from adapters.store.crypto import ERASED, BadMasterKey, master_key
from domain import conversation as c
from domain.events import UserMessagePosted
from tests.integration.test_store import Command

MASTER = base64.b64encode(bytes(range(32))).decode()
OTHER = base64.b64encode(bytes(range(1, 33))).decode()


def story(store: ConversationStore, text: str = "Titel prüfen") -> None:
    store.handle(Command("conv-k", c.start_conversation, "conv-k", "chat", 7))
    store.handle(Command("conv-k", c.post_user_message, 1, text, 42, None))


def texts(store: ConversationStore) -> list[str]:
    return [e.text for e in store.events("conv-k") if isinstance(e, UserMessagePosted)]


def test_a_master_key_is_base64_of_32_bytes() -> None:
    assert master_key(MASTER) == bytes(range(32))
    assert master_key(MASTER.replace("+", "-").replace("/", "_")) == bytes(range(32))
    assert master_key("") is None and master_key(None) is None
    with pytest.raises(BadMasterKey, match="must be base64 of 32 bytes"):
        master_key(base64.b64encode(bytes(16)).decode())


def test_without_a_master_key_the_data_key_is_stored_unwrapped() -> None:
    store = build_store(memory_env())
    story(store)
    [(wrapped, erased_at)] = store.mapper.keys.rows.kept.values()  # type: ignore[attr-defined]
    assert (wrapped[:1], len(wrapped), erased_at) == (b"\x00", 33, None)


def test_a_master_key_wraps_the_data_key() -> None:
    store = build_store({**memory_env(), "CHATRECORD_MASTER_KEY": MASTER})
    story(store)
    [(wrapped, _)] = store.mapper.keys.rows.kept.values()  # type: ignore[attr-defined]
    assert (wrapped[:1], len(wrapped)) == (b"\x01", 1 + 12 + 32 + 16)
    assert texts(store) == ["Titel prüfen"]


def test_only_the_right_master_key_reads_the_texts(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite"
    story(build_store({**sqlite_env(path), "CHATRECORD_MASTER_KEY": MASTER}))
    assert texts(build_store({**sqlite_env(path), "CHATRECORD_MASTER_KEY": MASTER})) == ["Titel prüfen"]
    with pytest.raises(BadMasterKey, match="set CHATRECORD_MASTER_KEY"):
        texts(build_store({**sqlite_env(path), "CHATRECORD_MASTER_KEY": ""}))
    with pytest.raises(BadMasterKey, match="does not unwrap"):
        texts(build_store({**sqlite_env(path), "CHATRECORD_MASTER_KEY": OTHER}))
    with sqlite3.connect(path) as conn:
        [(wrapped,)] = conn.execute("SELECT wrapped_key FROM chatrecord_keys").fetchall()
    assert wrapped[:1] == b"\x01"


def test_another_process_reading_texts_sees_them_erased_once_its_cached_key_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data_keys, "KEY_CACHE_SECONDS", 0.0)  # expired at once: no waiting in a test
    path = tmp_path / "k.sqlite"
    reader = build_store(sqlite_env(path))
    story(reader)
    assert texts(reader) == ["Titel prüfen"]
    eraser = build_store(sqlite_env(path))  # another process
    erase(eraser, "conv-k", read_models(eraser))
    assert texts(reader) == [ERASED]


def test_the_python_api_verifies_and_erases() -> None:
    from adapters.api import Chatrecord
    from adapters.bootstrap import open_store

    record = Chatrecord(open_store(memory=True))
    at = "2026-11-02T10:00:00Z"
    record.record({"type": "conversation_started", "conversation": "conv-7", "at": at, "kind": "chat", "owner": 7})
    record.record({"type": "user_message", "conversation": "conv-7", "at": at, "message": 1, "text": "Titel prüfen", "page": 42})
    assert [(v.conversation, v.ok, v.version) for v in record.verify()] == [("conv-7", True, 2)]
    assert record.erase("conv-7").recorded
    assert [m.text for m in record.turn_input("conv-7").messages if m.role == "user"] == [ERASED]
    assert [(v.ok, v.version) for v in record.verify("conv-7")] == [(True, 3)]


def test_a_text_for_an_erased_conversation_is_refused_naming_the_line_and_the_field() -> None:
    from adapters.api import Chatrecord
    from adapters.bootstrap import open_store
    from adapters.store.crypto import TextsErased

    record = Chatrecord(open_store(memory=True))
    at = "2026-11-02T10:00:00Z"
    record.record({"type": "conversation_started", "conversation": "priv", "at": at, "kind": "chat", "owner": 7})
    record.record({"type": "user_message", "conversation": "priv", "at": at, "message": 1, "text": "geheim", "page": 0})
    record.erase("priv")
    lines = [
        f'{{"type": "turn_retried", "conversation": "priv", "at": "{at}", "message": 1}}',
        f'{{"type": "segment_returned", "conversation": "priv", "at": "{at}", "segment": "r/1", "run": "r", '
        '"trigger": "retry", "outcome": "completed", "answer": "neu"}',
    ]
    with pytest.raises(TextsErased) as refused:
        record.record_lines(lines, "batch")
    assert str(refused.value) == "batch: line 2, answer: conversation 'priv' was erased; no text can be stored for it"
    assert refused.value.field == "answer"
    with pytest.raises(TextsErased) as refused:
        record.record({"type": "message_edited", "conversation": "priv", "at": at, "message": 1, "text": "neu"})
    assert str(refused.value) == "api: line 3, text: conversation 'priv' was erased; no text can be stored for it"
    assert len(record.store.events("priv")) == 3  # nothing of either was stored
    record.record_lines(lines[:1], "facts")  # a line without text is stored as before
    assert len(record.store.events("priv")) == 4


def test_verify_lists_the_conversations_in_the_order_of_their_ids() -> None:
    from adapters.api import Chatrecord
    from adapters.bootstrap import open_store
    from domain.events import conversation_uuid

    record = Chatrecord(open_store(memory=True))
    ids = [f"conv-{i:02d}" for i in range(12)] + ["Conv-Z", "chat 17"]
    assert sorted(ids, key=conversation_uuid) != sorted(ids)  # the log's own order is another
    for conversation in reversed(ids):
        record.record(
            {
                "type": "conversation_started",
                "conversation": conversation,
                "at": "2026-11-02T10:00:00Z",
                "kind": "chat",
                "owner": 7,
            }
        )
    listed = [v.conversation for v in record.verify()]
    assert listed == sorted([f"conv-{i:02d}" for i in range(12)] + ["Conv-Z", "chat17:h9a90eaf363ff759f"])
    assert listed[:2] == ["Conv-Z", "chat17:h9a90eaf363ff759f"]
    assert [v.conversation for v in record.verify("chat 17")] == ["chat17:h9a90eaf363ff759f"]
