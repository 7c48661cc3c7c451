"""Ingesting in batches (issue 21, item 5) keeps every promise of the line-by-line ingest, on
SQLite and PostgreSQL: a bad line mid-batch stops there with every line before it stored and
nothing from it on (or is rejected alone under skip_bad); a repeat, of a whole file, within one
batch or across a batch's edge, is not stored twice; an ingest that failed mid-batch stored
its earlier batches whole and nothing of that batch, and running it again resumes with
nothing lost or doubled; lines of several conversations interleaved in one file are stored
as line by line stores them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import build_store
from adapters.store.application import ConversationStore
from adapters.store.chain import InlineWrites
from adapters.store.commands import BatchConflict
from tests.integration.backends import PostgresStores, SQLiteStores
from tests.line_sources import by_line

AT = "2026-10-28T09:00:00Z"
ROOT = Path(__file__).resolve().parents[2]


def export(cycles: int, conversations: int = 3) -> list[bytes]:
    """Returns a chat export: `conversations` conversations started, then `cycles` rounds of
    user message, segment awaiting approval, card decided, segment after the approval, each
    round for the next conversation in turn (their lines interleaved)."""
    names = [f"conv-{n}" for n in range(conversations)]
    lines: list[dict[str, Any]] = [
        {"type": "conversation_started", "conversation": c, "at": AT, "kind": "chat", "owner": 7} for c in names
    ]
    step = {
        "kind": "tool",
        "round": 1,
        "durationMs": 3.0,
        "toolName": "get_page",
        "toolIsError": False,
        "toolOutcome": "ok",
        "toolArguments": {"pageUid": 42},
        "toolResult": "kept out",
    }
    write = {
        "kind": "tool_write",
        "round": 1,  # the approved call runs at the round the run paused in
        "durationMs": 0.0,
        "toolName": "update_page_metadata",
        "writeTargetTable": "pages",
        "writeTargetUid": 42,
        "writeCompleteness": "complete",
    }
    for cycle in range(cycles):
        c, k = names[cycle % conversations], cycle // conversations + 1
        run = f"run-{k}"
        lines += [
            {"type": "user_message", "conversation": c, "at": AT, "message": k, "text": f"SEO {k}", "page": 42},
            {
                "type": "segment_returned",
                "conversation": c,
                "at": AT,
                "segment": f"{run}/1",
                "run": run,
                "trigger": "turn",
                "outcome": "awaiting_approval",
                "answer": "Ein Titel?",
                "steps": [step],
                "pending": [{"toolName": "update_page_metadata", "table": "pages", "uid": 42, "fields": ["title"]}],
            },
            {
                "type": "card_decided",
                "conversation": c,
                "at": AT,
                "segment": f"{run}/1",
                "approved": True,
                "answer": "Übernehmen",
            },
            {
                "type": "segment_returned",
                "conversation": c,
                "at": AT,
                "segment": f"{run}/2",
                "run": run,
                "trigger": "approval",
                "outcome": "completed",
                "answer": "Gespeichert.",
                "steps": [write, step],
            },
        ]
    return [orjson.dumps(line) + b"\n" for line in lines]


BAD_CARD = (
    orjson.dumps(
        {
            "type": "card_decided",
            "conversation": "conv-1",
            "at": AT,
            "segment": "no-such/1",
            "approved": True,
            "answer": "Übernehmen",
        }
    )
    + b"\n"
)
"""A line its conversation refuses: it decides a card of a segment that never came."""


def stored(store: ConversationStore) -> dict[str, list[dict[str, Any]]]:
    """Returns every conversation's events as dicts, by conversation id, each source as its line (`by_line`)."""
    return {c: by_line(store.events(c)) for c in store.conversation_ids()}


class BatchedIngestContract:
    """What a batched ingest keeps on each backend (`open_store` from the backend's mixin)."""

    def open_store(self, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    def fresh(self) -> Chatrecord:
        return Chatrecord(self.open_store())

    def test_interleaved_conversations_are_stored_as_line_by_line_stores_them(self) -> None:
        lines = export(30)  # 123 lines of three conversations, in batches of 50
        chatrecord = self.fresh()
        report = chatrecord.ingest(lines, "export.jsonl", batch_lines=50)
        expected = stored(chatrecord.store)

        assert (report.appended, report.repeated, report.lines, report.last_line, report.stopped) == (123, 0, 123, 123, None)
        assert [len(events) for events in expected.values()] == [41, 41, 41]
        assert all(v.ok for v in chatrecord.verify())
        other = self.fresh()  # the same database: a second ingest of the file line by line finds it all
        again = other.ingest(lines, "export.jsonl", batch_lines=1)
        assert (again.appended, again.repeated) == (0, 123)

    def test_a_batch_stores_what_line_by_line_stores(self) -> None:
        lines = export(30)
        batched = self.fresh()
        batched.ingest(lines, "export.jsonl", batch_lines=500)
        by_line = Chatrecord(self.open_other())
        by_line.ingest(lines, "export.jsonl", batch_lines=1)

        assert stored(batched.store) == stored(by_line.store)
        for c in ("conv-0", "conv-1", "conv-2"):  # the read models, written in the batch's transaction
            assert batched.turn_notes(c).to_json() == by_line.turn_notes(c).to_json()
            assert batched.turn_input(c).to_json() == by_line.turn_input(c).to_json()
            assert batched.read_models.summary(c) == by_line.read_models.summary(c)

    def open_other(self) -> ConversationStore:
        """A store in a database of its own (beside `open_store`'s)."""
        raise NotImplementedError

    def test_a_bad_line_mid_batch_stops_there_with_every_line_before_it_stored(self) -> None:
        lines = export(30)
        bad = [*lines[:60], BAD_CARD, *lines[60:]]  # line 61 of 124, mid-batch; later lines of every conversation
        chatrecord = self.fresh()
        report = chatrecord.ingest(bad, "export.jsonl", batch_lines=500)

        assert (report.stopped_at, report.appended, report.lines, report.last_line) == (61, 60, 60, 60)
        assert str(report.stopped).startswith("export.jsonl: line 61, segment: ")
        before = Chatrecord(self.open_other())
        before.ingest(lines[:60], "export.jsonl", batch_lines=1)
        assert stored(chatrecord.store) == stored(before.store)

    def test_a_bad_line_mid_batch_is_rejected_alone_under_skip_bad(self) -> None:
        lines = export(30)
        bad = [*lines[:60], BAD_CARD, *lines[60:]]
        chatrecord = self.fresh()
        report = chatrecord.ingest(bad, "export.jsonl", skip_bad=True, batch_lines=500)

        assert (report.stopped, report.appended, report.lines, report.last_line) == (None, 123, 123, 124)
        assert len(report.rejected) == 1 and report.rejected[0].startswith("export.jsonl: line 61, segment: ")
        whole = Chatrecord(self.open_other())
        whole.ingest(lines, "export.jsonl", batch_lines=1)
        assert stored(chatrecord.store) == stored(whole.store)

    def test_a_rejected_line_leaves_no_trace_in_the_verdicts_of_the_lines_after_it(self) -> None:
        """Found by a fresh user: under skip_bad, a line refused only as the store writes (a text
        for an erased conversation) was decided into the batch's state first, so a later line of
        the batch was rejected for it ("user message 4 is not after message 4"), while one line
        a batch gave the right reason. Each verdict is the one a batch of one line gives."""
        demo = (ROOT / "tests/data/demo_seo_tour.jsonl").read_bytes().splitlines()
        late = [
            orjson.dumps(line)
            for line in (
                {"type": "user_message", "conversation": "conv-demo-seo", "at": AT, "message": 4, "text": "geheim", "page": 0},
                {"type": "turn_retried", "conversation": "conv-demo-seo", "at": AT, "message": 4},
                {"type": "user_message", "conversation": "conv-demo-seo", "at": AT, "message": 4, "text": "", "page": 0},
            )
        ]
        verdicts = []
        for chatrecord, size in ((self.fresh(), 500), (Chatrecord(self.open_other()), 1)):
            chatrecord.ingest(demo, "demo.jsonl")
            chatrecord.erase("conv-demo-seo")
            report = chatrecord.ingest(late, "late.jsonl", skip_bad=True, batch_lines=size)
            assert (report.appended, len(report.rejected)) == (0, 3)
            verdicts.append(report.rejected)
        assert verdicts[0] == verdicts[1]
        assert verdicts[0][2] == "late.jsonl: line 3, text: conversation 'conv-demo-seo' was erased; no text can be stored for it"

    def test_a_line_that_does_not_parse_mid_batch_stops_there(self) -> None:
        lines = export(10)
        bad = [*lines[:20], b'{"type": "user_message", "conversation": "conv-0"\n', *lines[20:]]
        chatrecord = self.fresh()
        report = chatrecord.ingest(bad, "export.jsonl", batch_lines=500)

        assert (report.stopped_at, report.appended, report.last_line) == (21, 20, 20)
        assert sum(len(events) for events in stored(chatrecord.store).values()) == 20

    def test_a_repeat_of_a_whole_file_stores_nothing(self) -> None:
        lines = export(30)
        chatrecord = self.fresh()
        chatrecord.ingest(lines, "export.jsonl", batch_lines=50)
        position = chatrecord.health()
        report = chatrecord.ingest(lines, "export.jsonl", batch_lines=50)

        assert (report.appended, report.repeated, report.lines, report.stopped) == (0, 123, 123, None)
        assert chatrecord.health() == position

    def test_a_repeat_within_a_batch_and_across_its_edge_is_stored_once(self) -> None:
        lines = export(6)
        twice = [lines[0], lines[0], *lines[1:6], lines[4], *lines[6:]]  # line 1 again at once; line 5 again after 6
        chatrecord = self.fresh()
        report = chatrecord.ingest(twice, "export.jsonl", batch_lines=3)  # line 8 (the repeat of 5) in the third batch

        assert (report.appended, report.repeated) == (len(lines), 2)
        whole = Chatrecord(self.open_other())
        whole.ingest(lines, "export.jsonl", batch_lines=1)
        assert stored(chatrecord.store) == stored(whole.store)

    def test_a_failure_mid_batch_stores_nothing_of_it_and_a_rerun_resumes(self, monkeypatch: pytest.MonkeyPatch) -> None:
        lines = export(30)
        chatrecord = self.fresh()
        history = chatrecord.store.history
        write, calls = history.write, []

        def failing(*args: Any, **kwargs: Any) -> Any:  # inside the batch's transaction: its third batch fails
            calls.append(args[0])
            if len(calls) > 6:  # three conversations a batch
                raise RuntimeError("the process died here")
            return write(*args, **kwargs)

        monkeypatch.setattr(history, "write", failing)
        with pytest.raises(RuntimeError):
            chatrecord.ingest(lines, "export.jsonl", batch_lines=50)
        monkeypatch.undo()
        # two batches of 50 lines (three conversations each) are stored whole, nothing of the third
        assert sum(len(events) for events in stored(chatrecord.store).values()) == 100

        again = self.fresh()  # as a new process: nothing this one kept
        report = again.ingest(lines, "export.jsonl", batch_lines=50)
        assert (report.appended, report.repeated, report.stopped) == (23, 100, None)
        whole = Chatrecord(self.open_other())
        whole.ingest(lines, "export.jsonl", batch_lines=1)
        assert stored(again.store) == stored(whole.store)
        assert all(v.ok for v in again.verify())

    def test_a_batch_the_store_cannot_take_whole_is_stored_line_by_line(self, monkeypatch: pytest.MonkeyPatch) -> None:
        lines = export(10)
        chatrecord = self.fresh()

        def conflicting(commands: Any) -> Any:
            raise BatchConflict("another writer appended")

        monkeypatch.setattr(chatrecord.store, "handle_batch", conflicting)
        report = chatrecord.ingest(lines, "export.jsonl", batch_lines=50)

        assert (report.appended, report.repeated, report.lines, report.stopped) == (43, 0, 43, None)
        whole = Chatrecord(self.open_other())
        whole.ingest(lines, "export.jsonl", batch_lines=1)
        assert stored(chatrecord.store) == stored(whole.store)


class TestSQLiteBatchedIngest(SQLiteStores, BatchedIngestContract):
    def open_other(self) -> ConversationStore:
        from adapters.backends.settings import sqlite_env

        return self._kept(build_store(sqlite_env(self.path.with_name("other.sqlite"))))


class TestPostgresBatchedIngest(PostgresStores, BatchedIngestContract):
    @pytest.fixture(autouse=True)
    def _other_schema(self, postgres_url: str, postgres_schema: str) -> Any:
        import psycopg

        self.other_schema = f"{postgres_schema}_o"
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.other_schema}"')
        yield
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            self._close_all()
            self.stores = []
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.other_schema}" CASCADE')

    def open_other(self) -> ConversationStore:
        from adapters.backends.settings import postgres_env

        env = {**postgres_env(self.url), "POSTGRES_SCHEMA": self.other_schema, "POSTGRES_POOL_SIZE": "1"}
        return self._kept(build_store(env))

    def test_a_batch_larger_than_a_pipelined_append_still_goes_as_append_documents(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from adapters.backends import postgres
        from adapters.backends.postgres import recorder

        lines = export(30)
        chatrecord = self.fresh()
        monkeypatch.setattr(recorder, "PIPELINE_BYTES", 1000)  # every batch of 50 lines holds more

        def plain(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a batch went as statements")

        monkeypatch.setattr(postgres.EventRecorder, "_append_plain", plain)
        report = chatrecord.ingest(lines, "export.jsonl", batch_lines=50)
        monkeypatch.undo()

        assert (report.appended, report.stopped) == (123, None)
        whole = Chatrecord(self.open_other())
        whole.ingest(lines, "export.jsonl", batch_lines=1)
        assert stored(chatrecord.store) == stored(whole.store)
        assert all(v.ok for v in chatrecord.verify())

    def test_a_batch_the_server_rolled_back_for_a_deadlock_is_stored_line_by_line(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import psycopg
        from eventsourcing.persistence import OperationalError

        from adapters.backends import postgres

        lines = export(10)
        chatrecord = self.fresh()
        append, deadlocks = postgres.EventRecorder._append, []

        def deadlocked_once(recorder: Any, stored_events: Any, **kwargs: Any) -> Any:
            inline = InlineWrites.given(kwargs)
            if (
                inline is not None and inline.batch and not deadlocks
            ):  # the first batch: as the server rolls back a deadlock's victim
                deadlocks.append(True)
                try:
                    raise psycopg.errors.DeadlockDetected("deadlock detected")
                except psycopg.errors.DeadlockDetected as cause:
                    raise OperationalError(str(cause)) from cause
            return append(recorder, stored_events, **kwargs)

        monkeypatch.setattr(postgres.EventRecorder, "_append", deadlocked_once)
        report = chatrecord.ingest(lines, "export.jsonl", batch_lines=50)
        monkeypatch.undo()

        assert deadlocks == [True]
        assert (report.appended, report.lines, report.stopped) == (43, 43, None)
        whole = Chatrecord(self.open_other())
        whole.ingest(lines, "export.jsonl", batch_lines=1)
        assert stored(chatrecord.store) == stored(whole.store)

    def test_a_line_the_server_rolled_back_for_a_deadlock_is_written_again(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import psycopg
        from eventsourcing.persistence import OperationalError

        from adapters.backends import postgres

        chatrecord = self.fresh()
        append, deadlocks = postgres.EventRecorder._append, []

        def deadlocked_once(recorder: Any, stored_events: Any, **kwargs: Any) -> Any:
            if not deadlocks:
                deadlocks.append(True)
                try:
                    raise psycopg.errors.DeadlockDetected("deadlock detected")
                except psycopg.errors.DeadlockDetected as cause:
                    raise OperationalError(str(cause)) from cause
            return append(recorder, stored_events, **kwargs)

        monkeypatch.setattr(postgres.EventRecorder, "_append", deadlocked_once)
        result = chatrecord.record(orjson.loads(export(1)[0]))  # a writer of one line: handle's retry
        monkeypatch.undo()

        assert (deadlocks, len(result.appended), result.attempts) == ([True], 1, 2)

    def test_a_batch_reads_no_view_table_before_it_holds_the_views_lock(self) -> None:
        """A rebuild's switch holds the views' lock exclusively and then drops the old
        generation's tables; a batch of several conversations that read a view table in its
        transaction before it asked for the lock shared held that table against the drop while
        it waited for the lock: a deadlock (found by a user, rebuild beside two ingests). Here the
        switch is held by hand while a batch runs: the batch waits for the lock with no view
        table of its transaction locked, so the drop could go on."""
        import threading

        import psycopg

        from adapters.backends.postgres.schema import views_lock_id

        lines = export(6)
        self.fresh().ingest(lines[:12], "export.jsonl", batch_lines=1)  # heads and rows to read
        chatrecord = self.fresh()  # keeps no head: reads them
        with psycopg.connect(self.url, autocommit=True) as switch:
            switch.execute("BEGIN")
            switch.execute("SELECT pg_advisory_xact_lock(%s)", (views_lock_id(self.schema),))
            done: list[Any] = []
            batch = threading.Thread(target=lambda: done.append(chatrecord.ingest(lines[12:], "export.jsonl", batch_lines=50)))
            batch.start()
            waiting = 0
            for _ in range(500):  # until the batch waits for the views' lock
                waiting = switch.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid <> pg_backend_pid()"
                ).fetchone()[0]
                if waiting:
                    break
                threading.Event().wait(0.01)
            held = switch.execute(
                "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname LIKE 'views\\_g%%' AND l.pid <> pg_backend_pid()",
                (self.schema,),
            ).fetchall()
            switch.execute("ROLLBACK")
            batch.join(60)

        assert waiting == 1
        assert held == []
        assert (done[0].appended, done[0].stopped) == (len(lines) - 12, None)
