"""The chat's Python API as a story: record the demo line by line, then ask for the turn."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import build_store, open_store
from domain.errors import InvalidInput, NoCardWaiting, UnknownConversation
from projections.turn_notes import apply_notes

DEMO = Path(__file__).parents[1] / "data" / "demo_seo_tour.jsonl"


@pytest.fixture
def chatrecord() -> Chatrecord:
    return Chatrecord(open_store(memory=True))


def test_the_chat_records_the_tour_and_the_later_turn_reads_what_ran(chatrecord: Chatrecord) -> None:
    for raw in DEMO.read_bytes().splitlines():
        chatrecord.record(orjson.loads(raw))

    turn = chatrecord.turn_input("conv-demo-seo")

    assert turn.message == 3
    assert turn.view_context.to_json() == {"pageId": 0, "lastPageId": 42}
    assert len(turn.notes) == 14
    assert any("sys_file_reference:913 (complete)" in note for note in turn.notes)


def test_a_line_delivered_twice_returns_the_first_result(chatrecord: Chatrecord) -> None:
    started = {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}
    first = chatrecord.record(started)
    again = chatrecord.record(orjson.dumps(started).decode())
    assert (len(first.appended), again.repeated, again.events) == (1, True, first.events)


def test_a_bad_line_names_the_call_and_the_field_and_stores_nothing(chatrecord: Chatrecord) -> None:
    with pytest.raises(InvalidInput, match=r"^api: line 1, owner: "):
        chatrecord.record(
            {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": "x"}
        )
    assert chatrecord.store.events("c") == []
    chatrecord.record(
        {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}
    )
    with pytest.raises(NoCardWaiting):
        chatrecord.record(
            {
                "type": "card_decided",
                "conversation": "c",
                "at": "2026-10-28T09:00:01Z",
                "segment": "s",
                "approved": True,
                "answer": "Übernehmen",
            }
        )
    assert len(chatrecord.store.events("c")) == 1


def test_asking_for_a_conversation_the_store_does_not_hold_is_an_error(chatrecord: Chatrecord) -> None:
    with pytest.raises(UnknownConversation):
        chatrecord.turn_input("nope")


def test_the_activity_list_shows_the_editor_a_behalten_as_the_decision_not_a_failed_call(chatrecord: Chatrecord) -> None:
    for raw in (DEMO.parent / "behalten_tour.jsonl").read_bytes().splitlines():
        chatrecord.record(orjson.loads(raw))

    shown = chatrecord.activity("conv-behalten")
    before = chatrecord.activity("conv-behalten", rules="2026-11-01")

    assert [[e.label for e in s.entries if e.tool != "chat_set_progress"] for s in shown] == [
        ["Von dir abgelehnt: Behalten"],
        ["Von dir abgelehnt: Behalten"],
        ["Von dir abgelehnt: Behalten"],
        [],
    ]
    assert [e.label for e in before[1].entries][:2] == ["fehlgeschlagen", "ausgeführt"]


def test_the_chat_reads_the_next_turns_notes_and_puts_them_into_its_transcript(tmp_path) -> None:

    # the chat records the demo tour line by line
    record = Chatrecord(open_store(memory=True))
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        record.record(line)

    # it asks for the notes of the next turn, hiding page 13
    notes = record.turn_notes("conv-demo-seo", can_see_page=lambda page: page != 13)
    turn = record.turn_input("conv-demo-seo", can_see_page=lambda page: page != 13)

    # they are the turn's notes, and put into the transcript they give the model's messages
    assert notes.to_json()["version"] == len(record.store.events("conv-demo-seo"))
    assert [n["text"] for n in notes.to_json()["notes"]] == list(turn.notes)
    transcript = record.read_models.state("conv-demo-seo").transcript.messages
    assert apply_notes(transcript, notes.notes) == turn.messages
    assert notes.page_line == turn.system


START = '{"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}'


@pytest.mark.parametrize("call", ["record_lines", "ingest"])
@pytest.mark.parametrize("lines", [START, START.encode()])
def test_one_text_passed_as_lines_is_a_type_error_not_its_characters(
    chatrecord: Chatrecord, call: str, lines: str | bytes
) -> None:
    with pytest.raises(TypeError) as refused:
        getattr(chatrecord, call)(lines, "x")
    assert str(refused.value) == (
        f"{call}: lines must be an iterable of lines (each a str or bytes), not one {type(lines).__name__}; "
        "split a text into its lines first (text.splitlines())"
    )
    assert chatrecord.store.events("c") == []
    assert chatrecord.record_lines(START.splitlines(), "x").appended == 1


@pytest.mark.parametrize("read", ["turn_notes", "turn_input", "events", "activity", "audit", "replay", "erase", "verify"])
@pytest.mark.parametrize("conversation", [None, 7, b"c"])
def test_a_read_given_an_id_that_is_not_a_str_names_the_argument(chatrecord: Chatrecord, read: str, conversation: object) -> None:
    chatrecord.record_lines([START], "x")
    if read == "verify" and conversation is None:
        assert [v.conversation for v in chatrecord.verify(None)] == ["c"]  # None: every conversation
        return
    with pytest.raises(TypeError) as refused:
        getattr(chatrecord, read)(conversation)
    assert str(refused.value) == (f"{read}: conversation must be a conversation's id as a str, not {type(conversation).__name__}")


@pytest.mark.parametrize(
    "follows, expected",
    [
        (-5, "expected a whole number >= 0, got the number -5"),
        (2**31, "expected a whole number <= 2147483647, got the number 2147483648"),
        (True, "expected a whole number, got true"),
        ("0", "expected a whole number, got a string"),
        (0.0, "expected a whole number, got the number 0.0"),
    ],
)
def test_a_follows_that_is_no_version_is_bad_input_naming_follows(chatrecord: Chatrecord, follows: object, expected: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        chatrecord.record_lines([START], "x", follows=follows)  # type: ignore[arg-type]
    assert (str(refused.value), refused.value.field) == (f"x: line 1, follows: {expected}", "follows")
    with pytest.raises(InvalidInput) as refused:
        chatrecord.record(orjson.loads(START), follows=follows)  # type: ignore[arg-type]
    assert str(refused.value) == f"api: line 1, follows: {expected}"
    assert chatrecord.store.events("c") == []
    assert chatrecord.record_lines([START], "x", follows=0).version == 1


def test_a_file_given_to_ingest_is_read_a_bounded_line_at_a_time(chatrecord: Chatrecord) -> None:
    import io

    from adapters.ingest import LINE_BYTES_MAX

    class Spied(io.BytesIO):
        longest = 0

        def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
            line = super().readline(size)
            Spied.longest = max(Spied.longest, len(line))
            return line

        def __next__(self) -> bytes:  # iterating a file reads whole lines
            line = super().__next__()
            Spied.longest = max(Spied.longest, len(line))
            return line

    start = b'{"type": "conversation_started", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7, "conversation": "big"}'
    huge = b'{"text": "' + b"q" * (3 * LINE_BYTES_MAX) + b'"}'
    report = chatrecord.ingest(Spied(start + b"\n" + huge + b"\n" + start + b"\n"), "big.jsonl", skip_bad=True)
    assert Spied.longest <= LINE_BYTES_MAX + 1
    assert (report.appended, report.repeated) == (1, 1)
    assert report.rejected == [
        f'big.jsonl: line 2, (line): is longer than {LINE_BYTES_MAX:,} bytes, the most a line may be (README, "Input limits")'
    ]


def _locked_file_store(tmp_path: Path) -> tuple[Chatrecord, object]:
    """A SQLite store whose file another connection holds locked (BEGIN EXCLUSIVE), waiting 1 s."""
    import sqlite3

    from adapters.backends.settings import sqlite_env

    path = tmp_path / "locked.sqlite"
    chatrecord = Chatrecord(build_store({**sqlite_env(path), "SQLITE_LOCK_TIMEOUT": "1"}))
    chatrecord.record(LOCKED_START)
    chatrecord.turn_notes("locked")
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    return chatrecord, blocker


LOCKED_START = {
    "type": "conversation_started",
    "at": "2026-10-28T09:00:00Z",
    "kind": "chat",
    "owner": 7,
    "conversation": "locked",
}
LOCKED_MESSAGE = {
    "type": "user_message",
    "at": "2026-10-28T09:00:05Z",
    "message": 1,
    "text": "hallo",
    "page": 0,
    "conversation": "locked",
}


def test_a_store_that_cannot_be_used_is_one_store_error_and_stores_nothing(tmp_path: Path) -> None:
    from adapters.backends.settings import StoreUnusable

    chatrecord, blocker = _locked_file_store(tmp_path)
    with pytest.raises(StoreUnusable) as refused:
        chatrecord.record(LOCKED_MESSAGE)
    blocker.rollback()  # type: ignore[attr-defined]

    assert str(refused.value) == (
        f"the SQLite file {tmp_path / 'locked.sqlite'} stayed locked by another process for 1 s "
        "(database is locked); try again when its write has ended"
    )
    assert [type(e).__name__ for e in chatrecord.events("locked")] == ["ConversationStarted"]
    chatrecord.record(LOCKED_MESSAGE)  # the next call tries the database again
    assert [type(e).__name__ for e in chatrecord.events("locked")] == ["ConversationStarted", "UserMessagePosted"]


def test_an_ingest_that_meets_a_store_it_cannot_use_stops_there_even_when_skipping_bad_lines(tmp_path: Path) -> None:
    from adapters.backends.settings import StoreUnusable

    chatrecord, blocker = _locked_file_store(tmp_path)
    lines = [orjson.dumps(LOCKED_START), orjson.dumps(LOCKED_MESSAGE), orjson.dumps({**LOCKED_MESSAGE, "message": 2})]
    report = chatrecord.ingest(lines, "tour.jsonl", skip_bad=True)
    blocker.rollback()  # type: ignore[attr-defined]

    assert isinstance(report.stopped, StoreUnusable)
    assert (report.stopped_at, report.appended, report.repeated, report.rejected) == (2, 0, 1, [])
    assert report.summary() == "tour.jsonl: 0 events appended, 1 line already recorded; stopped at line 2"


def test_the_stored_form_of_a_reduced_id_finds_the_conversation_as_printed(chatrecord: Chatrecord) -> None:
    chatrecord.record({**LOCKED_START, "conversation": "chat 17"})
    stored = chatrecord.record({**LOCKED_MESSAGE, "conversation": "chat 17"}).conversation

    assert stored == "chat17:h9a90eaf363ff759f"
    assert [r.kind for r in chatrecord.audit(stored).rows] == ["started", "message"]  # as chatrecord printed it
    assert [r.kind for r in chatrecord.audit("chat 17").rows] == ["started", "message"]
    assert [v.conversation for v in chatrecord.verify(stored)] == [stored]
    assert chatrecord.turn_input(stored).message == 1
    assert [c.conversation for c in chatrecord.conversations().conversations] == [stored]


@pytest.mark.parametrize("conversation", [" ", "🙂"])
def test_an_id_with_no_character_a_key_keeps_says_what_it_needs(chatrecord: Chatrecord, conversation: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        chatrecord.record({**LOCKED_START, "conversation": conversation})

    assert str(refused.value).endswith(
        "is not an id; it needs at least one of A-Za-z0-9_.:/- (other characters are left out, "
        "and an id longer than 128 is shortened)"
    )
    assert str(refused.value).startswith("api: line 1, conversation: ")
