"""A turn read sees one version of its conversation while another process appends to it.

A writer process appends a conversation line by line (each line is one append, one version or
a few); reader processes read its turn (`turn_input`, `turn_notes`) meanwhile. Every answer
must be the turn of some version of the log: the set of valid answers is computed afterwards
from the log (the turn input of every prefix is its latest turn's as it began: `replay_turns`
gives them all in one fold) and, for the notes, by an in-memory store that took the same lines
one by one and was read after each. Before the reads were one snapshot (PostgreSQL
read the head, the entries and the transcript rows in statements of their own, each its own
snapshot), a read could put the note of a later segment into an earlier message.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import orjson

from adapters.backends.settings import memory_env, postgres_env, sqlite_env
from adapters.bootstrap import build_store, read_models
from adapters.ingest import read_lines
from adapters.service.record_lines import RecordLines
from adapters.store.application import ConversationStore
from domain.errors import UnknownConversation
from projections.turn import NoTurnYet, replay_turns
from tests.integration.backends import PostgresStores, SQLiteStores
from tests.integration.test_readmodels import Lines, model_round

CONVERSATION = "conv-snapshot"
ROUNDS = 100
READERS = 2
READS = 2000
"""Reads per reader at most (each stops once the writer is done and it read once more)."""


def tool(name: str, r: int) -> dict[str, Any]:
    return {"kind": "tool", "round": r, "durationMs": 3.0, "toolName": name, "toolIsError": False, "toolOutcome": "ok"}


def busy_chat() -> list[bytes]:
    """A chat of ROUNDS user messages, each run paused for a card that is approved, the
    continuation completing: many small appends, each moving the transcript and the notes."""
    chat = Lines(CONVERSATION).add("conversation_started", kind="chat", owner=7)
    message = 0
    for n in range(1, ROUNDS + 1):
        message += 1
        chat.add("user_message", message=message, text=f"Frage {n}", page=40 + n % 3)
        chat.add(
            "segment_returned",
            segment=f"r{n}/1",
            run=f"r{n}",
            trigger="turn",
            outcome="awaiting_approval",
            answer=f"Vorschlag {n}",
            steps=[*model_round(1), tool("get_page", 1)],
            pending=[{"toolName": "update_page_metadata", "table": "pages", "uid": 40 + n % 3, "fields": ["title"]}],
        )
        message += 1
        chat.add("card_decided", segment=f"r{n}/1", approved=True, answer="Übernehmen", message=message, text="Übernehmen")
        chat.add(
            "segment_returned",
            segment=f"r{n}/2",
            run=f"r{n}",
            trigger="approval",
            outcome="completed",
            answer=f"Gespeichert {n}.",
            steps=[tool("update_page_metadata", 1), *model_round(2)],
        )
    return [orjson.dumps(line) for line in chat.lines]


def _write(env: dict[str, str], lines: list[bytes], ready: Any, done: Any) -> None:
    store = build_store(env)
    try:
        read_models(store).active_rules()  # the views exist before the first line
        ready.wait(60)  # every reader has opened its store
        for line in read_lines(lines, "test"):
            store.handle(RecordLines([line]))
    finally:
        done.set()
        store.close()


def _read(env: dict[str, str], out: str, reads: int, ready: Any, done: Any) -> None:
    store = build_store(env)
    models = read_models(store)
    answers: list[Any] = []
    try:
        models.active_rules()
        ready.wait(60)
        for n in range(reads):
            finished = done.is_set()
            try:
                if n % 2:
                    answers.append(["notes", models.turn_notes(CONVERSATION).to_json()])
                else:
                    answers.append(["input", models.turn_input(CONVERSATION).to_json()])
            except (UnknownConversation, NoTurnYet):
                answers.append(["none", None])
            if finished:
                break
    finally:
        store.close()
        Path(out).write_bytes(orjson.dumps(answers))


def _valid_turns(store: ConversationStore, lines: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """Returns the turn inputs of every prefix of the stored log and the turn notes after every
    line (an in-memory store taking the lines one by one), each as its JSON. A prefix's turn
    input is its latest turn's as that turn began (`turn_input`), so the inputs of all prefixes
    are the inputs of all turns (`replay_turns`, one fold of the log)."""
    inputs = [orjson.dumps(t.to_json()) for t in replay_turns(store.events(CONVERSATION), store_rules(store))]
    reference = build_store(memory_env())
    models = read_models(reference)
    notes = []
    for line in read_lines(lines, "test"):
        reference.handle(RecordLines([line]))
        try:
            notes.append(orjson.dumps(models.turn_notes(CONVERSATION).to_json()))
        except (UnknownConversation, NoTurnYet):
            continue
    reference.close()
    return inputs, notes


def processes() -> Any:
    """Returns the processes' context: spawned, so a process starts clean (no thread or
    connection of the test's own). A forkserver (which imported this module once, to start each
    process in milliseconds) once never answered in a whole run on a busy machine: the test's
    `start()` waited for it forever, where a spawned process that does not start ends in
    `join`'s timeout and fails the test. It costs about a second of CPU per process."""
    return multiprocessing.get_context("spawn")


def store_rules(store: ConversationStore) -> str:
    return read_models(store).active_rules()


class SnapshotReadsContract:
    """Each backend gives `env()`, the settings its processes open the test's store with."""

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def test_a_turn_read_during_appends_is_the_turn_of_one_version(self, tmp_path: Path) -> None:
        lines = busy_chat()
        env = self.env()
        read_models(self.open_store()).active_rules()  # the store and its views, before the processes
        context = processes()
        done, ready = context.Event(), context.Barrier(READERS + 1)
        outs = [str(tmp_path / f"reader{n}.json") for n in range(READERS)]
        readers = [context.Process(target=_read, args=(env, out, READS, ready, done)) for out in outs]
        writer = context.Process(target=_write, args=(env, lines, ready, done))
        for process in readers:
            process.start()
        writer.start()
        for process in (writer, *readers):
            process.join(120)
            assert process.exitcode == 0
        inputs, notes = _valid_turns(self.open_store(), lines)
        valid = {"input": set(inputs), "notes": set(notes)}

        answers = [answer for out in outs for answer in orjson.loads(Path(out).read_bytes())]
        wrong = [(kind, value) for kind, value in answers if kind != "none" and orjson.dumps(value) not in valid[kind]]

        assert sum(kind != "none" for kind, _ in answers) >= READERS * 20  # the reads ran beside the appends
        assert [(kind, value.get("version", value.get("message"))) for kind, value in wrong] == []


class TestSQLiteSnapshotReads(SQLiteStores, SnapshotReadsContract):
    def env(self) -> dict[str, str]:
        return sqlite_env(self.path)


class TestPostgresSnapshotReads(PostgresStores, SnapshotReadsContract):
    def env(self) -> dict[str, str]:
        return {**postgres_env(self.url), "POSTGRES_SCHEMA": self.schema, "POSTGRES_POOL_SIZE": "1"}
