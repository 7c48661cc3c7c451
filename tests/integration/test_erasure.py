"""Crypto-shredding, once per backend: unique strings planted in every free-text field are
stored encrypted; after `erase` none of them is left in the database's bytes (the SQLite file
and its WAL; every table of the PostgreSQL schema dumped as text) nor in what the store gives
out, the facts stay, the chain still verifies, and a rerun after a crash finishes the job."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg import sql

from adapters.api import Chatrecord
from adapters.backends.settings import memory_env
from adapters.bootstrap import build_store, read_models, read_models_for
from adapters.ingest import parse_line
from adapters.service.erase import EraseTexts, erase
from adapters.store.application import ConversationStore
from adapters.store.crypto import ERASED, FREE_TEXT, MissingDataKey, TextsErased
from adapters.store.keys import DataKeys
from adapters.store.line_digests import digest_keyer
from adapters.store.verify import verdicts
from adapters.views.readmodels import ReadModels
from adapters.views.verify_rows import check_rows
from domain.errors import ChatrecordError
from domain.events import EVENT_TYPES, conversation_uuid
from domain.events import ConversationErased as Erased
from projections.audit import audit
from projections.turn import replay_json, replay_turns
from tests.integration.backends import PostgresStores, SQLiteStores

AT = "2026-11-02T10:00:00Z"
CONVERSATIONS = ("conv-erase", "conv-erase-alt", "conv-erase-legacy")


def plant(name: str) -> str:
    return f"PLANT-{name}-q7Zx"


def planted_lines() -> list[dict[str, Any]]:
    """Lines that put a unique string into every free-text field of every event class."""

    def line(conversation: str, line_type: str, **fields: Any) -> dict[str, Any]:
        return {"type": line_type, "conversation": conversation, "at": AT, **fields}

    c, alt, legacy = CONVERSATIONS
    write = {
        "kind": "tool_write",
        "round": 1,
        "durationMs": 12.5,
        "toolName": "update_page_metadata",
        "writeTargetTable": "pages",
        "writeTargetUid": 42,
        "writeCompleteness": "complete",
    }
    return [
        line(c, "conversation_started", kind="chat", owner=7),
        line(c, "user_message", message=1, text=plant("user-message"), page=42, skill="3:seo-optimieren"),
        line(
            c,
            "segment_returned",
            segment="r1/1",
            run="r1",
            trigger="turn",
            outcome="awaiting_approval",
            answer=plant("answer-one"),
            steps=[],
            pending=[{"toolName": "update_page_metadata", "table": "pages", "uid": 42, "fields": ["title"]}],
        ),
        line(c, "card_decided", segment="r1/1", approved=True, answer="Übernehmen", message=2, text=plant("card-label")),
        line(
            c,
            "segment_returned",
            segment="r1/2",
            run="r1",
            trigger="approval",
            outcome="awaiting_input",
            answer=plant("answer-two"),
            steps=[write],
            pending=[{"toolName": "ask_choice"}],
        ),
        line(c, "question_answered", segment="r1/2", message=3, text=plant("question-answer")),
        line(
            c,
            "segment_returned",
            segment="r1/3",
            run="r1",
            trigger="answer",
            outcome="completed",
            answer=plant("answer-three"),
            steps=[],
        ),
        line(c, "user_message", message=4, text=plant("second-message"), page=0),
        line(c, "message_edited", message=4, text=plant("edited-text")),
        line(alt, "conversation_started", kind="alt_text", owner=7),
        line(
            alt,
            "transcript_replaced",
            messages=[{"role": "user", "text": plant("alt-user")}, {"role": "assistant", "text": plant("alt-assistant")}],
        ),
        line(legacy, "conversation_started", kind="chat", owner=7),
        line(
            legacy,
            "legacy_row",
            messages=[{"role": "user", "text": plant("legacy-user")}, {"role": "assistant", "text": plant("legacy-assistant")}],
            card_outcomes=[],
        ),
    ]


PLANTS = [
    plant(n)
    for n in (
        "user-message",
        "answer-one",
        "card-label",
        "answer-two",
        "question-answer",
        "answer-three",
        "second-message",
        "edited-text",
        "alt-user",
        "alt-assistant",
        "legacy-user",
        "legacy-assistant",
    )
]


def test_every_free_text_field_of_every_event_is_encrypted() -> None:
    """A str field of an event is either a free text (FREE_TEXT) or one of these facts."""
    facts = {
        "source",
        "conversation",
        "skill",
        "segment",
        "run",
        "outcome",
        "answer@CardDecided",
        "trigger",
        "kind",
        "waiting_kind",
        "reason",
        "cut_segments",
        "cut_cards",
        "model",  # names, as a skill is: the model and provider a segment ran with
        "provider",
    }
    for cls in EVENT_TYPES:
        texts = {path.split(".")[0] for path in FREE_TEXT.get(cls, ())}
        for name, info in cls.model_fields.items():
            annotation = str(info.annotation)
            if "str" in annotation or "TranscriptLine" in annotation:
                assert name in texts or name in facts or f"{name}@{cls.__name__}" in facts, (cls.__name__, name)


class ErasureContract:
    """Tests; backends say how to open a store and how to read every byte it keeps."""

    def open_store(self) -> ConversationStore:
        raise NotImplementedError

    def database_bytes(self, store: ConversationStore) -> bytes:
        raise NotImplementedError

    def event_bytes(self, store: ConversationStore) -> bytes:
        notifications = store.recorder.select_notifications(None, 100_000)
        return b"\n".join(n.state for n in notifications)

    @pytest.fixture
    def store(self) -> ConversationStore:
        store = self.open_store()
        report = Chatrecord(store).ingest([json.dumps(line) for line in planted_lines()], "planted")
        assert report.stopped is None
        read_models(store).catch_up()
        return store

    def outputs(self, store: ConversationStore) -> str:
        shown = []
        for conversation in CONVERSATIONS:
            events = store.events(conversation)
            shown.append(json.dumps(replay_json(conversation, "2026-11-02", replay_turns(events, "2026-11-02"))))
            shown.append(json.dumps([row.to_json() for row in audit(events, "2026-11-02")]))
            state = read_models(store).state(conversation)
            shown.append(state.model_dump_json() if state else "")
        shown += [v.line() for v in verdicts(store)]
        return "\n".join(shown)

    def test_texts_are_stored_encrypted_and_read_back(self, store: ConversationStore) -> None:
        stored = self.event_bytes(store)
        assert [p for p in PLANTS if p.encode() in stored] == []
        assert all(p in self.outputs(store) for p in PLANTS if "legacy" not in p and "alt" not in p)

    def test_after_erasing_no_planted_text_is_left_anywhere(self, store: ConversationStore) -> None:
        assert all(p in self.outputs(store) for p in PLANTS if "legacy" not in p and "alt" not in p)
        for conversation in CONVERSATIONS:
            done = erase(store, conversation, read_models(store))
            assert done.recorded
        found = self.database_bytes(store)
        assert [p for p in PLANTS if p.encode() in found] == []
        shown = self.outputs(store)
        assert [p for p in PLANTS if p in shown] == []
        assert ERASED in shown
        assert all(v.ok for v in verdicts(store))

    def test_the_facts_stay_and_the_erasure_is_an_event_with_its_time(self, store: ConversationStore) -> None:
        before = [r.to_json() for r in audit(store.events("conv-erase"), "2026-11-02")]
        done = erase(store, "conv-erase", read_models(store))
        events = store.events("conv-erase")
        assert isinstance(events[-1], Erased) and events[-1].timestamp == done.at
        after = [r.to_json() for r in audit(events, "2026-11-02")]
        assert after[:-1] == before and after[-1]["kind"] == "erased"
        written = [r["written"] for r in after if r["kind"] == "segment" and r["written"]]
        assert written == [[{"record": "pages:42", "completeness": "complete", "hook_failed": False}]]

    def test_erasing_again_changes_nothing(self, store: ConversationStore) -> None:
        first = erase(store, "conv-erase", read_models(store))
        again = erase(store, "conv-erase", read_models(store))
        assert (again.recorded, again.at, again.version) == (False, first.at, first.version)
        assert sum(isinstance(e, Erased) for e in store.events("conv-erase")) == 1

    @pytest.mark.parametrize("crash_in", ["keys", "views", "scrub"])
    def test_a_rerun_after_a_crash_finishes_the_erasure(
        self, store: ConversationStore, crash_in: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        class Killed(Exception):
            pass

        def killed(*args: Any, **kwargs: Any) -> None:
            raise Killed

        keys = type(store.mapper.keys)  # type: ignore[attr-defined]
        assert issubclass(keys, DataKeys)
        target = {"keys": (keys, "erase"), "views": (ReadModels, "erase"), "scrub": (keys, "scrub")}[crash_in]
        with monkeypatch.context() as patch:
            patch.setattr(*target, killed)
            with pytest.raises(Killed):
                erase(store, "conv-erase", read_models(store))
        # until the rerun, the audit says the erasure has not finished where its key is still there
        chat = Chatrecord(store)

        def listed_erased() -> bool:
            return next(c.erased for c in chat.conversations(limit=1000).conversations if c.conversation == "conv-erase")

        assert chat.audit("conv-erase").erasure_unfinished is (crash_in == "keys")
        assert listed_erased() is (crash_in != "keys")  # its texts read [erased] only once the key is gone
        rerun = erase(store, "conv-erase", read_models(store))
        assert chat.audit("conv-erase").erasure_unfinished is False
        assert listed_erased() is True
        assert (rerun.recorded, rerun.finished) == (False, crash_in == "keys")  # killed before the key went: finished now
        assert sum(isinstance(e, Erased) for e in store.events("conv-erase")) == 1
        assert erase(store, "conv-erase", read_models(store)).finished is False  # every step done: nothing left
        found = self.database_bytes(store)
        assert [p for p in PLANTS[:8] if p.encode() in found] == []

    def test_an_erased_conversation_takes_no_new_text(self, store: ConversationStore) -> None:
        erase(store, "conv-erase", read_models(store))
        line = {"type": "user_message", "conversation": "conv-erase", "at": AT, "message": 5, "text": "neu", "page": 0}
        report = Chatrecord(store).ingest([json.dumps(line)], "late")
        assert isinstance(report.stopped, TextsErased)
        assert str(report.stopped) == "late: line 1, text: conversation 'conv-erase' was erased; no text can be stored for it"
        assert report.stopped.field == "text"
        assert not any(getattr(e, "text", None) == "neu" for e in store.events("conv-erase"))

    def test_no_line_digest_confirms_a_planted_text_before_or_after_erasing(self, store: ConversationStore) -> None:
        lines = [json.dumps(line) for line in planted_lines()]
        plain = [parse_line(text, n, "planted").digest for n, text in enumerate(lines, 1)]
        message = lines[1]  # the user message whose text is plant("user-message")
        assert plant("user-message") in message and len(set(plain)) == len(plain) == 13
        sources = {e.source for conversation in CONVERSATIONS for e in store.events(conversation)}
        assert len(sources) == 13 and all(len(s) == 32 for s in sources if s)
        assert sources.isdisjoint(plain)  # stored keyed: the plain digest of no line
        keys = store.data_keys
        assert keys is not None
        cid = conversation_uuid("conv-erase")
        keyed = digest_keyer(keys.key(cid, create=False))
        assert keyed is not None and keyed(plain[1]) in sources
        assert [d for d in plain if d.encode() in self.database_bytes(store)] == []
        assert Chatrecord(store).record(message).repeated  # the keyed digest still finds the line
        for conversation in CONVERSATIONS:
            erase(store, conversation, read_models(store))
        assert keys.key(cid, create=False) is None  # the key that keyed the digests is gone
        assert [d for d in plain if d.encode() in self.database_bytes(store)] == []
        assert all(v.ok for v in verdicts(store))

    def test_a_line_stored_with_its_plain_digest_before_is_still_recognised(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def line(number: int, **fields: Any) -> str:
            return json.dumps({"conversation": "conv-old", "at": AT, **fields} | ({"message": number} if number else {}))

        old = [
            line(0, type="conversation_started", kind="chat", owner=7),
            line(1, type="user_message", text="alt", page=0),
            line(0, type="segment_returned", segment="s1", run="r1", trigger="turn", outcome="completed", answer="ok"),
            line(2, type="user_message", text="auch alt", page=0),
        ]
        chat = Chatrecord(store)
        with monkeypatch.context() as patch:  # as a version before keyed digests stored them
            patch.setattr(ConversationStore, "_key_digests", lambda self, command, cid: None)
            assert chat.ingest(old, "old").appended == 4
        plain = [parse_line(text, n, "old").digest for n, text in enumerate(old, 1)]
        before = store.events("conv-old")
        assert [e.source for e in before] == plain
        assert plain[1].encode() in self.database_bytes(store)  # the legacy digest, kept where it was
        first = chat.record(old[1])  # decided on the writer's state and an assumed index, then read
        assert first.repeated and [e.originator_version for e in first.events] == [2]
        report = chat.ingest(old, "again")
        assert (report.appended, report.repeated) == (0, 4)
        assert chat.record_lines(old[2:], "again").repeated
        new = line(3, type="user_message", text="neu", page=0)
        assert chat.record(new).appended and chat.record(new).repeated
        after = store.events("conv-old")
        assert len(after) == 5 and after[-1].source not in plain and after[-1].source is not None
        assert all(v.ok for v in verdicts(store))

    def test_a_refused_line_of_no_conversation_makes_no_data_key(self, store: ConversationStore) -> None:
        keys = store.data_keys
        assert keys is not None
        line = {"type": "user_message", "conversation": "conv-none", "at": AT, "message": 1, "text": "x", "page": 0}
        with pytest.raises(ChatrecordError, match="user message 1 waits for conversation_started"):
            Chatrecord(store).record(json.dumps(line))
        with pytest.raises(MissingDataKey):  # nothing is stored from a refused line, not even a key
            keys.key(conversation_uuid("conv-none"), create=False)
        assert store.events("conv-none") == []

    def test_other_conversations_keep_their_texts(self, store: ConversationStore) -> None:
        erase(store, "conv-erase", read_models(store))
        texts = [line.text for line in store.events("conv-erase-alt")[1].messages]  # type: ignore[attr-defined]
        assert texts == [plant("alt-user"), plant("alt-assistant")]
        assert store.mapper.keys.key(conversation_uuid("conv-erase-alt"), create=False) is not None  # type: ignore[attr-defined]


class TestInMemoryErasure(ErasureContract):
    def open_store(self) -> ConversationStore:
        return build_store({**memory_env(), "SNAPSHOT_INTERVAL": "2"})

    def database_bytes(self, store: ConversationStore) -> bytes:
        keys = store.mapper.keys  # type: ignore[attr-defined]
        rows = [repr(r).encode() for r in keys.rows.kept.values()]
        models = read_models(store)
        states = [models.state(c) for c in CONVERSATIONS]
        index = [repr(h.sources).encode() for h in store.history.memory.values()]  # type: ignore[attr-defined]
        return b"\n".join([self.event_bytes(store), *rows, *index, *(s.model_dump_json().encode() for s in states if s)])


class AtRestContract(ErasureContract):
    """What a store that keeps its rows in a database file or server holds at rest."""

    def test_a_writer_holding_the_key_stores_no_text_once_the_log_records_the_erasure(self, store: ConversationStore) -> None:
        from adapters.service.erase import EraseTexts

        writer = Chatrecord(self.open_store())  # another process, its data key kept
        first = {"type": "user_message", "conversation": "conv-erase", "at": AT, "message": 5, "text": "vorher", "page": 0}
        assert writer.record(first).appended
        store.handle(EraseTexts("conv-erase"))  # erase's first step, its key not yet deleted
        late = {"type": "user_message", "conversation": "conv-erase", "at": AT, "message": 6, "text": "danach", "page": 0}
        with pytest.raises(TextsErased) as refused:
            writer.record(late)
        assert str(refused.value) == "api: line 2, text: conversation 'conv-erase' was erased; no text can be stored for it"
        assert [type(e).__name__ for e in store.events("conv-erase")][-2:] == ["UserMessagePosted", "ConversationErased"]
        assert writer.record({"type": "turn_retried", "conversation": "conv-erase", "at": AT, "message": 5}).appended

    def test_the_read_models_keep_no_readable_text(self, store: ConversationStore) -> None:
        # the transcript rows hold their texts sealed with the conversation's key, as the log does
        assert [p for p in PLANTS if p.encode() in self.database_bytes(store)] == []
        assert all(p in self.outputs(store) for p in PLANTS if "legacy" not in p and "alt" not in p)

    def test_a_turn_reads_kept_messages_give_no_text_after_an_erasure(self, store: ConversationStore) -> None:
        models = read_models(store)
        models.turn_notes("conv-erase")  # keeps the messages it placed its notes beside
        key = conversation_uuid("conv-erase")
        with models.storage.transaction(write=False) as curs:
            rows = models.storage.rows(curs, models.storage.pointer(curs).generation, key)  # type: ignore[union-attr]
            bodies = [r["body"] for r in rows._q(rows.s.messages).fetchall()]
            assert any(p in m.text for m in rows._decode_messages(bodies, models.cache.messages) for p in PLANTS)
            assert any(models.cache.messages.get(str(key), body) is not None for body in bodies)
            erase(store, "conv-erase", read_models_for(store))  # through another ReadModels: this one's kept messages stay
            assert [m.text for m in rows._decode_messages(bodies, models.cache.messages)] == [ERASED] * len(bodies)
        erase(store, "conv-erase", models)  # in this process: they go
        assert all(models.cache.messages.get(str(key), body) is None for body in bodies)

    def test_a_turn_input_read_again_gives_no_text_after_an_erasure_elsewhere(self, store: ConversationStore) -> None:
        models = read_models(store)
        first = models.turn_input("conv-erase")
        assert [p for p in PLANTS if p in json.dumps(first.to_json())] != []
        again = models.turn_input("conv-erase")  # its bodies decoded and its notes rendered before: kept
        assert again.to_json() == first.to_json()
        erase(store, "conv-erase", read_models_for(store))  # through another ReadModels: this one's caches stay
        after = json.dumps(models.turn_input("conv-erase").to_json())
        assert [p for p in PLANTS if p in after] == []
        assert ERASED in after

    def test_a_writer_that_read_between_an_erasures_steps_reads_the_rows_folded_again(self, store: ConversationStore) -> None:
        writer = read_models(store)  # the store's own: its appends go through it
        writer.turn_notes("conv-erase")
        store.handle(EraseTexts("conv-erase"))  # step 1 alone: an erase killed after its event
        kept = writer.turn_notes("conv-erase").to_json()  # read and kept at the erasure's version
        erase(store, "conv-erase", read_models_for(store))  # run again elsewhere: key deleted, rows folded again in place
        fresh = read_models_for(store).turn_notes("conv-erase").to_json()
        assert fresh != kept  # the rows changed at the same version: the notes' places in the erased texts
        assert writer.turn_notes("conv-erase").to_json() == fresh

    def test_answers_joined_into_one_message_read_as_the_logs_fold_after_an_erasure(self, store: ConversationStore) -> None:
        def line(line_type: str, minute: int, **fields: Any) -> str:
            return json.dumps({"type": line_type, "conversation": "conv-joined", "at": f"2026-11-02T10:0{minute}:00Z", **fields})

        def segment(n: int, minute: int) -> str:
            step = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
            return line(
                "segment_returned", minute, segment=f"r{n}/1", run=f"r{n}", trigger="turn", outcome="completed",
                answer=plant(f"joined-{n}"), steps=[step],
            )  # fmt: skip

        lines = [
            line("conversation_started", 0, kind="chat", owner=7),
            line("user_message", 1, message=1, text=plant("joined-question"), page=42),
            segment(1, 2),
            segment(2, 3),  # no user message between: its answer joins the first's message
            line("user_message", 4, message=2, text=plant("joined-next"), page=42),
        ]
        assert Chatrecord(store).ingest(lines, "joined").stopped is None
        models = read_models(store)
        erase(store, "conv-joined", models)
        assert check_rows(models, "conv-joined").ok  # the joined message as the log reads it: ERASED, JOIN, ERASED
        from_rows = models.turn_input("conv-joined")
        assert from_rows.to_json() == replay_turns(store.events("conv-joined"))[-1].to_json()
        assert [n.at for n in models.turn_notes("conv-joined").notes] == [len(ERASED), 2 * len(ERASED) + 2]
        assert [p for p in PLANTS + [plant(f"joined-{n}") for n in (1, 2)] if p in json.dumps(from_rows.to_json())] == []


class TestSQLiteErasure(SQLiteStores, AtRestContract):
    def open_store(self) -> ConversationStore:  # type: ignore[override]
        return super().open_store(SNAPSHOT_INTERVAL="2")

    def database_bytes(self, store: ConversationStore) -> bytes:
        import sqlite3

        with sqlite3.connect(self.path) as conn:
            conn.execute("PRAGMA wal_checkpoint(FULL)")
        files = [self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm", "-journal"))]
        return b"".join(f.read_bytes() for f in files if f.exists())


class TestPostgresErasure(PostgresStores, AtRestContract):
    def open_store(self) -> ConversationStore:  # type: ignore[override]
        return super().open_store(POSTGRES_POOL_SIZE="2", SNAPSHOT_INTERVAL="2")

    def database_bytes(self, store: ConversationStore) -> bytes:
        """Every table of the schema, each row as text (bytea as hex and as its bytes)."""
        chunks: list[bytes] = []
        with psycopg.connect(self.url) as conn:
            tables = [
                r[0]
                for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.schema,))
            ]
            assert {"chatrecord_chain", "chatrecord_keys", "conversationstore_events"} <= set(tables)
            for table in tables:
                for row in conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(self.schema, table))):
                    for value in row:
                        chunks.append(bytes(value) if isinstance(value, (bytes, memoryview)) else str(value).encode())
        return b"\n".join(chunks)
