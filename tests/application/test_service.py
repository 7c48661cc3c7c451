"""The service layer's use cases, in process: the same calls the CLI and the HTTP service make."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from adapters.api import Chatrecord, apply_notes, replay_file
from adapters.bootstrap import open_store
from adapters.service.record_lines import VersionMismatch
from domain.errors import InvalidInput, NoCardWaiting, UnknownConversation
from projections.turn import build_turn_input

DATA = Path(__file__).parents[1] / "data"
DEMO = DATA / "demo_seo_tour.jsonl"
BAD_TABLE = DATA / "bad_table_mid_file.jsonl"
LINE_4 = 'bad_table_mid_file.jsonl: line 4, steps[3].writeTargetTable: "tt content" is not a table name; use 1–64 of A-Za-z0-9_'
STARTED = {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}
MESSAGE = {"type": "user_message", "conversation": "c", "at": "2026-10-28T09:00:05Z", "message": 1, "text": "hi", "page": 42}
DECIDED = {
    "type": "card_decided",
    "conversation": "c",
    "at": "2026-10-28T09:00:09Z",
    "segment": "s",
    "approved": True,
    "answer": "Übernehmen",
}


@pytest.fixture
def chatrecord() -> Chatrecord:
    return Chatrecord(open_store(memory=True))


def lines(*objects: dict) -> list[bytes]:
    return [orjson.dumps(o) for o in objects]


def test_ingest_stops_at_the_first_bad_line_with_the_clis_words(chatrecord: Chatrecord) -> None:
    report = chatrecord.ingest(BAD_TABLE.read_bytes().splitlines(), BAD_TABLE.name)

    assert (str(report.stopped), report.stopped_at, report.appended) == (LINE_4, 4, 4)
    assert report.summary() == "bad_table_mid_file.jsonl: 4 events appended, 0 lines already recorded; stopped at line 4"


def test_ingest_with_skip_bad_rejects_the_line_and_stores_the_rest(chatrecord: Chatrecord) -> None:
    chatrecord.ingest(BAD_TABLE.read_bytes().splitlines(), BAD_TABLE.name)

    report = chatrecord.ingest(BAD_TABLE.read_bytes().splitlines(), BAD_TABLE.name, skip_bad=True)

    assert (report.rejected, report.stopped, report.appended, report.repeated) == ([LINE_4], None, 1, 3)


def test_a_refused_line_is_named_by_source_line_and_field_in_every_entrypoint(chatrecord: Chatrecord) -> None:
    report = chatrecord.ingest(lines(STARTED, DECIDED), "chat.jsonl")
    with pytest.raises(NoCardWaiting) as recorded:
        chatrecord.record(DECIDED)

    assert str(report.stopped).startswith("chat.jsonl: line 2, segment: ")
    assert str(recorded.value).startswith("api: line 1, segment: ")
    assert str(recorded.value).removeprefix("api: line 1") == str(report.stopped).removeprefix("chat.jsonl: line 2")


def test_record_lines_stores_a_batch_all_or_nothing(chatrecord: Chatrecord) -> None:
    with pytest.raises(NoCardWaiting, match=r"^batch: line 3, segment: "):
        chatrecord.record_lines(lines(STARTED, MESSAGE, DECIDED), "batch")
    assert chatrecord.store.events("c") == []

    done = chatrecord.record_lines([*lines(STARTED), b"", *lines(MESSAGE)], "batch")
    again = chatrecord.record_lines(lines(STARTED, MESSAGE), "batch")

    assert (done.version, done.appended, done.repeated, done.lines) == (2, 2, False, (1, 1))
    assert (again.version, again.appended, again.repeated, again.lines) == (2, 0, True, (0, 0))
    assert [e["type"] for e in done.to_json()["events"]] == ["ConversationStarted", "UserMessagePosted"]


def test_a_batch_holds_one_conversation(chatrecord: Chatrecord) -> None:
    other = {**STARTED, "conversation": "d"}
    with pytest.raises(InvalidInput, match=r"^batch: line 2, conversation: one request holds the lines of one conversation"):
        chatrecord.record_lines(lines(STARTED, other), "batch")
    with pytest.raises(InvalidInput, match=r"^batch: line 1, \(line\): expected at least one line"):
        chatrecord.record_lines([b"\n"], "batch")
    assert chatrecord.store.events("c") == []


def test_an_expected_version_is_checked_with_the_append_and_stores_nothing_when_stale(chatrecord: Chatrecord) -> None:
    chatrecord.record(STARTED, follows=0)
    with pytest.raises(VersionMismatch, match=r"is at version 1, not 0") as stale:
        chatrecord.record_lines(lines(MESSAGE), "http", follows=0)

    done = chatrecord.record_lines(lines(MESSAGE), "http", follows=1)

    assert (stale.value.expected, stale.value.actual, done.version) == (0, 1, 2)
    assert len(chatrecord.store.events("c")) == 2


def test_turn_notes_put_into_the_transcript_give_exactly_the_turn_input(chatrecord: Chatrecord) -> None:
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    hidden = lambda page: page != 42

    for can_see in (lambda page: True, hidden):
        notes = chatrecord.turn_notes("conv-demo-seo", can_see)
        turn = chatrecord.turn_input("conv-demo-seo", can_see)
        state = chatrecord.read_models.state("conv-demo-seo")
        assert state is not None
        assert apply_notes(state.transcript.messages, notes.notes) == turn.messages
        assert notes.page_line == turn.system
        assert tuple(n.text for n in notes.notes) == turn.notes

    notes = chatrecord.turn_notes("conv-demo-seo")
    assert (notes.version, notes.rules, len(notes.notes)) == (20, "2026-11-02", 14)
    assert [(n.index, n.into) for n in notes.notes][:3] == [(1, "assistant"), (3, "assistant"), (3, "assistant")]
    assert "42" not in orjson.dumps(chatrecord.turn_notes("conv-demo-seo", hidden).to_json()).decode()


def test_turn_notes_of_a_conversation_with_no_turn_or_none_at_all(chatrecord: Chatrecord) -> None:
    chatrecord.record(STARTED)
    notes = chatrecord.turn_notes("c")  # the notes of the model call the next user message starts
    assert (notes.version, notes.notes) == (1, ())
    assert notes.page_line.startswith("No page is selected")
    with pytest.raises(UnknownConversation):
        chatrecord.turn_notes("nope")


def test_replay_of_a_stored_conversation_is_the_files_and_checks_the_view(chatrecord: Chatrecord) -> None:
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)

    stored = chatrecord.replay("conv-demo-seo")
    [from_file] = replay_file(DEMO)
    first = chatrecord.replay("conv-demo-seo", at=1)

    assert stored.to_json() == from_file.to_json()
    assert stored.differs is False
    assert [t.message for t in first.turns] == [1]


def test_audit_activity_rebuild_and_diff(chatrecord: Chatrecord) -> None:
    chatrecord.ingest((DATA / "behalten_tour.jsonl").read_bytes().splitlines(), "behalten_tour.jsonl")

    audit = chatrecord.audit("conv-behalten", chain=True)
    changed = chatrecord.diff("2026-11-01")
    report = chatrecord.rebuild("2026-11-01")

    assert audit.rules == "2026-11-02" and audit.rows[0].kind == "started"
    assert audit.chain is not None and (audit.chain.ok, audit.chain.version) == (True, len(chatrecord.events("conv-behalten")))
    assert [row["verified"] for row in audit.to_json()] == [True] * len(audit.rows)
    assert chatrecord.audit("conv-behalten").chain is None
    assert [d.conversation for d in changed] == ["conv-behalten"]
    assert (report.rules, report.old_rules, chatrecord.active_rules()) == ("2026-11-01", "2026-11-02", "2026-11-01")
    assert chatrecord.activity("conv-behalten")[1].entries[0].label == "fehlgeschlagen"
    with pytest.raises(UnknownConversation):
        chatrecord.audit("nope")
    with pytest.raises(UnknownConversation, match="no conversation 'nope' in "):
        list(chatrecord.verify("nope"))


def test_demo_stores_the_tour_once_and_reads_its_turn(chatrecord: Chatrecord) -> None:
    first = chatrecord.demo("transcript-only")
    again = chatrecord.demo()

    assert (first.report.appended, again.report.appended, again.report.repeated) == (20, 0, 19)
    assert first.turn.to_json() == build_turn_input(chatrecord.store.events("conv-demo-seo")).to_json()
    assert first.other is not None and first.other[1].notes == ()


def test_threads_writing_one_conversation_queue_instead_of_conflicting(chatrecord: Chatrecord) -> None:
    import threading

    chatrecord.record_lines(lines(STARTED, MESSAGE), "setup")
    step = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
    attempts: list[int] = []

    def client(c: int) -> None:
        for i in range(20):
            segment = {
                "type": "segment_returned",
                "conversation": "c",
                "at": "2026-10-28T09:00:09Z",
                "segment": f"c{c}-{i}",
                "run": f"c{c}",
                "trigger": "turn",
                "outcome": "completed",
                "answer": "ok",
                "steps": [step],
                "pending": [],
            }
            attempts.append(chatrecord.record(segment).attempts)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (len(attempts), set(attempts)) == (160, {1})
    assert len(chatrecord.store.events("c")) == 2 + 160


@pytest.mark.parametrize("ask", ["audit", "turn_notes", "replay"])
def test_an_unknown_id_of_10_kb_is_cut_in_the_error(chatrecord: Chatrecord, ask: str) -> None:
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    long_id = "k" * 10_000
    with pytest.raises(UnknownConversation) as unknown:
        getattr(chatrecord, ask)(long_id)
    message = str(unknown.value)
    assert f"{'k' * 80}…" in message and " characters)" in message  # turn_notes names the reduced id (128)
    assert "k" * 81 not in message and len(message) < 300
