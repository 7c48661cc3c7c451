"""The views' port (`adapters.views.ports`): one suite of cases that every backend's view storage
passes, as the library's `eventsourcing/tests/persistence.py` does for recorders. Each case
writes through the port and reads back real values: the pointer and generations, the rows
(plain and buffered, so the Python writes and, on PostgreSQL, the JSON-array writes both
answer), the turn read, truncation, a rebuild's generations, the overview, and the erasure of a
conversation's texts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.backends.settings import memory_env
from adapters.bootstrap import build_store, read_models, view_storage_of
from adapters.store.application import ConversationStore
from adapters.store.crypto import ERASED
from adapters.views.listing import ListQuery
from adapters.views.ports import AppendTarget, ViewRows, ViewStorage
from adapters.views.storage_reads import Pointer
from domain.events import conversation_uuid
from projections.card_outcomes import CardOutcome
from projections.overview import Marks, Overview
from projections.run_record import Entry
from projections.summary_rows import Summary, TurnMark
from projections.transcript import Message
from tests.integration.backends import PostgresStores, SQLiteStores

RULES = "2026-11-02"
AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def entry(seq: int, segment: str) -> Entry:
    return Entry(segment=segment, trigger="turn", ending="completed", seq=seq)


def outcome(version: int, sub: int, card: str | None, after: int) -> CardOutcome:
    return CardOutcome(outcome="applied", tool="set_field", card=card, after=after, seq=(version, sub))


MESSAGES = [
    Message(role="user", text="Frage eins", number=1),
    Message(role="assistant", text="Antwort eins"),
    Message(role="user", text="Frage zwei", number=2),
    Message(role="assistant", text="Antwort zwei"),
]


class ViewPortContract:
    """The cases; a subclass says how a store opens (`open_store`)."""

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    @pytest.fixture
    def storage(self) -> ViewStorage:
        """A store's view storage as its backend hands it out, its tables not made yet."""
        return view_storage_of(self.open_store(views=False))

    @contextmanager
    def rows(
        self, storage: ViewStorage, cid: uuid.UUID, write: bool, generation: int = 1, buffered: bool = False
    ) -> Iterator[ViewRows]:
        with storage.transaction(write=write) as curs:
            if write:
                storage.lock(curs, exclusive=False)
            rows = storage.rows(curs, generation, cid, buffered=buffered)
            yield rows
            rows.flush()

    def made(self, storage: ViewStorage, generation: int = 1) -> ViewStorage:
        with storage.transaction(write=True) as curs:
            storage.lock(curs, exclusive=True)
            storage.create(curs, generation)
            storage.set_pointer(curs, Pointer(generation, RULES, generation + 1))
        return storage

    def write_conversation(self, storage: ViewStorage, cid: uuid.UUID, buffered: bool, generation: int = 1) -> Summary:
        summary = Summary(conversation="conv-port", version=7, seqs=(3, 5), length=4, last_at=1_000_000, users=2)
        if storage.texts is not None:  # its data key, which the conversation's first event makes
            storage.texts.keys.key(cid, create=True)
        with self.rows(storage, cid, True, generation, buffered) as rows:
            for index, message in enumerate(MESSAGES):
                rows.put_message(index, message)
            rows.end_block(0, 2)
            rows.end_block(2, None)
            rows.put_entry(entry(3, "s/1"))
            rows.put_entry(entry(5, "s/2"))
            rows.put_outcomes([outcome(4, 0, "s/1", 1), outcome(6, 0, None, 3), outcome(6, 1, "s/2", 3)])
            rows.put_page(0, 42)
            rows.put_page(2, 0)
            rows.put_turn(TurnMark(message=1, at=AT, version=2))
            rows.put_turn(TurnMark(message=2, at=AT, version=6))
            rows.put_turn(TurnMark(message=2, at=AT, version=7))
            rows.put_summary(summary)
        return summary

    # ------------------------------------------------------------ the pointer and the generations

    def test_the_pointer_is_none_until_set_and_then_reads_back(self, storage: ViewStorage) -> None:
        with storage.transaction(write=False) as curs:
            assert storage.pointer(curs) is None
        self.made(storage)
        with storage.transaction(write=False) as curs:
            assert storage.pointer(curs) == Pointer(1, RULES, 2)
            assert storage.generations(curs) == {1}
            assert storage.pointer_and_summary(curs, uuid.uuid4(), 1) == (Pointer(1, RULES, 2), None)

    def test_a_rebuild_makes_a_generation_switches_to_it_and_drops_the_old(self, storage: ViewStorage) -> None:
        self.made(storage)
        cid = uuid.uuid4()
        self.write_conversation(storage, cid, buffered=False)
        with storage.transaction(write=True) as curs:
            storage.lock(curs, exclusive=True)
            storage.create(curs, 2)
            assert storage.generations(curs) == {1, 2}
            storage.set_pointer(curs, Pointer(2, "2026-11-01", 3))
            storage.drop(curs, 1)
        with storage.transaction(write=False) as curs:
            assert storage.pointer(curs) == Pointer(2, "2026-11-01", 3)
            assert storage.generations(curs) == {2}
            fresh = storage.rows(curs, 2, cid)
            assert fresh.summary() is None and fresh.messages() == () and tuple(fresh.entries()) == ()

    # ------------------------------------------------------------ rows: writes, then reads

    @pytest.mark.parametrize("buffered", [False, True], ids=["plain", "buffered"])
    def test_the_rows_read_back_what_was_written(self, storage: ViewStorage, buffered: bool) -> None:
        self.made(storage)
        cid = uuid.uuid4()
        summary = self.write_conversation(storage, cid, buffered)
        with self.rows(storage, cid, write=False) as rows:
            assert rows.summary() == summary
            assert rows.messages() == tuple(MESSAGES)
            assert rows.message(2) == MESSAGES[2] and rows.message(4) is None
            assert rows.messages_at({1, 3, 9}) == {1: MESSAGES[1], 3: MESSAGES[3]}
            assert (rows.user_index(1), rows.user_index(2), rows.user_index(3)) == (0, 2, None)
            assert (rows.block_end(1), rows.block_end(2)) == (2, None)
            assert rows.block_ends({1, 2, 3}) == {1: 2, 2: None}
            messages_at, block_ends = rows.placement_reads(4)
            assert block_ends({1, 2}) == {1: 2, 2: None} and messages_at({0}) == {0: MESSAGES[0]}
            assert [(e.seq, e.segment) for e in rows.entries()] == [(3, "s/1"), (5, "s/2")]
            assert (rows.entry("s/2"), rows.entry_seq("s/1"), rows.entry("s/9")) == (entry(5, "s/2"), 3, None)
            assert [o.seq for o in rows.outcomes()] == [(4, 0), (6, 0), (6, 1)]
            assert [o.seq for o in rows.outcomes(newest=2)] == [(6, 0), (6, 1)]
            assert rows.turn_starts(2) == ((6, 7), ())
            assert rows.turn_starts(3) == ((), (1, 2))
            assert storage.log_version(rows_target(storage, rows), cid) == 0  # no event in the log

    @pytest.mark.parametrize("buffered", [False, True], ids=["plain", "buffered"])
    def test_an_upsert_replaces_and_a_turn_mark_of_one_version_is_kept_once(self, storage: ViewStorage, buffered: bool) -> None:
        self.made(storage)
        cid = uuid.uuid4()
        self.write_conversation(storage, cid, buffered=False)
        changed = Message(role="assistant", text="Antwort zwei, neu", segments=("s/2",))
        with self.rows(storage, cid, True, buffered=buffered) as rows:
            rows.put_message(3, changed)
            rows.put_entry(entry(5, "s/2").model_copy(update={"ending": "failed"}))
            rows.put_page(0, 43)
            rows.put_turn(TurnMark(message=9, at=AT, version=7))
            rows.put_summary(Summary(conversation="conv-port", version=8, length=4))
        with self.rows(storage, cid, write=False) as rows:
            assert rows.message(3) == changed and rows.block_end(2) is None
            assert [(e.seq, e.ending) for e in rows.entries()] == [(3, "completed"), (5, "failed")]
            assert rows.entry("s/2") == entry(5, "s/2").model_copy(update={"ending": "failed"})
            assert rows.turn_starts(2) == ((6, 7), ())
            summary = rows.summary()
            assert summary is not None and summary.version == 8
        with self.rows(storage, cid, True) as rows:
            assert rows.cut_pages(0) == (43, 43)

    # ------------------------------------------------------------ truncation

    @pytest.mark.parametrize("buffered", [False, True], ids=["plain", "buffered"])
    def test_cuts_delete_what_they_name_and_keep_the_rest(self, storage: ViewStorage, buffered: bool) -> None:
        self.made(storage)
        cid = uuid.uuid4()
        self.write_conversation(storage, cid, buffered=False)
        with self.rows(storage, cid, True, buffered=buffered) as rows:
            rows.cut_messages(2)
            assert rows.cut_outcomes({"s/1"}, 3) == 2  # the card's, and the one of no card at or after 3
            assert rows.cut_pages(1) == (42, 42)
            rows.delete_entries([5, 99])
        with self.rows(storage, cid, write=False) as rows:
            assert rows.messages() == tuple(MESSAGES[:2])
            assert rows.user_index(2) is None
            assert [o.seq for o in rows.outcomes()] == [(6, 1)]
            assert [e.seq for e in rows.entries()] == [3]

    @pytest.mark.parametrize("buffered", [False, True], ids=["plain", "buffered"])
    def test_entries_set_aside_leave_the_record_until_dropped(self, storage: ViewStorage, buffered: bool) -> None:
        self.made(storage)
        cid = uuid.uuid4()
        self.write_conversation(storage, cid, buffered=False)
        with self.rows(storage, cid, True, buffered=buffered) as rows:
            rows.set_aside([5])
        with self.rows(storage, cid, write=False) as rows:
            assert [e.seq for e in rows.entries()] == [3]
            assert rows.aside() == (entry(5, "s/2"),)
        with self.rows(storage, cid, True, buffered=buffered) as rows:
            rows.drop_aside()
        with self.rows(storage, cid, write=False) as rows:
            assert rows.aside() == () and [e.seq for e in rows.entries()] == [3]

    def test_clear_deletes_every_row_of_the_conversation_only(self, storage: ViewStorage) -> None:
        self.made(storage)
        cid, other = uuid.uuid4(), uuid.uuid4()
        self.write_conversation(storage, cid, buffered=False)
        self.write_conversation(storage, other, buffered=False)
        with self.rows(storage, cid, True) as rows:
            rows.set_aside([3])
            rows.clear()
        with self.rows(storage, cid, write=False) as rows:
            assert (rows.summary(), rows.messages(), tuple(rows.entries()), rows.aside(), rows.outcomes()) == (
                None,
                (),
                (),
                (),
                (),
            )
            assert rows.turn_starts(1) == ((), ())
        with self.rows(storage, other, write=False) as rows:
            assert rows.messages() == tuple(MESSAGES)

    # ------------------------------------------------------------ the list of summaries

    def test_the_list_rows_come_by_last_activity_then_cid(self, storage: ViewStorage) -> None:
        self.made(storage)
        cids = sorted(str(uuid.uuid4()) for _ in range(3))
        times = {cids[0]: 300, cids[1]: 100, cids[2]: 300}
        for cid, at in times.items():
            with self.rows(storage, uuid.UUID(cid), True) as rows:
                rows.put_summary(Summary(conversation=f"c-{cid[:4]}", version=1, last_at=at, users=1, owner=7))
        with self.rows(storage, uuid.uuid4(), True) as rows:
            rows.put_summary(Summary(conversation="no-activity", version=1))
        with storage.transaction(write=False) as curs:
            assert storage.has_activity(curs, 1)
            listed = storage.listed(curs, 1, ListQuery(10))
            assert [(r.cid, r.at) for r in listed] == [(cids[2], 300), (cids[0], 300), (cids[1], 100)]
            assert (listed[0].conversation, listed[0].users, listed[0].owner) == (f"c-{cids[2][:4]}", 1, 7)
            assert [r.cid for r in storage.listed(curs, 1, ListQuery(10, before=(300, cids[2])))] == [cids[0], cids[1]]
            assert [r.cid for r in storage.listed(curs, 1, ListQuery(1, since=200))] == [cids[2]]
            assert [r.cid for r in storage.listed(curs, 1, ListQuery(10, until=300))] == [cids[1]]

    def test_the_list_rows_filter_by_owner_part_of_the_id_and_status(self, storage: ViewStorage) -> None:
        self.made(storage)
        summaries = {
            "chat_1%": Summary(conversation="chat_1%", version=3, last_at=500, owner=1, failed=2, undecided=0),
            "chatX1a": Summary(conversation="chatX1a", version=3, last_at=400, owner=2, failed=0, undecided=1),
            "Other": Summary(
                conversation="Other", version=3, last_at=300, owner=1, failed=0, undecided=0, open_waits={"s1": None}
            ),
            "gone": Summary(conversation="gone", version=4, last_at=200, owner=2, failed=0, undecided=0, erased=True),
        }
        for summary in summaries.values():
            with self.rows(storage, uuid.uuid4(), True) as rows:
                rows.put_summary(summary)

        def names(**asked: object) -> list[str]:
            with storage.transaction(write=False) as curs:
                return [r.conversation for r in storage.listed(curs, 1, ListQuery(10, **asked))]  # type: ignore[arg-type]

        assert names() == ["chat_1%", "chatX1a", "Other", "gone"]
        assert names(owner=1) == ["chat_1%", "Other"]
        assert names(search="_1%") == ["chat_1%"]  # the wildcards are the text's own, not LIKE's
        assert names(search="CHAT") == ["chat_1%", "chatX1a"]  # letters in either case
        assert names(search="1") == ["chat_1%", "chatX1a"]
        assert names(statuses=frozenset({"failed"})) == ["chat_1%"]
        assert names(statuses=frozenset({"waiting"})) == ["Other"]
        assert names(statuses=frozenset({"undecided", "erased"})) == ["chatX1a", "gone"]
        assert names(owner=2, statuses=frozenset({"erased"})) == ["gone"]
        with storage.transaction(write=False) as curs:
            listed = {r.conversation: r for r in storage.listed(curs, 1, ListQuery(10))}
        assert [listed[n].statuses for n in summaries] == [("failed",), ("undecided",), ("waiting",), ("erased",)]

    # ------------------------------------------------------------ the turn read, through the read models

    def test_the_turn_read_and_the_turn_input_read_the_rows_an_append_wrote(self) -> None:
        from tests.integration.test_readmodels import behalten_tour, ingest

        store = self.open_store()
        ingest(store, behalten_tour())
        models = read_models(store)
        summary = models.summary("conv-behalten")
        assert summary.version == len(store.events("conv-behalten")) and summary.turn is not None
        notes = models.turn_notes("conv-behalten")
        assert notes.to_json() == models.turn_notes("conv-behalten").to_json()  # the second from what the first kept
        assert models.turn_input("conv-behalten").message == summary.turn.message
        starts = models.turn_starts("conv-behalten", summary.turn.message)
        assert starts.latest == summary.turn.version and summary.turn.version in starts.versions

    # ------------------------------------------------------------ the overview

    def test_the_overview_is_folded_once_per_version_and_kept(self, storage: ViewStorage) -> None:
        self.made(storage)
        cid, calls = uuid.uuid4(), []

        def fold(state: Overview, marks: Marks) -> Overview:
            calls.append(state.version)
            return Overview(version=5)

        first = storage.overview(cid, 1, 5, fold)
        if storage.overview_tables:  # the backend keeps the overview's rows
            assert first == Overview(version=5) and calls == [0]
            assert storage.overview(cid, 1, 5, fold) == Overview(version=5) and calls == [0]  # kept: no fold
            assert storage.overview(cid, 1, 3, fold) == Overview(version=5) and calls == [0, 0]  # past the log: anew
        else:
            assert first is None and calls == []

    # ------------------------------------------------------------ the erasure of texts

    def test_a_message_text_is_kept_sealed_and_reads_as_erased_once_its_key_is_gone(self, storage: ViewStorage) -> None:
        self.made(storage)
        cid = uuid.uuid4()
        self.write_conversation(storage, cid, buffered=True)
        with self.rows(storage, cid, write=False) as rows:
            assert rows.messages() == tuple(MESSAGES)
        if not storage.shared:  # in memory: the rows are this process's objects, no bodies; `erase` folds them anew
            return
        assert storage.texts is not None  # a database's rows keep each text sealed with its conversation's key
        storage.texts.keys.erase(cid)
        with self.rows(storage, cid, write=False) as rows:
            assert [m.text for m in rows.messages()] == [ERASED] * len(MESSAGES)

    def test_an_erased_conversations_rows_are_folded_anew_without_its_texts(self) -> None:
        from tests.integration.test_readmodels import behalten_tour, ingest

        store = self.open_store()
        ingest(store, behalten_tour())
        models, cid = read_models(store), conversation_uuid("conv-behalten")
        texts = [m.text for m in models.state("conv-behalten").transcript.messages]  # type: ignore[union-attr]
        assert "SEO optimieren" in texts
        store.mapper.keys.erase(cid)  # type: ignore[attr-defined]
        assert models.erase("conv-behalten")
        with self.rows(models.storage, cid, write=False, generation=models.live_pointer().generation) as rows:
            kept = [m.text for m in rows.messages()]
            summary = rows.summary()
        assert len(kept) == len(texts) and "SEO optimieren" not in kept and ERASED in kept
        assert summary is not None and summary.refolds == 1 and summary.version == len(store.events("conv-behalten"))


def rows_target(storage: ViewStorage, rows: ViewRows) -> AppendTarget:
    """The target `rows` read through (the in-memory rows have none: any target will do)."""
    target: Any = getattr(rows, "curs", None)
    return target


class TestMemoryViewPort(ViewPortContract):
    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        return build_store({**memory_env(), **overrides}, views=views)


class TestSQLiteViewPort(SQLiteStores, ViewPortContract):
    pass


class TestPostgresViewPort(PostgresStores, ViewPortContract):
    pass
