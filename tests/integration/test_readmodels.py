"""The read models' contract, run once per backend: in memory, SQLite, PostgreSQL.

`ReadModelsContract` holds the tests; each backend says how to open a store on the test's own
database (`open_store`) and which read-model tables that database holds (`tables`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import hypothesis
import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings

from adapters.backends.postgres.prefetched_rows import PrefetchedRows
from adapters.backends.settings import memory_env
from adapters.bootstrap import build_store, read_models, read_models_for
from adapters.ingest import read_file, read_lines
from adapters.service.record_lines import RecordLines
from adapters.store.application import ConversationStore
from adapters.views import rebuild
from adapters.views.caches import BlocksCache
from adapters.views.held_rows import TurnRowsCache
from adapters.views.readmodels import NEWEST_ENTRIES, ReadModels
from adapters.views.rebuild import (
    MAX_WORKERS,
    MOST_OF_A_PART,
    MOST_WORKERS,
    PARTS_FROM,
    RebuildInterrupted,
    RebuildWorkerFailed,
    part_of,
)
from adapters.views.row_tables import TABLES
from adapters.views.summary_cache import _kept
from domain.errors import UnknownConversation
from domain.events import conversation_uuid
from projections import turn as turns
from projections.page_line import PageFilter, every_page
from projections.rules import UnknownRuleSet
from projections.transcript import Message
from projections.turn import NoTurnYet, build_turn_input
from projections.turn_notes import apply_notes
from tests.integration.backends import PostgresStores, SQLiteStores

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_properties import EPISODES, st, tell  # the random conversations of the unit properties
from test_row_fold import EXTRA, _more  # and what may come after their latest turn

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
T0 = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)


class Crash(Exception):
    """Stands for the process dying inside a transaction."""


# ---------------------------------------------------------------------- input lines


def ingest(store: ConversationStore, lines: list[dict[str, Any]] | Path) -> None:
    parsed = read_file(lines) if isinstance(lines, Path) else read_lines([orjson.dumps(x) for x in lines], "test")
    for line in parsed:
        store.handle(RecordLines([line]))


class Lines:
    """JSON lines of one conversation, as the chat writes them, each a second apart."""

    def __init__(self, conversation: str) -> None:
        self.conversation, self.tick, self.lines = conversation, 0, []

    def add(self, type: str, **fields: Any) -> Lines:
        self.tick += 1
        at = (T0 + timedelta(seconds=self.tick)).isoformat().replace("+00:00", "Z")
        self.lines.append({"type": type, "conversation": self.conversation, "at": at, **fields})
        return self


def model_round(r: int) -> list[dict[str, Any]]:
    return [{"kind": "request", "round": r, "durationMs": 0.0}, {"kind": "llm", "round": r, "durationMs": 2100.0}]


def card(field: str) -> dict[str, Any]:
    return {"toolName": "update_page_metadata", "table": "pages", "uid": 42, "fields": [field]}


def refusal(r: int) -> dict[str, Any]:
    """nr-llm's step for a declined card's call: an error of exactly 0.0 ms."""
    return {
        "kind": "tool",
        "round": r,
        "durationMs": 0.0,
        "toolName": "update_page_metadata",
        "toolIsError": True,
        "toolOutcome": "failed",
    }


def behalten_tour(conversation: str = "conv-behalten") -> list[dict[str, Any]]:
    """An SEO tour of three cards, each answered Behalten, then a question with page 0."""
    fields = ("title", "og_title", "og_description")
    tour = Lines(conversation).add("conversation_started", kind="chat", owner=7)
    tour.add("user_message", message=1, text="SEO optimieren", page=42, skill="3:seo-optimieren")
    steps = [
        *model_round(1),
        {"kind": "tool", "round": 1, "durationMs": 31.7, "toolName": "get_page", "toolIsError": False, "toolOutcome": "ok"},
    ]
    tour.add(
        "segment_returned",
        segment="run/1",
        run="run",
        trigger="turn",
        outcome="awaiting_approval",
        answer="Ich schlage einen Titel vor.",
        steps=steps,
        pending=[card("title")],
    )
    for n in range(1, len(fields) + 1):
        tour.add("card_decided", segment=f"run/{n}", approved=False, answer="Behalten", message=n + 1, text="Behalten")
        last = n == len(fields)
        tour.add(
            "segment_returned",
            segment=f"run/{n + 1}",
            run="run",
            trigger="approval",
            outcome="completed" if last else "awaiting_approval",
            answer="Fertig." if last else "Nächster.",
            steps=[refusal(n), *model_round(n + 1)],
            pending=[] if last else [card(fields[n])],
        )
    tour.add("tour_ended")
    tour.add("user_message", message=5, text="was ist hier passiert?", page=0)
    return tour.lines


def edited_chat(conversation: str = "conv-edit") -> list[dict[str, Any]]:
    """A chat whose first message is edited after a second one: the edit starts the last turn."""
    chat = Lines(conversation).add("conversation_started", kind="chat", owner=7)
    chat.add("user_message", message=1, text="Hallo", page=42)
    chat.add("segment_returned", segment="a/1", run="a", trigger="turn", outcome="completed", answer="Hi.", steps=model_round(1))
    chat.add("user_message", message=2, text="Und?", page=0)
    chat.add("message_edited", message=1, text="Hallo, Seite 42")
    return chat.lines


def long_chat(conversation: str = "conv-long") -> list[dict[str, Any]]:
    """A chat whose newest NEWEST_ENTRIES run record entries are of empty steps (no tool ran),
    so its notes reach older entries, ending with a user message."""
    chat = Lines(conversation).add("conversation_started", kind="chat", owner=7)
    tool = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
    for n in range(1, 2 * NEWEST_ENTRIES):
        chat.add("user_message", message=n, text=f"Frage {n}", page=42)
        chat.add(
            "segment_returned",
            segment=f"r{n}/1",
            run=f"r{n}",
            trigger="turn",
            outcome="completed",
            answer=f"Antwort {n}",
            steps=model_round(1) + ([tool] if n < NEWEST_ENTRIES - 5 else []),
        )
    chat.add("user_message", message=2 * NEWEST_ENTRIES, text="Und?", page=42)
    return chat.lines


class ReadModelsContract:
    """What every backend must do. Subclasses implement `open_store` and `tables`."""

    shares_database = True

    def open_store(self, views: bool = True) -> ConversationStore:
        raise NotImplementedError

    def tables(self, store: ConversationStore) -> set[str]:
        """Returns the names of the view tables the store's database holds."""
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> ConversationStore:
        return self.open_store()

    def second_store(self, store: ConversationStore) -> ConversationStore:
        return self.open_store() if self.shares_database else store

    def fold_of_log(self, store: ConversationStore, conversation: str, rules: str = "2026-11-02") -> turns.TurnState:
        state = turns.TurnState()
        for event in store.events(conversation):
            state = turns.apply(state, event, rules)
        return state

    def assert_rows_are_the_fold(self, models: ReadModels, store: ConversationStore, conversation: str) -> None:
        rows, fold = models.state(conversation), self.fold_of_log(store, conversation, models.active_rules())
        assert rows is not None
        assert [e.to_json() for e in rows.record.entries] == [e.to_json() for e in fold.record.entries]
        assert rows.record.entries == fold.record.entries
        assert rows.outcomes.outcomes == fold.outcomes.outcomes
        assert models.summary(conversation).outcomes == len(fold.outcomes.outcomes)  # what a turn read counts
        assert rows.transcript == fold.transcript
        assert rows.view.to_json() == fold.view.to_json()

    # ------------------------------------------------------------------ reads

    def test_the_demos_latest_turn_is_what_the_fold_of_its_log_gives(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)

        turn = models.turn_input("conv-demo-seo")

        expected = build_turn_input(store.events("conv-demo-seo"), "2026-11-02")
        assert turn.notes == expected.notes and len(turn.notes) == 14
        assert turn.to_json() == expected.to_json()
        assert models.active_rules() == "2026-11-02"
        self.assert_rows_are_the_fold(models, store, "conv-demo-seo")

    def test_turn_notes_put_into_the_transcript_give_the_turns_messages(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        ingest(store, behalten_tour())
        for conversation, hidden in (("conv-demo-seo", None), ("conv-demo-seo", 42), ("conv-behalten", None)):
            can_see = lambda page, hidden=hidden: page != hidden
            expected = models.turn_input(conversation, can_see_page=can_see)
            transcript = models.state(conversation).transcript.messages

            notes = models.turn_notes(conversation, can_see_page=can_see)

            assert [n.text for n in notes.notes] == list(expected.notes)
            assert apply_notes(transcript, notes.notes) == expected.messages
            assert notes.page_line == expected.system
            assert notes.version == len(store.events(conversation))

    def test_turn_notes_that_reach_past_the_newest_entries_read_the_older_ones(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, long_chat())
        expected = models.turn_input("conv-long")
        transcript = models.state("conv-long").transcript.messages

        notes = models.turn_notes("conv-long")

        assert [n.text for n in notes.notes] == list(expected.notes)
        assert any("get_page" in n.text for n in notes.notes)  # an entry older than the newest read first
        assert apply_notes(transcript, notes.notes) == expected.messages

    def test_a_turn_read_that_keeps_its_renders_reads_as_a_fresh_one_after_every_line(self, store: ConversationStore) -> None:
        models = read_models(store)
        lines = [orjson.loads(line) for line in DEMO.read_bytes().splitlines() if line.strip()]
        hidden = PageFilter(hidden=frozenset({42}))
        for line in lines:
            ingest(store, [line])
            if store.get("conv-demo-seo") is None or models.summary("conv-demo-seo").turn is None:
                continue
            fresh = read_models(self.second_store(store))  # nothing decoded or rendered yet
            for check in (every_page, hidden):
                assert models.turn_notes("conv-demo-seo", check).to_json() == fresh.turn_notes("conv-demo-seo", check).to_json()
        kept = models.turn_notes("conv-demo-seo", hidden)
        assert [n.text for n in kept.notes] == list(models.turn_input("conv-demo-seo", hidden).notes)
        assert all("pages:42" not in n.text for n in kept.notes)
        assert any("pages:42" in n.text for n in models.turn_notes("conv-demo-seo").notes)

    def test_an_edit_that_cuts_card_outcomes_counts_them_out_of_the_summary(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())  # three cards kept: three card outcomes
        assert models.summary("conv-behalten").outcomes == 3

        ingest(store, Lines("conv-behalten").add("message_edited", message=1, text="Nur den Titel").lines)

        assert models.summary("conv-behalten").outcomes == 0  # on PostgreSQL appended in one round trip
        self.assert_rows_are_the_fold(models, store, "conv-behalten")

    def test_the_notes_kept_of_a_conversation_are_those_of_its_latest_read_version(self, store: ConversationStore) -> None:
        """Each turn read keeps its notes in place of those of the conversation's earlier version
        (which no read asks for again): after four reads between appends one answer is kept, of
        the version read last, and a read of that version is answered by it."""
        models = read_models(store)
        ingest(store, DEMO)
        for number in (4, 5, 6, 7):
            ingest(store, Lines("conv-demo-seo").add("user_message", message=number, text="Weiter", page=42).lines)
            models.turn_notes("conv-demo-seo")
        version = len(store.events("conv-demo-seo"))
        kept = models.cache.every_notes(conversation_uuid("conv-demo-seo"))
        assert [(v, len(notes.notes) > 0) for v, _, notes in kept] == [((version, 0), True)]  # (version, folds in place)
        assert models.turn_notes("conv-demo-seo") is kept[0][2]

    def test_a_turn_read_whose_kept_notes_are_gone_reads_the_rows_again(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        first = models.turn_notes("conv-demo-seo").to_json()
        models.cache.drop_notes()  # the kept answer evicted; its summary version is still remembered

        again = models.turn_notes("conv-demo-seo").to_json()

        assert again == first
        assert len(again["notes"]) == 14

    def test_each_conversations_rows_are_the_fold_of_its_log(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        ingest(store, behalten_tour())
        ingest(store, edited_chat())

        for conversation in ("conv-demo-seo", "conv-behalten", "conv-edit"):
            self.assert_rows_are_the_fold(models, store, conversation)
        assert models.turn_input("conv-edit").message == 1  # the edit started the latest turn

    def test_a_writer_without_views_is_caught_up_by_the_next_read(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        writer = self.open_store(views=False) if self.shares_database else store  # a writer that keeps no views
        ingest(writer, Lines("conv-demo-seo").add("user_message", message=4, text="Und jetzt?", page=42).lines)

        turn = models.turn_input("conv-demo-seo")

        assert turn.message == 4
        assert turn.to_json() == build_turn_input(store.events("conv-demo-seo")).to_json()
        assert models.summary("conv-demo-seo").version == len(store.events("conv-demo-seo"))

    def test_each_event_is_applied_once(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())
        key = conversation_uuid("conv-behalten")
        events = store.events("conv-behalten")
        before = models.state("conv-behalten")

        models.apply(key, events)  # delivered again: nothing changes
        models.apply(key, events[3:5])
        models.apply(key)

        assert models.state("conv-behalten") == before
        assert models.summary("conv-behalten").version == len(events)

    def test_the_run_record_keeps_its_newest_entries_and_says_older_ones_exist(self, store: ConversationStore) -> None:
        models = read_models(store)
        chat = Lines("conv-long").add("conversation_started", kind="chat", owner=7)
        chat.add("user_message", message=1, text="los", page=42)
        for n in range(1, 206):
            chat.add(
                "segment_returned",
                segment=f"s/{n}",
                run=f"s{n}",
                trigger="turn",
                outcome="completed",
                answer=f"Schritt {n}.",
                steps=[
                    *model_round(1),
                    {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False},
                ],
            )
        chat.add("user_message", message=2, text="und?", page=0)
        ingest(store, chat.lines)

        state = models.state("conv-long")
        notes = models.turn_notes("conv-long")

        assert [e.segment for e in state.record.entries] == [f"s/{n}" for n in range(6, 206)]
        assert state.record.dropped == 5
        assert len(notes.notes) == 36  # the 6000-character budget holds 36 of these notes
        assert notes.notes[0].text.startswith("[Chat record — written by the chat from the run, not by the assistant: Older")
        assert [n.text for n in notes.notes] == list(models.turn_input("conv-long").notes)

    def test_an_unknown_conversation_is_refused(self, store: ConversationStore) -> None:
        models = read_models(store)
        with pytest.raises(UnknownConversation, match='no conversation "nope"'):
            models.turn_notes("nope")
        assert models.state("nope") is None

    def test_a_conversation_without_a_turn_has_no_turn_input(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, Lines("conv-new").add("conversation_started", kind="chat", owner=7).lines)
        with pytest.raises(NoTurnYet):
            models.turn_input("conv-new")

    def test_the_latest_turn_past_the_records_cap_is_built_from_the_rows_as_the_fold_builds_it(self, store) -> None:
        """205 turns, then a card and its decision after the last user message: the entries
        that fell out of the record after that turn started are set aside, and the turn's
        input built from the rows (its transcript up to the turn, the entries it saw, the card
        outcomes before it) is the fold's, byte for byte, live and after a rebuild."""
        from factories import Chat, call, model_round

        conversation = f"conv-{uuid.uuid4().hex[:8]}"
        chat = Chat(conversation=conversation)
        for n in range(205):
            chat.user(f"Frage {n}", page=42)
            chat.segment("turn", "completed", f"Antwort {n}", [*model_round(1)], run=f"r{n}")
        chat.user("Noch eine Karte", page=42)
        chat.segment("turn", "awaiting_approval", "Karte", [*model_round(1)], [call(fields=("title",))], run="card")
        chat.decide(True, "Übernehmen")
        chat.segment("approval", "completed", "Gespeichert.", [*model_round(2)], run="card")
        models = read_models(store)
        store.save(*chat.events)
        models.apply(conversation_uuid(conversation), chat.events)

        summary = models.summary(conversation)
        assert summary.turn_intact and summary.turn.version < summary.version and len(summary.turn_kept) == 2
        expected = build_turn_input(chat.events).to_json()
        assert len(expected["record"]) == 200 and expected["record"][0]["segment"] == "r5/6"
        assert models.turn_input(conversation).to_json() == expected
        models.rebuild("2026-11-02")
        assert models.turn_input(conversation).to_json() == expected
        self.assert_rows_are_the_fold(models, store, conversation)

    @settings(
        max_examples=12,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.differing_executors],
    )
    @given(legacy=st.integers(0, 2), episodes=EPISODES)
    def test_random_conversations_rows_are_the_fold_of_their_log(self, store, legacy, episodes, monkeypatch) -> None:
        conversation = f"conv-{uuid.uuid4().hex[:8]}"
        chat = tell(legacy, episodes, conversation)
        models = read_models(store)
        store.save(*chat.events)

        models.apply(conversation_uuid(conversation), chat.events)

        self.assert_rows_are_the_fold(models, store, conversation)
        assert models.turn_input(conversation).to_json() == build_turn_input(chat.events).to_json()
        models.rebuild("2026-11-02")  # the rebuild's buffered page writes give the same rows
        self.assert_rows_are_the_fold(models, store, conversation)
        with monkeypatch.context() as patch:  # and so do pages of 3 events: rows written by an earlier page
            patch.setattr("adapters.views.log_fold.PAGE", 3)
            models.rebuild("2026-11-02")
        self.assert_rows_are_the_fold(models, store, conversation)

    def test_a_rebuild_in_small_pages_gives_the_fold_of_the_log(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        models = read_models(store)
        chat = Lines("conv-long").add("conversation_started", kind="chat", owner=7)
        for n in range(1, 206):  # entries fall out of the record (200 kept) in a later page than they were written
            chat.add("user_message", message=n, text=f"weiter {n}", page=40 + n % 3)
            chat.add(
                "segment_returned",
                segment=f"s/{n}",
                run=f"s{n}",
                trigger="turn",
                outcome="completed",
                answer=f"Schritt {n}.",
                steps=model_round(1),
            )
        ingest(store, chat.lines)
        ingest(store, DEMO)
        ingest(store, behalten_tour())
        ingest(store, edited_chat())
        monkeypatch.setattr("adapters.views.log_fold.PAGE", 7)

        report = models.rebuild("2026-11-02")

        assert report.events == store.max_notification_id() and report.conversations == 4
        state = models.state("conv-long")
        assert [e.segment for e in state.record.entries] == [f"s/{n}" for n in range(6, 206)]
        assert state.record.dropped == 5
        for conversation in ("conv-long", "conv-demo-seo", "conv-behalten", "conv-edit"):
            self.assert_rows_are_the_fold(models, store, conversation)
            assert models.turn_input(conversation).to_json() == build_turn_input(store.events(conversation)).to_json()

    def test_a_rebuild_of_interleaved_conversations_keeping_one_summary_gives_the_fold_of_the_log(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # pages of 5 events of two conversations at once, and only one summary kept between pages:
        # the other's summary is read, after the pages before were written
        models = read_models(store)
        chats = [Lines(f"conv-{name}").add("conversation_started", kind="chat", owner=7) for name in ("a", "b")]
        for n in range(1, 13):
            for chat in chats:
                chat.add("user_message", message=n, text=f"weiter {n}", page=40 + n % 3)
                chat.add(
                    "segment_returned",
                    segment=f"{chat.conversation}/{n}",
                    run=f"r{n}",
                    trigger="turn",
                    outcome="completed",
                    answer=f"Schritt {n}.",
                    steps=model_round(1),
                )
        ingest(store, [line for pair in zip(*(chat.lines for chat in chats), strict=True) for line in pair])
        monkeypatch.setattr("adapters.views.log_fold.PAGE", 5)
        monkeypatch.setattr("adapters.views.log_fold.KEPT_HEADS", 1)

        report = models.rebuild("2026-11-02")

        assert report.events == store.max_notification_id() and report.conversations == 2
        for chat in chats:
            self.assert_rows_are_the_fold(models, store, chat.conversation)
            assert models.state(chat.conversation).transcript.messages[-1].text == "Schritt 12."

    # ------------------------------------------------------------------ rule sets

    def test_rebuild_folds_the_log_under_another_rule_set_and_switches(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())
        before = self.tables(store)

        report = models.rebuild("2026-11-01")

        assert report.rules == "2026-11-01" and report.old_rules == "2026-11-02"
        assert report.events == store.max_notification_id() and report.conversations == 1
        assert models.active_rules() == read_models(self.second_store(store)).active_rules() == "2026-11-01"
        assert set(report.dropped) == before and self.tables(store) == set(report.tables)
        assert (
            models.turn_input("conv-behalten").to_json()
            == build_turn_input(store.events("conv-behalten"), "2026-11-01").to_json()
        )
        self.assert_rows_are_the_fold(models, store, "conv-behalten")

    def test_a_fold_that_fails_leaves_the_line_stored_and_the_next_read_catches_up(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        events = len(store.events("conv-demo-seo"))

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug in the fold")

        monkeypatch.setattr("adapters.views.live_rows.fold_into", broken)
        ingest(store, Lines("conv-demo-seo").add("user_message", message=4, text="Und jetzt?", page=42).lines)
        monkeypatch.undo()

        assert len(store.events("conv-demo-seo")) == events + 1  # the line is stored
        assert "the read models were not updated" in caplog.text
        assert models.turn_input("conv-demo-seo").message == 4  # the read folds what the summary lacks
        assert models.summary("conv-demo-seo").version == events + 1
        self.assert_rows_are_the_fold(models, store, "conv-demo-seo")

    def test_rebuild_refuses_an_unknown_rule_set(self, store: ConversationStore) -> None:
        with pytest.raises(UnknownRuleSet):
            read_models(store).rebuild("2027-01-01")

    def test_diff_names_the_entries_and_notes_another_rule_set_changes(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())

        diffs = models.diff("2026-11-01")

        assert [d.conversation for d in diffs] == ["conv-behalten"]
        changed = {segment for segment, _, _ in diffs[0].records_changed}
        assert changed == {"run/2", "run/3", "run/4"}  # the three Behalten refusals read as failed calls
        assert diffs[0].notes_added and diffs[0].notes_removed
        assert models.diff("2026-11-02")[0].changed is False

    def plant(self, models: ReadModels, conversation: str, message: int) -> uuid.UUID:
        """Reads and writes through `models` so its caches keep what they keep of `conversation`,
        and plants in each what a backend's reads leave out (some keep on PostgreSQL only)."""
        cid = conversation_uuid(conversation)
        ingest(models.store, Lines(conversation).add("user_message", message=message, text="Noch einmal", page=42).lines)
        models.turn_notes(conversation)
        models.turn_input(conversation)
        cache, summary = models.cache, models.summary(conversation)
        cache.summaries.put(cid, summary)
        cache.held.put(cid, TurnRowsCache(models.live_pointer().generation, summary.version, (), (), (), 0))
        cache.known.put(cid, BlocksCache(models.live_pointer().generation, summary.version, -1, {}, {}))
        cache.messages.put(str(cid), "{}", Message(role="user", text="x"))
        return cid

    CACHES = ["heads", "held", "known", "messages", "notes", "notes_at"]

    def test_nothing_cached_of_a_conversation_survives_its_forget_an_erasure_or_a_rebuild(self, store: ConversationStore) -> None:
        """Whatever the process kept of a conversation is gone after the store forgets it (its
        log another history: restored, failed over), after an erasure and after a rebuild; a
        forget leaves the other conversations' kept things alone."""
        models = read_models(store)
        ingest(store, DEMO)
        ingest(store, Lines("conv-other").add("conversation_started", kind="chat", owner=7).lines)
        other = self.plant(models, "conv-other", 1)
        cid = self.plant(models, "conv-demo-seo", 4)
        assert models.cache.holds(cid) == self.CACHES
        store.known.forget(cid)  # what the store does when it finds another history
        assert (models.cache.holds(cid), models.cache.holds(other)) == ([], self.CACHES)

        self.plant(models, "conv-demo-seo", 5)
        assert models.erase("conv-demo-seo")
        assert (models.cache.holds(cid), models.cache.holds(other)) == ([], [])

        self.plant(models, "conv-demo-seo", 6)
        models.rebuild("2026-11-02")
        assert models.cache.holds(cid) == []
        assert models.turn_notes("conv-demo-seo").to_json() == read_models_for(store).turn_notes("conv-demo-seo").to_json()


class SharedDatabaseContract(ReadModelsContract):
    """What backends whose stores share a database with other processes must do besides."""

    @pytest.mark.parametrize("workers", [1, 2])
    def test_an_interrupted_rebuild_drops_its_half_built_tables_and_says_so(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch, workers: int
    ) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        for n in range(4):  # some in each part of two
            ingest(store, behalten_tour(f"conv-behalten-{n}"))
        tables = self.tables(store)
        before = models.turn_notes("conv-demo-seo")
        monkeypatch.setattr("adapters.views.log_fold.PAGE", 7)  # pages of 7 events: the second is never folded
        guarded: list[bool] = []

        def interrupted(done: int, total: int) -> None:
            raise KeyboardInterrupt  # as Ctrl-C after the first page

        @contextlib.contextmanager
        def guard() -> Any:
            guarded.append(True)
            yield

        with pytest.raises(RebuildInterrupted) as stopped:
            models.rebuild("2026-11-01", progress=interrupted, workers=workers, guard=guard)

        assert str(stopped.value) == (
            "rebuild under 2026-11-01: the half-built tables views_g2_* were dropped; nothing was "
            "switched: the live read models are as they were (2026-11-02); run it again to rebuild"
        )
        assert guarded == [True]  # the drop ran in the caller's guard
        assert self.tables(store) == tables
        assert models.active_rules() == read_models(self.second_store(store)).active_rules() == "2026-11-02"
        assert read_models(self.second_store(store)).turn_notes("conv-demo-seo") == before
        report = models.rebuild("2026-11-01")
        assert report.generation == 3 and self.tables(store) == set(report.tables)

    def test_a_turn_read_after_an_edit_does_not_place_notes_by_the_rows_the_edit_cut(self, store: ConversationStore) -> None:
        # the kept read knew the answer at index 3 ("B"); the edit cuts it and a longer answer
        # takes index 3: its note goes after that answer's end, not at the cut one's
        chat = Lines("conv-cut").add("conversation_started", kind="chat", owner=7)
        for n, answer in ((1, "A"), (2, "B"), (3, "C")):
            chat.add("user_message", message=n, text=f"Frage {n}", page=42)
            chat.add(
                "segment_returned",
                segment=f"{n}/1",
                run=str(n),
                trigger="turn",
                outcome="completed",
                answer=answer,
                steps=model_round(1),
            )
        models = read_models(store)
        ingest(store, chat.lines)
        before = models.turn_notes("conv-cut")
        chat.lines.clear()
        chat.add("message_edited", message=2, text="Frage 2, anders")
        chat.add(
            "segment_returned",
            segment="2b/1",
            run="2b",
            trigger="turn",
            outcome="completed",
            answer="Eine viel längere Antwort",
            steps=model_round(1),
        )
        chat.add("user_message", message=3, text="Frage 3", page=42)
        ingest(store, chat.lines)

        kept = models.turn_notes("conv-cut")

        assert [(n.index, n.into, n.at) for n in before.notes] == [(1, "assistant", 1), (3, "assistant", 1), (5, "assistant", 1)]
        assert [(n.index, n.into, n.at) for n in kept.notes] == [(1, "assistant", 1), (3, "assistant", 25)]
        assert kept.to_json() == read_models(self.second_store(store)).turn_notes("conv-cut").to_json()

    @settings(
        max_examples=10,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.differing_executors],
    )
    @given(legacy=st.integers(0, 2), episodes=EPISODES)
    def test_a_turn_read_that_keeps_what_it_read_of_the_transcript_reads_as_a_fresh_one_after_every_event(
        self, store, legacy, episodes
    ) -> None:
        # edits, truncations and legacy rows rewrite rows a kept read knew (`BlocksCache`)
        conversation = f"conv-{uuid.uuid4().hex[:8]}"
        chat = tell(legacy, episodes, conversation)
        models, second = read_models(store), self.second_store(store)
        reads = 0
        for event in chat.events:
            store.save(event)
            models.apply(conversation_uuid(conversation), [event])
            if models.summary(conversation).turn is None:
                continue
            kept = models.turn_notes(conversation)
            fresh = read_models(second).turn_notes(conversation)  # knows nothing of the rows yet
            assert kept.to_json() == fresh.to_json()
            reads += 1
        if reads and type(models.storage).__name__ == "PostgresViewStorage":  # the one whose turn read keeps them
            assert _kept(models.cache.known, conversation_uuid(conversation)) is not None

    def test_a_rebuild_in_another_process_is_followed_by_this_ones_next_appends(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())  # this process keeps the summaries and the pointer it wrote
        other = read_models(self.second_store(store))

        other.rebuild("2026-11-01")  # switches generations and drops the tables this process wrote
        lines = Lines("conv-behalten")
        for number in (6, 7):
            lines.add("user_message", message=number, text=f"Frage {number}", page=42)
        ingest(store, lines.lines)

        assert models.turn_input("conv-behalten").message == 7
        assert models.active_rules() == "2026-11-01"
        self.assert_rows_are_the_fold(models, store, "conv-behalten")

    def test_a_turn_read_after_a_rebuild_in_another_process_reads_the_new_generation(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())
        before = models.turn_notes("conv-behalten")  # this process takes generation 1 as live

        read_models(self.second_store(store)).rebuild("2026-11-01")  # drops generation 1's tables

        after = models.turn_notes("conv-behalten")
        assert (before.rules, after.rules) == ("2026-11-02", "2026-11-01")
        assert after == read_models(self.second_store(store)).turn_notes("conv-behalten")

    def test_an_append_after_a_rebuild_elsewhere_writes_the_new_generations_rows_in_its_own_transaction(
        self, store: ConversationStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())  # this process keeps the summaries and the pointer it wrote
        read_models(self.second_store(store)).rebuild("2026-11-01")  # drops the tables this process wrote
        caplog.clear()

        ingest(store, Lines("conv-behalten").add("user_message", message=6, text="Frage 6", page=42).lines)

        assert not [r for r in caplog.records if "not updated" in r.getMessage()]  # tried again, live pointer
        key = conversation_uuid("conv-behalten")
        with models.storage.transaction(write=False) as curs:
            live = models.storage.pointer(curs)
            assert live is not None and live.rules == "2026-11-01"
            summary = models.storage.rows(curs, live.generation, key).summary()
        assert summary is not None and summary.version == len(store.events("conv-behalten"))  # no gap left to a read

    def test_a_view_update_that_fails_is_logged_in_one_line(self, caplog: pytest.LogCaptureFixture) -> None:
        from adapters.views.ports import not_updated

        not_updated(RuntimeError('relation "s.views_g1_messages" does not exist\nLINE 1: INSERT INTO ...\n   ^'))

        assert [r.getMessage() for r in caplog.records] == [
            'chatrecord: the read models were not updated with this write (relation "s.views_g1_messages" '
            "does not exist); the next read catches up"
        ]

    def test_after_one_failed_view_update_the_next_append_updates_the_views_again(
        self, store: ConversationStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        models = read_models(store)
        ingest(store, behalten_tour())
        read_models(self.second_store(store)).rebuild("2026-11-01")  # drops the tables this process wrote
        ingest(store, Lines("conv-behalten").add("user_message", message=6, text="Frage 6", page=42).lines)
        caplog.clear()

        ingest(store, Lines("conv-behalten").add("user_message", message=7, text="Frage 7", page=42).lines)
        assert models.turn_input("conv-behalten").message == 7  # the read folds the gap message 6 left
        ingest(store, Lines("conv-behalten").add("user_message", message=8, text="Frage 8", page=42).lines)

        assert not [r for r in caplog.records if "not updated" in r.getMessage()]
        key = conversation_uuid("conv-behalten")
        with models.storage.transaction(write=False) as curs:
            live = models.storage.pointer(curs)
            assert live is not None
            summary = models.storage.rows(curs, live.generation, key).summary()
        assert summary is not None and summary.version == len(store.events("conv-behalten"))  # written inline, no read


class TestInMemoryReadModels(ReadModelsContract):
    shares_database = False

    def open_store(self, views: bool = True) -> ConversationStore:
        return build_store(memory_env(), views=views)

    def tables(self, store: ConversationStore) -> set[str]:
        backend = read_models(store).storage
        return {f"views_g{g}_{t}" for g in backend.generations(None) for t in TABLES}


class TestSQLiteReadModels(SQLiteStores, SharedDatabaseContract):
    def tables(self, store: ConversationStore) -> set[str]:
        with sqlite3.connect(self.path) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "chatrecord_views" in names and "stored_events" in names
        return {n for n in names if n.startswith("views_")}

    def test_a_rebuild_on_sqlite_folds_in_this_process_whatever_it_is_asked(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        assert models.rebuild_workers(10**6) == models.rebuild_workers(10, workers=4) == 1  # one writer at a time
        report = models.rebuild("2026-11-01", workers=4)
        assert report.workers == 1 and report.events == store.max_notification_id()
        self.assert_rows_are_the_fold(models, store, "conv-demo-seo")

    def test_a_failing_view_statement_rolls_back_to_its_savepoint(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        events = len(store.events("conv-demo-seo"))
        with sqlite3.connect(self.path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON views_g1_messages BEGIN SELECT RAISE(ABORT, 'no more messages'); END"
            )

        ingest(store, Lines("conv-demo-seo").add("user_message", message=4, text="Und jetzt?", page=42).lines)

        assert len(store.events("conv-demo-seo")) == events + 1
        with sqlite3.connect(self.path) as conn:
            conn.execute("DROP TRIGGER refuse")
        assert models.turn_input("conv-demo-seo").message == 4
        self.assert_rows_are_the_fold(models, store, "conv-demo-seo")

    def test_a_store_of_the_previous_version_gets_its_views_rebuilt_from_the_log(self, caplog: pytest.LogCaptureFixture) -> None:
        old = self.open_store(views=False)
        ingest(old, behalten_tour())  # no read models yet: events only
        with sqlite3.connect(self.path) as conn:  # what the previous version left
            conn.execute("CREATE TABLE chatrecord_projection (id INTEGER, generation INTEGER, rules TEXT, next INTEGER)")
            conn.execute("INSERT INTO chatrecord_projection VALUES (1, 3, '2026-11-01', 4)")
            conn.execute("CREATE TABLE readmodels_g3_conversations (originator_id TEXT, state TEXT)")

        store = self.open_store()  # this version's store, with its read models
        models = read_models(store)

        assert "rebuilt from the log" in caplog.text
        assert models.active_rules() == "2026-11-01"
        with sqlite3.connect(self.path) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not {n for n in names if n.startswith("readmodels_") or n == "chatrecord_projection"}
        self.assert_rows_are_the_fold(models, store, "conv-behalten")


class TestPostgresReadModels(PostgresStores, SharedDatabaseContract):
    def tables(self, store: ConversationStore) -> set[str]:
        with psycopg.connect(self.url) as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (self.schema,)
            ).fetchall()
        names = {r[0] for r in rows}
        assert "chatrecord_views" in names and "conversationstore_events" in names
        return {n for n in names if n.startswith("views_")}

    def test_the_turn_read_after_this_processs_append_reads_no_entries_and_gives_the_notes_of_the_rows(
        self, store: ConversationStore
    ) -> None:
        """After its own append the writer's turn read leaves the newest entries and card
        outcomes unread (it holds them, `TurnRowsCache`, followed through the append's document), and
        its notes are those a reader of the database alone gives, line after line: through
        declined cards (outcomes), an edit (its cut of card outcomes: read again) and a line
        another process appended (a version the writer did not follow: read again)."""
        models = read_models(store)
        other = self.second_store(store)
        used: list[bool] = []
        turn_rows = models.storage.turn_rows

        def counted(*args: Any, **kwargs: Any) -> Any:
            fetched = turn_rows(*args, **kwargs)
            used.append(fetched.held)
            return fetched

        models.storage.turn_rows = counted  # type: ignore[method-assign]
        tour = behalten_tour()
        tour.append(Lines("conv-behalten").add("message_edited", message=1, text="Nur den Titel").lines[0])
        tour.append(Lines("conv-behalten").add("user_message", message=6, text="Und jetzt?", page=42).lines[0])
        seen = []
        for number, line in enumerate(tour):
            writer = other if number == len(tour) - 1 else store  # the last line from another process
            ingest(writer, [line])
            if number == 0:
                continue
            notes = models.turn_notes("conv-behalten").to_json()
            assert notes == read_models(self.second_store(store)).turn_notes("conv-behalten").to_json(), line["type"]
            seen.append((line["type"], used[-1]))
        assert [kind for kind, held in seen if not held] == ["user_message", "message_edited", "user_message"]
        assert sum(held for _, held in seen) == len(seen) - 3 >= 6

    def test_a_turn_reads_prepared_statements_never_meet_a_pipelined_append_that_failed(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        used: list[Any] = []
        run = models.storage.run
        models.storage.run = lambda curs, *args: used.append(curs.connection) or run(curs, *args)  # type: ignore[method-assign]
        expected = models.turn_notes("conv-demo-seo")
        conn = used[0]  # idle in the pool now
        assert conn.prepare_threshold is None  # restored after the read's statements
        assert conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()["n"] >= 2
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                f'CREATE FUNCTION "{self.schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS '
                "$$ BEGIN RAISE EXCEPTION 'no more messages'; END $$"
            )
            conn.execute(
                f'CREATE TRIGGER refuse BEFORE INSERT ON "{self.schema}".views_g1_messages '
                f'FOR EACH ROW EXECUTE FUNCTION "{self.schema}".refuse()'
            )

        ingest(store, Lines("conv-demo-seo").add("user_message", message=4, text="Und jetzt?", page=42).lines)
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP TRIGGER refuse ON "{self.schema}".views_g1_messages')

        for number in (5, 6):  # reads and appends on the same connection, after the failed pipeline
            notes = models.turn_notes("conv-demo-seo")
            assert notes.version == len(store.events("conv-demo-seo"))
            ingest(store, Lines("conv-demo-seo").add("user_message", message=number, text="Weiter", page=42).lines)
        assert models.turn_notes("conv-demo-seo") == read_models(self.second_store(store)).turn_notes("conv-demo-seo")
        assert expected.notes  # the demo's notes, placed before the appends

    @staticmethod
    def counted_turn_input(models: ReadModels, conversation: str) -> tuple[dict[str, Any], int, bool]:
        """Returns `turn_input(conversation).to_json()`, the statements its reads sent (BEGIN and
        ROLLBACK of a snapshot included) and whether it was answered by the one statement
        (`_turn_input_in_one`) rather than the reads row by row."""
        sent: list[str] = []
        reading, read = models.storage.reading, models._read
        fell_back: list[bool] = []

        class Counted:  # the cursor, its statements counted
            def __init__(self, curs: Any) -> None:
                self.curs = curs

            def execute(self, *args: Any, **kwargs: Any) -> Any:
                sent.append(str(args[0])[:40])
                return self.curs.execute(*args, **kwargs)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.curs, name)

        @contextlib.contextmanager
        def counting(snapshot: bool = True) -> Any:
            with reading(snapshot) as curs:
                if snapshot:
                    sent.append("BEGIN")
                yield Counted(curs)
                if snapshot:
                    sent.append("ROLLBACK")

        def falling_back(*args: Any, **kwargs: Any) -> Any:
            fell_back.append(True)
            return read(*args, **kwargs)

        models.storage.reading, models._read = counting, falling_back  # type: ignore[method-assign]
        try:
            built = models.turn_input(conversation).to_json()
        finally:
            models.storage.reading, models._read = reading, read  # type: ignore[method-assign]
        return built, len(sent), not fell_back

    def test_the_latest_turn_is_read_in_one_statement_as_the_fold_builds_it(self, store: ConversationStore) -> None:
        """The turn at the summary, an edit's turn, a turn before the summary (its card, decision and
        continuation after it) whose entries fell out of the record after it started (set
        aside), a summary behind its log (events saved without the read models) and a replaced
        transcript after the turn (no longer intact): each read is the fold's, byte for byte;
        the intact ones in one statement, the others read as before."""
        from factories import Chat, call

        models = read_models(store)
        ingest(store, DEMO)  # its last line is the question: the turn at the summary
        ingest(store, edited_chat())
        capped = Chat(conversation="conv-capped")
        for n in range(205):
            capped.user(f"Frage {n}", page=42)
            capped.segment("turn", "completed", f"Antwort {n}", [*model_round(1)], run=f"r{n}")
        capped.user("Noch eine Karte", page=42)
        capped.segment("turn", "awaiting_approval", "Karte", [*model_round(1)], [call(fields=("title",))], run="card")
        capped.decide(True, "Übernehmen")
        capped.segment("approval", "completed", "Gespeichert.", [*model_round(2)], run="card")
        replaced = Chat(kind="alt_text", conversation="conv-replaced")
        replaced.user("Hallo", page=42)
        replaced.segment("turn", "completed", "Hi.", [*model_round(1)], run="a")
        replaced.replace([("user", "neu"), ("assistant", "ok"), ("user", "weiter")])
        for chat in (capped, replaced):
            store.save(*chat.events)
            models.apply(conversation_uuid(chat.state.conversation), chat.events)
        models.summary("conv-demo-seo")  # the live generation known
        summary = models.summary("conv-capped")
        assert summary.turn_intact and summary.turn.version < summary.version and summary.turn_kept  # entries set aside
        assert not models.summary("conv-replaced").turn_intact

        for conversation, in_one in {
            "conv-demo-seo": True,
            "conv-edit": True,
            "conv-capped": True,
            "conv-replaced": False,
        }.items():
            built, sent, one = self.counted_turn_input(models, conversation)
            assert (built, one) == (build_turn_input(store.events(conversation)).to_json(), in_one), conversation
            assert sent == 1 if in_one else sent > 1, (conversation, sent)

        ingest(store, Lines("conv-demo-seo").add("user_message", message=4, text="Und jetzt?", page=0).lines)
        built, sent, one = self.counted_turn_input(models, "conv-demo-seo")
        assert (built, sent, one) == (build_turn_input(store.events("conv-demo-seo")).to_json(), 1, True)

        behind = Chat(conversation="conv-behind")  # saved without the read models: the summary lags
        behind.user("Hallo", page=42)
        behind.segment("turn", "completed", "Hi.", [*model_round(1)], run="h1")
        store.save(*behind.events)  # the store's save applies no read models
        assert models.summary("conv-behind").version == len(behind.events)  # caught up by the read
        behind.user("Und?", page=42)
        store.save(*behind.events[3:])
        built, sent, one = self.counted_turn_input(models, "conv-behind")
        assert built == build_turn_input(behind.events).to_json() and not one

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.differing_executors],
    )
    @given(legacy=st.integers(0, 2), episodes=EPISODES, extra=EXTRA)
    def test_random_conversations_latest_turn_in_one_statement_is_the_fold(self, store, legacy, episodes, extra) -> None:
        conversation = f"conv-{uuid.uuid4().hex[:8]}"
        chat = tell(legacy, episodes, conversation)
        _more(chat, extra)  # segments, cards and decisions after the turn; retries; a replaced transcript
        models = read_models(store)
        store.save(*chat.events)
        models.apply(conversation_uuid(conversation), chat.events)
        summary = models.summary(conversation)  # the live generation known, the rows caught up
        if summary.turn is None:
            return
        built, sent, one = self.counted_turn_input(models, conversation)
        hypothesis.event(
            f"turn {'at the head' if summary.turn.version == summary.version else 'before the head'}, intact: {summary.turn_intact}"
        )
        assert built == build_turn_input(chat.events).to_json()
        assert one == summary.turn_intact
        if one:
            assert sent == 1

    def test_a_turn_read_whose_summary_moves_before_it_reads_older_entries_reads_again(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        models = read_models(store)
        ingest(store, long_chat())
        models.summary("conv-long")  # the live generation known: the turn read begins with one statement
        older, moved, writer = PrefetchedRows._older_entries, [], self.second_store(store)
        assert read_models(writer) is not models  # its appends update the rows in their own transaction

        def append_first(rows: PrefetchedRows, seqs: list[int]) -> list[str]:
            if not moved:  # another writer appends between the read's statements
                moved.append(rows._summary.version if rows._summary else 0)
                ingest(
                    writer,
                    Lines("conv-long")
                    .add(
                        "segment_returned",
                        segment="late/1",
                        run="late",
                        trigger="turn",
                        outcome="completed",
                        answer="Spät.",
                        steps=model_round(1),
                    )
                    .lines,
                )
            return older(rows, seqs)

        monkeypatch.setattr(PrefetchedRows, "_older_entries", append_first)
        notes = models.turn_notes("conv-long")

        assert notes.version == moved[0] + 1  # read again at the summary after the append
        monkeypatch.undo()
        assert notes == read_models(self.second_store(store)).turn_notes("conv-long")

    def test_a_failing_view_statement_rolls_back_to_its_savepoint(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        events = len(store.events("conv-demo-seo"))
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                f'CREATE FUNCTION "{self.schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS '
                "$$ BEGIN RAISE EXCEPTION 'no more messages'; END $$"
            )
            conn.execute(
                f'CREATE TRIGGER refuse BEFORE INSERT ON "{self.schema}".views_g1_messages '
                f'FOR EACH ROW EXECUTE FUNCTION "{self.schema}".refuse()'
            )

        ingest(store, Lines("conv-demo-seo").add("user_message", message=4, text="Und jetzt?", page=42).lines)

        assert len(store.events("conv-demo-seo")) == events + 1  # pipelined, yet only the views rolled back
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP TRIGGER refuse ON "{self.schema}".views_g1_messages')
        assert models.turn_input("conv-demo-seo").message == 4
        self.assert_rows_are_the_fold(models, store, "conv-demo-seo")

    # ------------------------------------------------------------------ a rebuild in worker processes

    def four_conversations(self, store: ConversationStore) -> list[str]:
        """Ingests four conversations, of both parts of two; returns their names."""
        chat = Lines("conv-long").add("conversation_started", kind="chat", owner=7)
        for n in range(1, 31):
            chat.add("user_message", message=n, text=f"weiter {n}", page=40 + n % 3)
            chat.add(
                "segment_returned",
                segment=f"s/{n}",
                run=f"s{n}",
                trigger="turn",
                outcome="completed",
                answer=f"Schritt {n}.",
                steps=model_round(1),
            )
        for lines in (chat.lines, DEMO, behalten_tour(), edited_chat()):
            ingest(store, lines)
        names = ["conv-long", "conv-demo-seo", "conv-behalten", "conv-edit"]
        assert sorted(part_of(conversation_uuid(name), 2) for name in names) == [0, 1, 1, 1]
        return names

    def test_a_rebuild_in_two_processes_gives_the_fold_of_the_log(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        models = read_models(store)
        names = self.four_conversations(store)
        monkeypatch.setattr("adapters.views.log_fold.PAGE", 7)  # the worker too: it is forked
        seen: list[tuple[int, int]] = []

        report = models.rebuild("2026-11-01", progress=lambda done, total: seen.append((done, total)), workers=2)

        assert report.workers == 2 and report.rules == "2026-11-01" and report.unreadable == ()
        assert report.events == store.max_notification_id() and report.conversations == 4
        assert seen and seen[-1][1] == store.max_notification_id()  # this process's part, against the whole log
        for name in names:
            self.assert_rows_are_the_fold(models, store, name)
            assert models.turn_input(name).to_json() == build_turn_input(store.events(name), "2026-11-01").to_json()
        assert read_models(self.second_store(store)).turn_notes("conv-demo-seo") == models.turn_notes("conv-demo-seo")

    def test_each_worker_reads_the_notifications_of_its_own_conversations(self, store: ConversationStore) -> None:
        self.four_conversations(store)
        every = store.recorder.select_notifications(0, 10_000, inclusive_of_start=False)
        for parts in (1, 2, 3):
            read = [store.recorder.select_notifications_to_fold(0, 10_000, None, (part, parts)) for part in range(parts)]
            for part, got in enumerate(read):
                assert [n.id for n in got] == [n.id for n in every if part_of(n.originator_id, parts) == part]
            assert sorted(n.id for got in read for n in got) == [n.id for n in every]
        page = store.recorder.select_notifications_to_fold(5, 3, 9)
        assert [(n.id, n.state) for n in page] == [(n.id, n.state) for n in every[5:8]]
        with pytest.raises(ValueError, match="part 2 of 2"):
            store.recorder.select_notifications_to_fold(0, 10, None, (2, 2))

    def test_a_worker_that_fails_fails_the_rebuild_and_leaves_the_live_tables(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        models = read_models(store)
        names = self.four_conversations(store)
        before = models.turn_notes("conv-demo-seo")
        fold_log = rebuild.fold_log

        def failing(*args: Any, part: tuple[int, int] | None = None, **kwargs: Any) -> Any:
            if part == (1, 2):
                raise RuntimeError("the worker's database went away")
            return fold_log(*args, part=part, **kwargs)

        monkeypatch.setattr(rebuild, "fold_log", failing)  # in the forked worker too
        with pytest.raises(
            RebuildWorkerFailed,
            match="failed: RuntimeError: the worker's database went away; "
            "nothing was switched: the live read models are as they were",
        ):
            models.rebuild("2026-11-01", workers=2)
        monkeypatch.undo()

        assert models.active_rules() == "2026-11-02"  # still the live tables, as they were
        assert read_models(self.second_store(store)).turn_notes("conv-demo-seo") == before
        report = models.rebuild("2026-11-01", workers=2)  # the next one drops the half-written generation
        assert self.tables(store) == set(report.tables)
        for name in names:
            self.assert_rows_are_the_fold(models, store, name)

    def test_a_worker_that_is_killed_fails_the_rebuild(self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch) -> None:
        models = read_models(store)
        self.four_conversations(store)
        fold_log = rebuild.fold_log

        def killed(*args: Any, part: tuple[int, int] | None = None, **kwargs: Any) -> Any:
            if part == (1, 2):
                os.kill(os.getpid(), signal.SIGKILL)
            return fold_log(*args, part=part, **kwargs)

        monkeypatch.setattr(rebuild, "fold_log", killed)
        with pytest.raises(RebuildWorkerFailed, match=r"ended \(exit code -9\) before it folded its part"):
            models.rebuild("2026-11-01", workers=2)
        monkeypatch.undo()
        assert models.active_rules() == "2026-11-02"

    def test_a_rebuild_folds_in_one_process_per_cpu_only_a_long_log_spread_over_the_parts(
        self, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        models = read_models(store)
        monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
        assert models.rebuild_workers(PARTS_FROM - 1) == 1
        assert models.rebuild_workers(PARTS_FROM) == MAX_WORKERS == 4
        assert models.rebuild_workers(10, workers=3) == 3
        with pytest.raises(ValueError, match="in 1 to 32 worker processes, not 0"):
            models.rebuild_workers(10, workers=0)
        with pytest.raises(ValueError, match="in 1 to 32 worker processes, not 33"):
            models.rebuild("2026-11-02", workers=MOST_WORKERS + 1)  # each opens its own connections
        ingest(store, DEMO)
        assert models.rebuild("2026-11-02").workers == 1  # a short log
        # a long log: parts only where no part holds more than two thirds of it
        demo = store.max_notification_id()
        assert store.recorder.count_notifications_by_part(demo, 2) == [0, demo]  # conv-demo-seo is of part 1
        monkeypatch.setattr("adapters.views.rebuild.PARTS_FROM", 1)
        monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
        assert models.rebuild_workers(demo) == 1  # one conversation: one process
        ingest(store, behalten_tour())
        ingest(
            store,
            Lines("conv-long")
            .add("conversation_started", kind="chat", owner=7)
            .add("user_message", message=1, text="weiter", page=40)
            .lines,
        )
        stop = store.max_notification_id()
        sizes = store.recorder.count_notifications_by_part(stop, 2)
        assert sum(sizes) == stop and sizes[0] == 2  # conv-long, of part 0
        assert models.rebuild_workers(stop) == 1  # 2 of the events in one part, the rest in the other
        assert MOST_OF_A_PART == 2 / 3
        monkeypatch.setattr("adapters.views.rebuild.MOST_OF_A_PART", 1 - 2 / stop)
        assert models.rebuild_workers(stop) == 2
        report = models.rebuild("2026-11-02")
        assert report.workers == 2 and report.events == stop

    def test_a_generations_summaries_leave_half_of_each_page_free_for_their_updates(self, store: ConversationStore) -> None:
        models = read_models(store)
        ingest(store, DEMO)
        report = models.rebuild("2026-11-01")
        with psycopg.connect(self.url) as conn:
            options = {
                name: reloptions
                for name, reloptions in conn.execute(
                    "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relname LIKE 'views_g%%'",
                    (self.schema,),
                ).fetchall()
            }
        summaries = f"views_g{report.generation}_heads"
        assert options[summaries] == ["fillfactor=50"]  # a summary is rewritten by every append: updated in place
        assert options[f"views_g{report.generation}_messages"] is None
