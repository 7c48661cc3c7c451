"""A writer that knows a conversation's index decides without reading it, and the append checks
what it assumed (`Decider.assume`, `domain.history_index.AssumedHistory`,
`PostgresHistoryTables.expect`).

On PostgreSQL a command's lookups cost a round trip of their own before the append; a process
that made the conversation's last append knows its version and card outcome count, and a first
delivery of a line finds its line, its new segment and its run unrecorded and uncut. Every
assumption travels with the append as one checking statement; when one does not hold (another
writer, a line sent again, a segment recorded before, a run an edit cut) nothing is stored and
the command is decided again from the index, so the result is the one the index gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import StoreUnusable, memory_env
from adapters.bootstrap import build_store
from adapters.store.application import ConversationStore
from domain.errors import TurnTruncated
from domain.events import conversation_uuid
from domain.history_index import AssumedHistory, NotKnown
from tests.integration.backends import PostgresStores
from tests.line_sources import by_line, line_numbers

ROOT = Path(__file__).resolve().parents[2]
AT = "2026-10-28T09:00:00Z"
TOURS = [ROOT / "tests/data/demo_seo_tour.jsonl", ROOT / "tests/data/behalten_tour.jsonl"]


def start(conv: str) -> dict[str, Any]:
    return {"type": "conversation_started", "at": AT, "kind": "chat", "owner": 7, "conversation": conv}


def message(conv: str, number: int, text: str = "weiter", at: str = AT) -> dict[str, Any]:
    return {"type": "user_message", "at": at, "message": number, "text": text, "page": 42, "skill": None, "conversation": conv}


def segment(conv: str, seg: str, run: str, trigger: str = "turn", outcome: str = "completed", at: str = AT) -> dict[str, Any]:
    return {
        "type": "segment_returned",
        "at": at,
        "segment": seg,
        "run": run,
        "trigger": trigger,
        "outcome": outcome,
        "answer": "Erledigt.",
        "steps": [],
        "conversation": conv,
    }


def lookups(store: ConversationStore) -> list[int]:
    """Counts the commands that read the index before deciding (`history.reading`)."""
    calls = [0]
    reading = store.history.reading

    def counted(cid: Any) -> Any:
        calls[0] += 1
        return reading(cid)

    store.history.reading = counted  # type: ignore[method-assign]
    return calls


def statements_per_line(chat: Chatrecord, lines: list[dict[str, Any]]) -> list[list[str]]:
    """Records `lines` one by one through `chat` and returns the SQL each sent (psycopg's
    cursor `execute` wrapped), one list per line."""
    import psycopg

    sent: list[list[str]] = []
    execute = psycopg.Cursor.execute

    def counted(curs: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent[-1].append(query.as_string(curs.connection) if hasattr(query, "as_string") else str(query))
        return execute(curs, query, *args, **kwargs)

    psycopg.Cursor.execute = counted  # type: ignore[method-assign]
    try:
        for line in lines:
            sent.append([])
            chat.record(line)
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    return sent


def log(store: ConversationStore, conv: str) -> list[tuple[str, int]]:
    return [(type(e).__name__, e.originator_version) for e in store.events(conv)]


class TestAssumedHistory:
    def test_it_answers_a_first_delivery_and_notes_each_assumption(self) -> None:
        history = AssumedHistory(7, 3, new_segments=["r/1"])
        assert (history.version, history.outcomes()) == (7, 3)
        assert history.source("d1") is None
        assert history.segment("r/1") is None
        assert history.run_cut("r") is False
        assert (history.digests, history.segments, history.runs) == (["d1"], ["r/1"], ["r"])

    def test_it_does_not_guess_what_it_cannot_check(self) -> None:
        history = AssumedHistory(7, 3, new_segments=["r/1"])
        for ask in (
            lambda: history.segment("r/0"),
            lambda: history.segments_from(1),
            lambda: history.message_uncut(1),
            lambda: history.messages_after(1),
        ):
            with pytest.raises(NotKnown):
                ask()

    def test_it_answers_an_earlier_segment_the_writer_knows_and_notes_it_for_the_check(self) -> None:
        from domain.history_index import SegmentRecord

        record = SegmentRecord(segment="r/0", version=3, run="r", message=1, guided=True, waits="card", calls=1)
        history = AssumedHistory(7, 3, new_segments=["r/1"], known={"r/0": record})
        assert history.segment("r/0") == record
        assert history.records == {"r/0": record}
        with pytest.raises(NotKnown):
            history.segment("q/0")

    def test_from_the_message_it_knows_whole_it_answers_an_edits_lookups_and_notes_how_many(self) -> None:
        from domain.history_index import SegmentRecord

        plain = {"guided": False, "waits": None, "calls": 0}
        old = SegmentRecord(segment="r/0", version=3, run="r", message=1, **plain)
        kept = SegmentRecord(segment="s/0", version=5, run="s", message=2, settled=True, **plain)
        cut = SegmentRecord(segment="s/1", version=6, run="s", message=2, cut=True, **plain)
        newer = SegmentRecord(segment="t/0", version=8, run="t", message=3, **plain)
        known = {r.segment: r for r in (old, kept, cut, newer)}
        history = AssumedHistory(9, 0, known=known, known_messages={1: True, 2: True, 3: True, 4: False}, known_from=2)
        assert history.segments_from(2) == [kept, newer]  # the cut one is no longer live
        assert history.messages_after(2) == [3]
        assert history.messages_after(1) == [2, 3]
        assert (history.froms, history.afters) == ({2: 2}, {2: 1, 1: 2})
        assert history.records == {"s/0": kept, "t/0": newer}
        assert history.messages == {2: True, 3: True}
        with pytest.raises(NotKnown):
            history.segments_from(1)  # below the message it knows whole
        with pytest.raises(NotKnown):
            history.messages_after(0)


def tour_lines(conv: str, cycle: int) -> list[dict[str, Any]]:
    """The demo tour's lines (its start and its last question left out) for conversation
    `conv`, with fresh segment and run ids and message numbers for cycle `cycle`."""
    lines = [json.loads(line) for line in TOURS[0].read_text(encoding="utf-8").splitlines() if line][1:-1]
    for line in lines:
        line["conversation"] = conv
        line["at"] = f"2026-10-{28 + cycle}T{line['at'][11:]}"
        if "segment" in line:
            line["segment"] = f"tour{cycle}/{line['segment'].rsplit('/', 1)[1]}"
        if "run" in line:
            line["run"] = f"tour{cycle}"
        if "message" in line:
            line["message"] += 2 * cycle
    return lines


class TestPostgresAssumedAppend(PostgresStores):
    """Each test runs with the appends sent as one call of the store's database function and,
    again, as statements (`mode`: the function taken as unavailable, as on a database where it
    cannot be created)."""

    @pytest.fixture(autouse=True, params=["function", "statements"])
    def mode(self, request: pytest.FixtureRequest) -> str:
        return request.param

    def open_store(self, **overrides: str) -> ConversationStore:
        store = super().open_store(**overrides)
        if self.mode == "statements":
            store.recorder._function = ""  # type: ignore[attr-defined]
        return store

    def test_a_writer_that_made_the_last_append_decides_the_next_lines_without_reading_the_index(self, mode: str) -> None:
        store = self.open_store()
        chat = Chatrecord(store)
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1")):
            chat.record(line)
        calls = lookups(store)
        chat.record(message("c", 2))
        chat.record(segment("c", "r2/1", "r2"))
        assert calls[0] == 0
        assert log(store, "c")[-2:] == [("UserMessagePosted", 4), ("SegmentReturned", 5)]
        assert store.history.reader(conversation_uuid("c")).version == 5

    def test_another_writers_append_fails_the_assumption_and_the_command_is_decided_on_the_new_state(self) -> None:
        one, two = self.open_store(), self.open_store()
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1")):
            Chatrecord(one).record(line)
        Chatrecord(two).record(message("c", 2))  # `one` still holds version 3
        calls = lookups(one)
        result = Chatrecord(one).record(segment("c", "r2/1", "r2"))
        assert calls[0] >= 1  # decided again, from the index, after the check failed
        assert [(type(e).__name__, e.originator_version, e.message) for e in result.appended] == [
            ("SegmentReturned", 5, 2)
        ]  # it answers message 2, which `one` had not seen
        assert log(one, "c") == [
            ("ConversationStarted", 1),
            ("UserMessagePosted", 2),
            ("SegmentReturned", 3),
            ("UserMessagePosted", 4),
            ("SegmentReturned", 5),
        ]

    def test_with_one_try_a_failed_assumption_is_still_decided_again_from_the_index(self) -> None:
        one, two = self.open_store(HANDLE_MAX_ATTEMPTS="1"), self.open_store()
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1")):
            Chatrecord(one).record(line)
        Chatrecord(two).record(message("c", 2))  # `one` still holds version 3
        result = Chatrecord(one).record(segment("c", "r2/1", "r2"))
        assert result.attempts == 2  # the assumed try, then the one decided from the index
        assert log(one, "c")[-2:] == [("UserMessagePosted", 4), ("SegmentReturned", 5)]

    def test_a_line_sent_again_is_a_repeat_and_stores_nothing(self) -> None:
        store = self.open_store()
        chat = Chatrecord(store)
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1")):
            chat.record(line)
        again = chat.record(segment("c", "r1/1", "r1"))
        assert again.repeated
        assert [e.originator_version for e in again.events] == [3]
        assert len(log(store, "c")) == 3
        chat.record(message("c", 2))
        assert chat.record(message("c", 2)).repeated
        assert len(log(store, "c")) == 4

    def test_a_segment_recorded_before_under_another_line_keeps_its_first_result(self) -> None:
        store = self.open_store()
        chat = Chatrecord(store)
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1")):
            chat.record(line)
        later = chat.record(segment("c", "r1/1", "r1", outcome="failed", at="2026-10-28T09:05:00Z"))
        assert later.repeated
        assert [(type(e).__name__, e.outcome) for e in later.events] == [("SegmentReturned", "completed")]
        assert len(log(store, "c")) == 3

    def test_a_segment_of_a_run_an_edit_cut_is_refused(self) -> None:
        store = self.open_store()
        chat = Chatrecord(store)
        for line in (
            start("c"),
            message("c", 1),
            segment("c", "r1/1", "r1", outcome="failed"),
            {"type": "message_edited", "at": AT, "message": 1, "text": "anders", "conversation": "c"},
        ):
            chat.record(line)
        before = len(log(store, "c"))
        with pytest.raises(TurnTruncated):
            chat.record(segment("c", "r1/2", "r1", trigger="retry"))
        assert len(log(store, "c")) == before

    @pytest.mark.parametrize("tour", TOURS, ids=lambda p: p.stem)
    def test_a_tour_line_by_line_decides_the_events_a_store_reading_its_index_decides(self, tour: Path) -> None:
        lines = [json.loads(raw) for raw in tour.read_text(encoding="utf-8").splitlines() if raw.strip()]
        store, memory = self.open_store(), build_store(memory_env())
        calls = lookups(store)
        for line in lines:
            Chatrecord(store).record(line)
            Chatrecord(memory).record(line)
        conv = lines[0]["conversation"]
        assert by_line(store.events(conv)) == by_line(memory.events(conv))
        assert calls[0] < len(lines)  # some lines took the assumed path
        index = store.history.reader(conversation_uuid(conv))
        assert store.known.counts(conversation_uuid(conv)) == (index.version, index.outcomes())

    @pytest.mark.parametrize("tour", TOURS, ids=lambda p: p.stem)
    def test_an_assumed_append_writes_the_index_rows_its_decision_folded_and_they_equal_a_fold(
        self, tour: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An assumed append sends the index writes its decision folded (`AssumedHistory.decided`),
        not a second fold of its events; the rows are those the in-memory store's fold of the same
        lines holds, record by record, message by message, line by line."""
        import adapters.backends.postgres.history_tables as tables

        folds = [0]
        index_events = tables.index_events

        def counted(*args: Any) -> None:
            folds[0] += 1
            index_events(*args)

        monkeypatch.setattr(tables, "index_events", counted)
        lines = [json.loads(raw) for raw in tour.read_text(encoding="utf-8").splitlines() if raw.strip()]
        store, memory = self.open_store(), build_store(memory_env())
        calls = lookups(store)
        for line in lines:
            Chatrecord(store).record(line)
            Chatrecord(memory).record(line)
        assert folds[0] == calls[0] - 1  # only the appends decided from the index fold again (not the start)
        assert calls[0] < len(lines) - 5
        cid = conversation_uuid(lines[0]["conversation"])
        index, folded = store.history.reader(cid), memory.history.reader(cid)
        assert folded.records and folded.sources
        assert {s: index.segment(s) for s in folded.records} == folded.records
        # each store keys its lines' digests with its own data key: a line's rows are compared by the
        # line's place in the log (`tests.line_sources`), not by the digest
        ours, theirs = store.events(lines[0]["conversation"]), memory.events(lines[0]["conversation"])
        assert line_numbers(ours) == line_numbers(theirs)
        by_place = dict(zip([e.source for e in theirs], [e.source for e in ours], strict=True))
        assert {d: index.source(by_place[d]) for d in folded.sources} == folded.sources
        assert index.messages_after(0) == folded.messages_after(0)
        assert (index.version, index.outcomes()) == (folded.version, folded.outcomes())

    def test_every_line_of_a_tour_after_the_first_is_decided_and_sent_in_one_statement(self, mode: str) -> None:
        """The writer that appended a card or a question knows its segment's record and the
        rows it wrote (the entry, the answer the next continuation joins), so a decision, an
        answer and a continuation read nothing before their append; the rows still equal a
        fold of the log."""
        import psycopg

        from projections.turn import build_turn_input

        store = self.open_store()
        chat = Chatrecord(store)
        chat.record(start("c"))
        for line in tour_lines("c", 0):
            chat.record(line)
        calls, sent = lookups(store), []
        execute = psycopg.Cursor.execute

        def counted(curs: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(query)
            return execute(curs, query, *args, **kwargs)

        per_line = []
        psycopg.Cursor.execute = counted  # type: ignore[method-assign]
        try:
            for line in tour_lines("c", 1):
                sent.clear()
                chat.record(line)
                per_line.append(len(sent))
        finally:
            psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        assert calls[0] == 0
        if mode == "function":
            assert per_line == [1] * 17
        assert chat.read_models.turn_input("c").to_json() == build_turn_input(store.events("c")).to_json()

    def test_a_replaced_transcript_is_written_in_one_statement_and_its_rows_equal_a_fold(self, mode: str) -> None:
        """The transcript's cut travels in the append's document (`cut`): the function deletes
        the stored messages from there on before it writes the new ones, so a replacement sends
        its index reads and one call, no write of its own; a shorter transcript leaves no row
        of the longer one behind."""
        import psycopg

        conv = "a"
        replaced = [
            {"type": "conversation_started", "at": AT, "kind": "alt_text", "owner": 7, "conversation": conv},
            {
                "type": "transcript_replaced",
                "at": AT,
                "conversation": conv,
                "messages": [{"role": "user", "text": "x"}, {"role": "assistant", "text": "y"}, {"role": "user", "text": "z"}],
            },
            {
                "type": "transcript_replaced",
                "at": AT,
                "conversation": conv,
                "messages": [{"role": "user", "text": "lang"}, {"role": "assistant", "text": "ja"}],
            },
            {"type": "transcript_replaced", "at": AT, "conversation": conv, "messages": [{"role": "user", "text": "kurz"}]},
        ]
        store = self.open_store()
        chat = Chatrecord(store)
        chat.record(replaced[0])
        chat.record(replaced[1])
        chat.turn_notes(conv)  # the read models are kept from here on, in each append's transaction
        chat.record(replaced[2])  # the first append into the views' generation makes its function
        sent: list[str] = []
        execute = psycopg.Cursor.execute

        def counted(curs: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(query.as_string(curs.connection) if hasattr(query, "as_string") else str(query))
            return execute(curs, query, *args, **kwargs)

        psycopg.Cursor.execute = counted  # type: ignore[method-assign]
        try:
            chat.record(replaced[3])
        finally:
            psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        writes = [q for q in sent if not q.lstrip().upper().startswith("SELECT") or "chatrecord_append_" in q]
        assert len(writes) == 1 and "chatrecord_append_g1_v12(" in writes[0]  # the views' generation's function
        memory = build_store(memory_env())
        for line in replaced:
            Chatrecord(memory).record(line)
        assert by_line(store.events(conv)) == by_line(memory.events(conv))
        assert chat.read_models.state(conv) == Chatrecord(memory).read_models.state(conv)
        state = chat.read_models.state(conv)
        assert state is not None and [m.text for m in state.transcript.messages] == ["kurz"]

    def test_an_edit_of_the_writers_recent_message_is_decided_without_reading_the_index(self, mode: str) -> None:
        """The writer followed the conversation from its start, so it knows every segment and
        message from a recent one on: an edit's cut (the segments from the edited message, the
        live messages after it) is decided from that, checked by the append, and is the cut a
        store reading its index decides."""
        lines = [start("c"), message("c", 1), segment("c", "r1/1", "r1"), message("c", 2)]
        lines += [segment("c", "r2/1", "r2", outcome="failed"), message("c", 3), segment("c", "r3/1", "r3")]
        edit = {"type": "message_edited", "at": AT, "message": 2, "text": "anders", "conversation": "c"}
        store = self.open_store()
        chat = Chatrecord(store)
        for line in lines:
            chat.record(line)
        chat.turn_notes("c")
        calls = lookups(store)
        result = chat.record(edit)
        assert calls[0] == 0
        truncated = result.appended[-1]
        assert (truncated.cut_messages, truncated.cut_segments) == ((3,), ("r2/1", "r3/1"))  # type: ignore[attr-defined]
        memory = build_store(memory_env())
        for line in [*lines, edit]:
            Chatrecord(memory).record(line)
        assert by_line(store.events("c")) == by_line(memory.events("c"))
        assert chat.read_models.state("c") == Chatrecord(memory).read_models.state("c")
        chat.record(message("c", 4))  # the index the edit wrote is the one the next line assumes
        assert calls[0] == 0
        assert store.history.reader(conversation_uuid("c")).messages_after(1) == [2, 4]

    def test_a_message_the_writer_does_not_know_fails_an_edits_assumption_and_the_edit_cuts_it(self, mode: str) -> None:
        store = self.open_store()
        chat = Chatrecord(store)
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1"), message("c", 2)):
            chat.record(line)
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:  # a row the writer never wrote
            conn.execute(
                f'INSERT INTO "{self.schema}".chatrecord_messages (cid, number, live) VALUES (%s, 9, 1)',
                (str(conversation_uuid("c")),),
            )
        calls = lookups(store)
        result = chat.record({"type": "message_edited", "at": AT, "message": 1, "text": "anders", "conversation": "c"})
        assert calls[0] >= 1  # the assumed try failed its check; decided again from the index
        assert result.appended[-1].cut_messages == (2, 9)  # type: ignore[attr-defined]

    def test_a_retry_of_the_writers_own_message_is_decided_without_reading_the_index(self, mode: str) -> None:
        store = self.open_store()
        chat = Chatrecord(store)
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1", outcome="failed")):
            chat.record(line)
        calls = lookups(store)
        result = chat.record({"type": "turn_retried", "message": 1, "at": AT, "conversation": "c"})
        assert calls[0] == 0  # whether message 1 is live: as this writer's append left the index
        assert [(type(e).__name__, e.originator_version) for e in result.appended] == [("TurnRetried", 4)]

    def test_a_known_record_the_index_does_not_hold_fails_the_assumption_and_the_card_is_decided_from_the_index(self) -> None:
        import psycopg

        store = self.open_store()
        chat = Chatrecord(store)
        chat.record(start("c"))
        lines = tour_lines("c", 0)
        for line in lines[:4]:  # up to the card of the page title (its skill loaded is an event too)
            chat.record(line)
        with psycopg.connect(self.url, autocommit=True) as conn:  # another writer's index row for it
            conn.execute(f'UPDATE "{self.schema}".chatrecord_segments SET body = body || %s WHERE segment = %s', (" ", "tour0/2"))
        calls = lookups(store)
        result = chat.record(lines[4])  # the card's decision
        assert calls[0] >= 1  # decided again, from the index, after the check failed
        assert [type(e).__name__ for e in result.appended] == ["CardDecided"]
        assert log(store, "c")[-2:] == [("SegmentReturned", 6), ("CardDecided", 7)]


class TestPostgresAppendFunction(PostgresStores):
    def test_a_store_without_the_function_gets_it_at_its_first_append_and_appends_in_one_call(self) -> None:
        import psycopg

        store = self.open_store()
        Chatrecord(store).record(start("c"))
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP FUNCTION "{self.schema}".chatrecord_append_v10(jsonb)')
        later = self.open_store()  # as a process of this version opening a store an earlier one made
        calls = []
        call = later.recorder._append_in_one_call  # type: ignore[attr-defined]
        later.recorder._append_in_one_call = lambda *a, **k: calls.append(call(*a, **k)) or calls[-1]  # type: ignore[attr-defined]
        Chatrecord(later).record(message("c", 1))
        with psycopg.connect(self.url, autocommit=True) as conn:
            found = conn.execute(f"SELECT to_regprocedure('\"{self.schema}\".chatrecord_append_v10(jsonb)') IS NOT NULL")
            assert found.fetchone() == (True,)
        assert len(calls) == 1 and isinstance(calls[0], list) and len(calls[0]) == 1  # one notification id
        assert log(later, "c") == [("ConversationStarted", 1), ("UserMessagePosted", 2)]

    @pytest.mark.parametrize("mode", ["function", "statements"])
    def test_a_failed_assumption_is_raised_with_chatrecords_own_sqlstate_and_message(self, mode: str) -> None:
        from adapters.backends.postgres import ASSUMPTION_FAILED, ASSUMPTION_MESSAGE

        one, two = self.open_store(), self.open_store()
        if mode == "statements":  # the check as a statement of the append (`PostgresHistoryTables._checked_write`)
            one.recorder._function = ""  # type: ignore[attr-defined]
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1")):
            Chatrecord(one).record(line)
        Chatrecord(two).record(message("c", 2))  # `one` still holds version 3
        raised: list[BaseException] = []
        append = one.recorder._append_retried  # type: ignore[attr-defined]

        def kept(*args: Any, **kwargs: Any) -> Any:
            try:
                return append(*args, **kwargs)
            except Exception as error:
                raised.append(error)
                raise

        one.recorder._append_retried = kept  # type: ignore[attr-defined]
        Chatrecord(one).record(segment("c", "r2/1", "r2"))
        server = raised[0].__cause__  # the library's DatabaseError, caused by the server's error
        assert ASSUMPTION_FAILED == "RC001"
        assert (getattr(server, "sqlstate", None), server.diag.message_primary) == (  # type: ignore[union-attr]
            "RC001",
            "chatrecord: the index is not as the command assumed",
        )
        assert ASSUMPTION_MESSAGE == "chatrecord: the index is not as the command assumed"
        assert len(raised) == 1  # decided again from the index, the second append went through
        assert log(one, "c")[-2:] == [("UserMessagePosted", 4), ("SegmentReturned", 5)]

    def test_the_stores_functions_raise_a_failed_assumption_with_that_sqlstate_and_nothing_else(self) -> None:
        import psycopg

        Chatrecord(self.open_store()).record(start("c"))
        cid = str(conversation_uuid("c"))
        doc = json.dumps(
            {
                "cid": cid,
                "assumed": {"version": 7, "count": 0, "digests": [], "segments": [], "runs": [], "tip": None},
                "events": [],
                "chain": [],
            }
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            for call, params in (
                (f'SELECT * FROM "{self.schema}".chatrecord_append_v10(%s::jsonb)', (doc,)),
                (f'SELECT "{self.schema}".chatrecord_assumption_failed_v1()', ()),
            ):
                with pytest.raises(psycopg.Error) as failed:
                    conn.execute(call, params)
                assert (failed.value.sqlstate, failed.value.diag.message_primary) == (
                    "RC001",
                    "chatrecord: the index is not as the command assumed",
                )
                assert type(failed.value) is psycopg.DatabaseError  # no class of the server's own
            holds = doc.replace('"version": 7', '"version": 1')  # the index as it is: nothing raised
            assert conn.execute(f'SELECT * FROM "{self.schema}".chatrecord_append_v10(%s::jsonb)', (holds,)).fetchall() == []

    def test_a_store_without_the_assumption_function_gets_it_at_the_first_command_that_assumes(self) -> None:
        import psycopg

        Chatrecord(self.open_store()).record(start("c"))
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP FUNCTION "{self.schema}".chatrecord_assumption_failed_v1()')
        one, two = self.open_store(), self.open_store()  # as processes of this version, on a store an earlier one made
        for line in (message("c", 1), segment("c", "r1/1", "r1")):
            Chatrecord(one).record(line)
        with psycopg.connect(self.url, autocommit=True) as conn:
            found = conn.execute(f"SELECT to_regprocedure('\"{self.schema}\".chatrecord_assumption_failed_v1()') IS NOT NULL")
            assert found.fetchone() == (True,)
        Chatrecord(two).record(message("c", 2))
        calls = lookups(one)
        Chatrecord(one).record(segment("c", "r2/1", "r2"))  # assumed version 3, found 4: decided again
        assert calls[0] >= 1
        assert log(one, "c")[-2:] == [("UserMessagePosted", 4), ("SegmentReturned", 5)]

    def test_view_rows_go_through_the_live_generations_function_which_goes_with_its_tables(self) -> None:
        import psycopg

        store = self.open_store()
        chat = Chatrecord(store)
        chat.record(start("c"))
        chat.turn_notes("c")  # the read models are kept from here on, in each append's transaction
        sent = []
        call = store.recorder._append_in_one_call  # type: ignore[attr-defined]
        store.recorder._append_in_one_call = lambda *a, **k: sent.append(call(*a, **k)) or sent[-1]  # type: ignore[attr-defined]
        for line in (message("c", 1), segment("c", "r1/1", "r1")):
            chat.record(line)
        assert len(sent) == 2 and all(isinstance(ids, list) and len(ids) == 1 for ids in sent)  # in one call each

        def functions() -> set[str]:
            with psycopg.connect(self.url, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                    "WHERE n.nspname = %s AND p.proname LIKE 'chatrecord_append%%'",
                    (self.schema,),
                )
                return {row[0] for row in rows}

        assert functions() == {"chatrecord_append_v10", "chatrecord_append_g1_v12"}
        chat.rebuild("2026-11-02")
        chat.record(message("c", 2))
        assert functions() == {"chatrecord_append_v10", "chatrecord_append_g2_v12"}
        memory = Chatrecord(build_store(memory_env()))
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1"), message("c", 2)):
            memory.record(line)
        memory.rebuild("2026-11-02")
        assert chat.read_models.state("c") == memory.read_models.state("c")

    def test_an_append_the_document_cannot_carry_goes_as_statements_with_the_same_result(self) -> None:
        lines = [start("c"), message("c", 1), segment("c", "r1/1", "r1"), message("c", 2), segment("c", "r2/1", "r2")]
        edits = [
            {"type": "message_edited", "at": AT, "message": 2, "text": "zwei", "conversation": "c"},
            {"type": "message_edited", "at": AT, "message": 1, "text": "anders", "conversation": "c"},
        ]
        store = self.open_store()
        chat = Chatrecord(store)
        for line in lines:
            chat.record(line)
        chat.turn_notes("c")  # the read models are kept from here on, in each append's transaction
        sent = []
        synced = store.recorder._append_synced  # type: ignore[attr-defined]
        store.recorder._append_synced = lambda *a, **k: sent.append(1) or synced(*a, **k)  # type: ignore[attr-defined]
        chat.record_lines([json.dumps(edit) for edit in edits], "edits.jsonl")  # two edits' cuts in one append
        assert sent  # the second edit's reads come after the first one's rows: statements of their own
        memory = build_store(memory_env())
        for line in [*lines, *edits]:
            Chatrecord(memory).record(line)
        assert by_line(store.events("c")) == by_line(memory.events("c"))
        assert chat.read_models.state("c") == Chatrecord(memory).read_models.state("c")

    def test_an_edit_is_one_call_and_its_rows_equal_a_fold_of_the_log(self) -> None:
        """An edit of the second tour's first message cuts its segments, their entries, the
        card outcomes of its six cards and its page changes: the writer knows the segments
        and messages it cuts (no read of the index) and the view rows the fold reads, as its
        own appends left them (`EditWindow`: no read before the append), and the cuts go in
        the document (`drop_outcomes`, `drop_pages`); the rows equal a fold of the log, and
        the next lines, decided and folded on what the edit's append left, are one call each."""
        import psycopg

        from projections.turn import build_turn_input

        store = self.open_store()
        chat = Chatrecord(store)
        lines = [start("c"), *tour_lines("c", 0), *tour_lines("c", 1)]
        chat.record(lines[0])
        chat.turn_notes("c")  # the read models are kept from here on, in each append's transaction
        for line in lines[1:]:
            chat.record(line)
        edit = {"type": "message_edited", "at": "2026-10-29T15:00:00Z", "message": 3, "text": "nur OG", "conversation": "c"}
        after = [message("c", 4, at="2026-10-29T15:01:00Z"), segment("c", "e/1", "e", at="2026-10-29T15:02:00Z")]
        calls, sent = lookups(store), []
        execute = psycopg.Cursor.execute

        def counted(curs: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            sent.append(query.as_string(curs.connection) if hasattr(query, "as_string") else str(query))
            return execute(curs, query, *args, **kwargs)

        per_line = []
        psycopg.Cursor.execute = counted  # type: ignore[method-assign]
        try:
            for line in [edit, *after]:
                sent.clear()
                result = chat.record(line)
                per_line.append(len(sent))
                if line is edit:
                    edited = list(sent)
                    cut = result.appended[-1]
        finally:
            psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        assert calls[0] == 0
        assert len(cut.cut_segments) == 8 and cut.cut_messages == (4,)  # type: ignore[attr-defined]
        assert per_line == [1, 1, 1], edited
        assert "chatrecord_append_g1_v12(" in edited[0]
        memory = build_store(memory_env())
        for line in [*lines, edit, *after]:
            Chatrecord(memory).record(line)
        assert by_line(store.events("c")) == by_line(memory.events("c"))
        assert chat.read_models.state("c") == Chatrecord(memory).read_models.state("c")
        assert chat.read_models.turn_input("c").to_json() == build_turn_input(store.events("c")).to_json()
        assert [v.ok for v in chat.verify_rows("c")] == [True]

    def test_an_edit_after_another_writers_lines_reads_its_rows_and_they_equal_a_fold_of_the_log(self) -> None:
        """What a process kept of a conversation's rows (`EditWindow`, with the head it wrote)
        stands at the version it wrote: after a second store object (another process) appended
        to the conversation, the first one's edit finds its kept head behind, reads the rows
        its fold needs (`PostgresBufferedRows.prefetch`, then the call), and the rows equal a
        fold of the log; an edit after its own appends is one call again."""

        one, two = self.open_store(), self.open_store()
        first, second = Chatrecord(one), Chatrecord(two)
        lines = [start("c"), *tour_lines("c", 0)]
        for line in lines:
            first.record(line)
        first.turn_notes("c")
        others = tour_lines("c", 1)
        for line in others:
            second.record(line)
        edits = [
            {"type": "message_edited", "at": "2026-10-29T15:00:00Z", "message": 3, "text": "nur OG", "conversation": "c"},
            message("c", 4, at="2026-10-29T15:01:00Z"),
            segment("c", "e/1", "e", at="2026-10-29T15:02:00Z"),
            {"type": "message_edited", "at": "2026-10-29T15:03:00Z", "message": 4, "text": "doch", "conversation": "c"},
        ]
        sent = statements_per_line(first, edits)
        assert any(q.lstrip().startswith("SELECT u.idx") for q in sent[0]), sent[0]  # its rows read: not as it kept them
        assert [len(s) for s in sent[1:3]] == [1, 1], sent
        # the second edit's view rows are the ones this process wrote (no read of them); the
        # writer decides it from the index, which it did not follow from its start
        assert not any(q.lstrip().startswith("SELECT u.idx") for q in sent[3]) and "_g1_v12(" in sent[3][-1], sent[3]
        memory = build_store(memory_env())
        for line in [*lines, *others, *edits]:
            Chatrecord(memory).record(line)
        assert by_line(one.events("c")) == by_line(memory.events("c"))
        assert first.read_models.state("c") == Chatrecord(memory).read_models.state("c")
        assert [v.ok for v in first.verify_rows("c")] == [True]
        state = first.read_models.state("c")
        assert state is not None and [m.text for m in state.transcript.messages][-2:] == ["nur OG", "doch"]

    def test_a_process_that_did_not_write_a_conversations_rows_reads_them_for_its_first_edit(self) -> None:
        """A process that just started (a store object of its own) holds nothing of an older
        conversation's rows: its first edit reads them and then calls; an edit of a message it
        posted itself afterwards is one call; the rows equal a fold of the log."""

        lines = [start("c"), *tour_lines("c", 0), *tour_lines("c", 1)]
        writer = Chatrecord(self.open_store())
        for line in lines:
            writer.record(line)
        writer.turn_notes("c")
        store = self.open_store()
        chat = Chatrecord(store)
        edits = [
            {"type": "message_edited", "at": "2026-10-29T15:00:00Z", "message": 4, "text": "nur OG", "conversation": "c"},
            message("c", 5, text="neu", at="2026-10-29T15:01:00Z"),
            segment("c", "e/1", "e", at="2026-10-29T15:02:00Z"),
            {"type": "message_edited", "at": "2026-10-29T15:03:00Z", "message": 5, "text": "doch", "conversation": "c"},
        ]
        sent = statements_per_line(chat, edits)
        assert any(q.lstrip().startswith("SELECT u.idx") for q in sent[0]), sent[0]
        assert [len(s) for s in sent[1:3]] == [1, 1], sent
        # the second edit's view rows are the ones this process wrote (no read of them); the
        # writer decides it from the index, which it did not follow from its start
        assert not any(q.lstrip().startswith("SELECT u.idx") for q in sent[3]) and "_g1_v12(" in sent[3][-1], sent[3]
        memory = build_store(memory_env())
        for line in [*lines, *edits]:
            Chatrecord(memory).record(line)
        assert by_line(store.events("c")) == by_line(memory.events("c"))
        assert chat.read_models.state("c") == Chatrecord(memory).read_models.state("c")
        assert [v.ok for v in chat.verify_rows("c")] == [True]

    def test_a_version_another_writer_took_between_the_decision_and_the_append_is_decided_again(self) -> None:
        one, two = self.open_store(), self.open_store()
        for line in (start("c"), message("c", 1)):
            Chatrecord(one).record(line)
        one.known.forget(conversation_uuid("c"))  # decided from the index
        decide = one.decider.decide
        tries = []

        def decided_then_overtaken(*args: Any) -> Any:
            result = decide(*args)
            if not tries:
                Chatrecord(two).record(segment("c", "r1/1", "r1"))  # takes version 3 first
            tries.append(result[1][0].originator_version)
            return result

        one.decider.decide = decided_then_overtaken  # type: ignore[method-assign]
        result = Chatrecord(one).record(message("c", 2))
        assert tries == [3, 4]  # the first try's version was taken: decided again on the new state
        assert [e.originator_version for e in result.appended] == [4]
        assert log(one, "c") == [
            ("ConversationStarted", 1),
            ("UserMessagePosted", 2),
            ("SegmentReturned", 3),
            ("UserMessagePosted", 4),
        ]


class TestPostgresRestoredLog(PostgresStores):
    """A database restored (or failed over) under a running process can hold another history
    of the same length as the one the process wrote: what the process keeps is trusted only
    when the chain's hash at that version is the one it kept."""

    def _tables(self, conn: Any) -> list[str]:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (self.schema,)).fetchall()
        return sorted(r[0] for r in rows)

    def snapshot(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.schema}_saved"')
            for table in self._tables(conn):
                conn.execute(f'CREATE TABLE "{self.schema}_saved"."{table}" AS TABLE "{self.schema}"."{table}"')

    def restore(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for table in self._tables(conn):
                conn.execute(f'TRUNCATE "{self.schema}"."{table}"')
                conn.execute(f'INSERT INTO "{self.schema}"."{table}" SELECT * FROM "{self.schema}_saved"."{table}"')
            conn.execute(f'DROP SCHEMA "{self.schema}_saved" CASCADE')

    @pytest.mark.parametrize("then", ["card_decided", "user_message"])
    def test_a_writer_whose_last_append_a_restore_undid_decides_on_the_history_the_log_holds(self, then: str) -> None:
        from domain.errors import NoCardWaiting

        writer = Chatrecord(self.open_store())
        for line in (start("c"), message("c", 1), message("c", 2), message("c", 3)):
            writer.record(line)
        writer.turn_notes("c")
        self.snapshot()
        card = {
            **segment("c", "r1/1", "r1", outcome="awaiting_approval"),
            "pending": [{"toolName": "update_page_metadata", "table": "pages", "uid": 9, "fields": ["title"]}],
        }
        writer.record(card)  # version 5: a card waits
        self.restore()  # back to version 4
        Chatrecord(self.open_store()).record(segment("c", "r1/1", "r1"))  # another version 5: no card
        if then == "card_decided":
            with pytest.raises(NoCardWaiting):
                writer.record(
                    {
                        "type": "card_decided",
                        "at": AT,
                        "segment": "r1/1",
                        "approved": True,
                        "answer": "Übernehmen",
                        "conversation": "c",
                    }
                )
        else:
            writer.record(message("c", 4))
        verdicts = list(writer.verify("c"))
        assert [(v.problem, v.version) for v in verdicts] == [(None, 5 if then == "card_decided" else 6)]
        assert [(type(e).__name__, getattr(e, "outcome", None)) for e in writer.store.events("c")][4] == (
            "SegmentReturned",
            "completed",
        )
        fresh = Chatrecord(self.open_store())
        assert writer.turn_notes("c") == fresh.turn_notes("c")

    def test_a_reader_that_kept_a_turn_read_of_a_version_a_restore_undid_reads_the_history_the_log_holds(self) -> None:
        writer, reader = Chatrecord(self.open_store()), Chatrecord(self.open_store())
        for line in (start("c"), message("c", 1), segment("c", "r1/1", "r1"), message("c", 2)):
            writer.record(line)
        writer.turn_notes("c")  # the read models' tables, before the snapshot
        self.snapshot()
        writer.record(
            {
                **segment("c", "r2/1", "r2", outcome="awaiting_approval"),
                "pending": [{"toolName": "update_page_metadata", "table": "pages", "uid": 9, "fields": ["title"]}],
            }
        )
        before = reader.turn_notes("c")  # version 5: a card waits; kept, with what it read of the rows
        self.restore()  # back to version 4
        Chatrecord(self.open_store()).record(segment("c", "r2/1", "r2", outcome="failed"))  # another version 5

        after = reader.turn_notes("c")

        assert before.version == after.version == 5
        assert "paused for a card" in before.notes[-1].text and "paused for a card" not in after.notes[-1].text
        assert after == Chatrecord(self.open_store()).turn_notes("c")


class TestPostgresViewsLock(PostgresStores):
    def test_a_rebuild_holding_one_schemas_views_lock_holds_up_appends_there_and_nowhere_else(self) -> None:
        import psycopg

        from adapters.backends.postgres import OLD_VIEWS_LOCK_ID, views_lock_id

        other = f"{self.schema}_other"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{other}"')
        try:
            here = Chatrecord(self.open_store(POSTGRES_LOCK_TIMEOUT="1"))
            there = Chatrecord(self.open_store(POSTGRES_SCHEMA=other, POSTGRES_LOCK_TIMEOUT="1"))
            for chat in (here, there):
                chat.record(start("c"))
                chat.turn_notes("c")  # the read models, so the append writes view rows under the lock
            with psycopg.connect(self.url) as rebuild:  # as a rebuild's switch holds it, in a transaction
                rebuild.execute(
                    "SELECT pg_advisory_xact_lock(%s), pg_advisory_xact_lock(%s)", (views_lock_id(self.schema), OLD_VIEWS_LOCK_ID)
                )

                there.record(message("c", 1))  # another schema: not held up
                with pytest.raises(StoreUnusable, match="did not finish in time"):
                    here.record(message("c", 1))
            here.record(message("c", 1))  # the switch committed
            assert [len(log(chat.store, "c")) for chat in (here, there)] == [2, 2]
        finally:
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')
