"""`erase` while a rebuild runs, once per backend: the rebuild folds its new generation from texts it read
before the erasure, then switches to it. The switch must not make those rows live: the rows of a
conversation whose key went meanwhile are folded again from its log under the switch's lock
(`Rebuilds.rebuild`), so `verify --rows` finds them the fold of the log, their texts `[erased]`.

The rebuild is driven in steps through its progress calls (pages of PAGE events): the erasure runs
between two of them, before the conversation's events are folded or after all are. On SQLite and
PostgreSQL it runs in another store (another process's), while the rebuilding one keeps the key it
read (`KEY_CACHE_SECONDS` made long): the worst case."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from adapters.api import Chatrecord
from adapters.backends.memory import MemoryDataKeys
from adapters.backends.settings import memory_env
from adapters.bootstrap import build_store, read_models, read_models_for
from adapters.service.erase import erase
from adapters.store.application import ConversationStore
from adapters.store.crypto import ERASED
from adapters.store.keys import DataKeys
from adapters.views.verify_rows import check_rows
from domain.events import conversation_uuid
from tests.integration.backends import PostgresStores, SQLiteStores
from tests.integration.test_erasure import CONVERSATIONS, PLANTS, planted_lines

PAGE = 2
"""Events per page of the rebuild: the log (13 events) is folded in 7 pages, a progress call after each."""
ERASED_ONE = "conv-erase"
PLANTED_IN_IT = PLANTS[:8]
"""The planted texts of `ERASED_ONE`; the others belong to conversations that keep theirs."""


class EraseDuringRebuildContract:
    """Backends give `open_store()` and `eraser(store)`: the store an erasure runs in (another one on the
    same database where there can be one)."""

    def open_store(self) -> ConversationStore:
        raise NotImplementedError

    def eraser(self, store: ConversationStore) -> ConversationStore:
        raise NotImplementedError

    @pytest.fixture
    def store(self, monkeypatch: pytest.MonkeyPatch) -> ConversationStore:
        monkeypatch.setattr("adapters.store.keys.KEY_CACHE_SECONDS", 3600.0)  # the rebuilding store keeps each key read
        monkeypatch.setattr("adapters.views.log_fold.PAGE", PAGE)
        store = self.open_store()
        report = Chatrecord(store).ingest([json.dumps(line) for line in planted_lines()], "planted")
        assert report.stopped is None
        read_models(store).catch_up()
        return store

    def erasing_at(self, store: ConversationStore, call: int) -> Callable[[int, int], None]:
        """Returns a rebuild's progress that erases `ERASED_ONE` at its `call`th call (from 1)."""
        calls: list[int] = []

        def progress(done: int, total: int) -> None:
            calls.append(done)
            if len(calls) == call:
                other = self.eraser(store)
                assert erase(other, ERASED_ONE, read_models(other)).recorded

        return progress

    def assert_rows_are_the_fold_of_the_log(self, store: ConversationStore) -> None:
        """`verify --rows` of every conversation, read by a fresh reader; the erased one's texts read
        [erased] in the rows, the others' keep theirs."""
        models = read_models_for(store)
        verdicts = {name: check_rows(models, name) for name in CONVERSATIONS}
        assert {name: (v.differs, v.problem) for name, v in verdicts.items()} == dict.fromkeys(CONVERSATIONS, ((), None))
        erased = models.state(ERASED_ONE)
        assert erased is not None
        shown = erased.model_dump_json()
        assert [p for p in PLANTED_IN_IT if p in shown] == []
        assert {m.text for m in erased.transcript.messages if m.role == "user"} == {ERASED}
        kept = models.state("conv-erase-alt")
        assert kept is not None
        assert [m.text for m in kept.transcript.messages] == [PLANTS[8], PLANTS[9]]

    @pytest.mark.parametrize("call", [1, 3, 7], ids=["after-its-first-page", "mid-log", "after-the-last-page"])
    def test_an_erasure_during_a_rebuild_leaves_the_new_rows_the_fold_of_the_log(
        self, store: ConversationStore, call: int
    ) -> None:
        models = read_models(store)
        report = models.rebuild("2026-11-01", progress=self.erasing_at(store, call))
        assert report.refolded == (str(conversation_uuid(ERASED_ONE)),)
        assert report.unreadable == ()
        assert models.live_pointer().generation == report.generation
        self.assert_rows_are_the_fold_of_the_log(store)

    def test_an_erasure_before_the_rebuild_is_folded_once(self, store: ConversationStore) -> None:
        other = self.eraser(store)
        erase(other, ERASED_ONE, read_models(other))
        report = read_models(store).rebuild("2026-11-01")
        assert report.refolded == ()  # its key was gone before the rebuild read a text
        self.assert_rows_are_the_fold_of_the_log(store)


class TestInMemoryEraseDuringRebuild(EraseDuringRebuildContract):
    def open_store(self) -> ConversationStore:
        return build_store(memory_env())

    def eraser(self, store: ConversationStore) -> ConversationStore:
        return store  # one process holds a store in memory


class TestSQLiteEraseDuringRebuild(SQLiteStores, EraseDuringRebuildContract):
    def open_store(self) -> ConversationStore:  # type: ignore[override]
        return super().open_store()

    def eraser(self, store: ConversationStore) -> ConversationStore:
        return super().open_store()


class TestPostgresEraseDuringRebuild(PostgresStores, EraseDuringRebuildContract):
    def open_store(self) -> ConversationStore:  # type: ignore[override]
        return super().open_store(POSTGRES_POOL_SIZE="2")

    def eraser(self, store: ConversationStore) -> ConversationStore:
        return super().open_store(POSTGRES_POOL_SIZE="2")

    @pytest.mark.parametrize("call", [1, 2], ids=["after-its-first-page", "after-its-last-page"])
    def test_an_erasure_while_two_processes_fold_leaves_the_new_rows_the_fold_of_the_log(
        self, store: ConversationStore, call: int
    ) -> None:
        models = read_models(store)
        # part 0 (this process) folds the other two conversations (4 events, 2 pages); a forked worker
        # folds the erased one, before, during or after the erasure: each must end the same
        report = models.rebuild("2026-11-01", progress=self.erasing_at(store, call), workers=2)
        assert report.workers == 2
        assert report.refolded == (str(conversation_uuid(ERASED_ONE)),)
        self.assert_rows_are_the_fold_of_the_log(store)


def test_reading_the_erased_keys_forgets_the_keys_this_process_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """`DataKeys.erased`, which a rebuild reads at its start and switch: a key another process deleted
    is no longer served from this process's cache after it."""
    monkeypatch.setattr("adapters.store.keys.KEY_CACHE_SECONDS", 3600.0)
    keys = DataKeys(None, MemoryDataKeys())
    gone, kept = uuid4(), uuid4()
    assert keys.key(gone, create=True) is not None and keys.key(kept, create=True) is not None
    keys.rows.erase(gone, datetime.now(UTC))  # as another process does: this one's cache keeps the key
    assert keys.key(gone, create=False) is not None

    assert keys.erased() == {gone}
    assert keys.key(gone, create=False) is None
    assert keys.key(kept, create=False) is not None
