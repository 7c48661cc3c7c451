"""The store's ports (`adapters.store.ports`), one contract suite per port, which every backend's
implementation passes, as the library's `eventsourcing/tests/persistence.py` does for recorders.

`HistoryIndexContract`, `IdempotencyKeysContract` and `DataKeyStoreContract` hold the cases; each
backend's `Test<Backend><Port>` class says how to open a store on the test's own database
(`tests.integration.backends`), and the port is the one the composition root wired into it
(`ports_of`). The history index is held against the domain's own index of the same events
(`domain.history_index.MemoryHistory`, which `tests.unit.factories.Chat` keeps as it tells the
conversation).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import orjson
import pytest

from adapters.backends.settings import memory_env
from adapters.bootstrap import build_store
from adapters.store.application import ConversationStore
from adapters.store.idempotency import IN_FLIGHT, StoredResponse
from adapters.store.keys import DataKeys
from adapters.store.ports import DataKeyStore, HistoryIndex, IdempotencyKeys
from domain import conversation as c
from domain.history_index import AssumedHistory, MemoryHistory
from tests.integration.backends import OpenedStores, PostgresStores, SQLiteStores
from tests.unit.factories import Chat, model_round, seo_tour, tool

AT = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)


def ports_of(store: ConversationStore) -> tuple[HistoryIndex, IdempotencyKeys, DataKeyStore]:
    """Returns the history index, the idempotency keys and the data keys' rows the composition
    root handed `store` (`adapters.bootstrap`)."""
    keys = store.mapper.keys  # type: ignore[attr-defined]  # the store's mapper (`PydanticMapper`)
    assert isinstance(keys, DataKeys)
    return store.history, store.idempotency_keys, keys.rows


class MemoryStores(OpenedStores):
    """`open_store(views=True, **overrides)` in memory, as `SQLiteStores.open_store`."""

    @pytest.fixture(autouse=True)
    def _database(self) -> Iterator[None]:
        self.stores = []
        yield
        self._close_all()

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        return self._kept(build_store({**memory_env(), **overrides}, views=views))


# ---------------------------------------------------------------- the history index


def story() -> Chat:
    """A conversation whose index has every kind of row: an SEO tour (segments of a guided run,
    two approved cards and a declined one: card outcomes), then two user messages from input
    lines with digests and their segments, an edit of the first that cuts both segments and the
    second message, a new answer, and the first line delivered again (which stores nothing)."""
    chat = Chat(conversation="conv-ports")
    seo_tour(chat, ["Übernehmen", "Nein, lieber kürzer", "Übernehmen"])
    edited = chat.next_message
    chat.run("user", c.post_user_message, edited, "Hallo", 0, None, source="digest-1")
    chat.segment("turn", "completed", "Hallo zurück.", [*model_round(1), tool("get_page", 1)], run="first")
    chat.run("user", c.post_user_message, chat.next_message, "Noch eine Frage", 0, None, source="digest-2")
    chat.segment("turn", "completed", "Gern.", model_round(1), run="second")
    chat.edit(edited, "Eine andere Frage")
    chat.segment("turn", "completed", "Anders.", model_round(1), run="third")
    assert not chat.run("user", c.post_user_message, chat.next_message, "Hallo", 0, None, source="digest-1")
    return chat


def assert_indexes_alike(index: Any, reference: MemoryHistory, digests: tuple[str, ...] = ("digest-1", "digest-2")) -> None:
    """Asserts that every lookup of `index` answers as the domain's `reference` does."""
    assert index.version == reference.version
    assert index.outcomes() == reference.outcomes()
    for segment, record in reference.records.items():
        assert index.segment(segment) == record
    assert index.segment("no-such-segment") is None
    last = max(reference.messages, default=0) + 2
    for number in range(last):
        assert index.segments_from(number) == reference.segments_from(number)
        assert index.message_uncut(number) is reference.message_uncut(number)
        assert index.messages_after(number) == reference.messages_after(number)
    for run in {record.run for record in reference.records.values()} | {"no-such-run"}:
        assert index.run_cut(run) is reference.run_cut(run)
    for digest in (*digests, "no-such-digest"):
        assert index.source(digest) == reference.source(digest)


class HistoryIndexContract:
    """The cases every backend's `HistoryIndex` passes."""

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        raise NotImplementedError  # each backend's stores (`tests.integration.backends`)

    @pytest.fixture
    def index(self) -> HistoryIndex:
        index = ports_of(self.open_store(views=False))[0]
        index.create()  # made with the store already: a second time changes nothing
        return index

    def test_the_port_is_an_implementation_of_it(self, index: HistoryIndex) -> None:
        assert isinstance(index, HistoryIndex)

    def test_an_empty_index_answers_every_lookup_with_nothing(self, index: HistoryIndex) -> None:
        cid = uuid4()
        with index.reading(None) as none, index.reading(cid) as unknown:
            for read in (index.reader(cid), none, unknown):
                assert_indexes_alike(read, MemoryHistory())

    def test_written_events_read_back_as_the_domain_indexes_them(self, index: HistoryIndex) -> None:
        chat, cid = story(), uuid4()
        assert chat.history.outcomes() == 3 and chat.history.run_cut("first") and not chat.history.message_uncut(4)

        added = index.write(cid, None, chat.events)

        assert added in (None, chat.history.outcomes())  # None where the backend does not count them
        assert_indexes_alike(index.reader(cid), chat.history)
        with index.reading(cid) as one_command:
            assert_indexes_alike(one_command, chat.history)

    def test_an_append_continues_the_index_where_the_last_one_left_it(self, index: HistoryIndex) -> None:
        chat, cid = story(), uuid4()
        half = len(chat.events) // 2
        before = c.project_conversation(None, chat.events[:half])

        index.write(cid, None, chat.events[:half])
        assert index.reader(cid).version == chat.events[half - 1].originator_version
        index.write(cid, before, chat.events[half:])

        assert_indexes_alike(index.reader(cid), chat.history)

    def test_events_that_do_not_follow_the_index_are_not_written(self, index: HistoryIndex) -> None:
        chat, cid = story(), uuid4()
        index.write(cid, None, chat.events[:3])
        state = c.project_conversation(None, chat.events[:4])

        assert index.write(cid, state, chat.events[4:]) is None  # version 4 is missing: a later reader fills it
        assert index.write(cid, None, chat.events[:3]) is None  # indexed already (another writer)

        reference = MemoryHistory()
        reference.record(None, chat.events[:3])
        assert_indexes_alike(index.reader(cid), reference)

    def test_a_rebuild_replaces_the_conversations_rows(self, index: HistoryIndex) -> None:
        cid = uuid4()
        other = Chat(conversation="conv-other")
        other.user("Erst das")
        other.segment("turn", "completed", "Ja.", run="gone")
        index.write(cid, None, other.events)
        chat = story()

        index.write(cid, None, chat.events, rebuild=True)

        assert_indexes_alike(index.reader(cid), chat.history)
        assert index.reader(cid).segment("gone/1") is None

    def test_a_rebuild_behind_the_index_leaves_it_alone(self, index: HistoryIndex) -> None:
        chat, cid = story(), uuid4()
        index.write(cid, None, chat.events)

        assert index.write(cid, None, chat.events[:3], rebuild=True) is None  # another process indexed further

        assert_indexes_alike(index.reader(cid), chat.history)

    def test_a_write_in_the_events_transaction_commits_or_rolls_back_with_it(self, index: HistoryIndex) -> None:
        chat, cid, undone = story(), uuid4(), uuid4()
        datastore = getattr(index, "datastore", None)
        if datastore is None:  # memory: no transaction, the write is the commit
            assert index.write(cid, None, chat.events, None, follows=True) in (None, chat.history.outcomes())
            assert_indexes_alike(index.reader(cid), chat.history)
            return

        with datastore.transaction(commit=True) as curs:
            added = index.write(cid, None, chat.events, curs, follows=True)
        with pytest.raises(RuntimeError), datastore.transaction(commit=True) as curs:
            index.write(undone, None, chat.events, curs, follows=True)
            raise RuntimeError("the events' insert failed")

        assert added == chat.history.outcomes()
        assert_indexes_alike(index.reader(cid), chat.history)
        assert_indexes_alike(index.reader(undone), MemoryHistory())

    checks_assumptions = False
    """Whether the backend's index checks an assumed history in the append's transaction."""

    def test_an_index_that_checks_no_assumptions_refuses_one(self, index: HistoryIndex) -> None:
        chat, cid = story(), uuid4()
        assert index.checks_assumptions is self.checks_assumptions
        if index.checks_assumptions:  # PostgreSQL: checked in the append (tests/integration/test_assumed_append.py)
            return

        with pytest.raises(ValueError, match="checks_assumptions"):
            index.write(cid, None, chat.events, follows=True, assumed=AssumedHistory(0, 0))

        assert_indexes_alike(index.reader(cid), MemoryHistory())

    def test_each_conversation_has_its_own_rows(self, index: HistoryIndex) -> None:
        chat, cid, other = story(), uuid4(), uuid4()
        index.write(cid, None, chat.events)
        small = Chat(conversation="conv-small")
        small.user("Nur das")
        index.write(other, None, small.events)

        assert_indexes_alike(index.reader(cid), chat.history)
        assert_indexes_alike(index.reader(other), small.history, digests=())
        assert_indexes_alike(index.reader(uuid4()), MemoryHistory())


class TestMemoryHistoryIndex(MemoryStores, HistoryIndexContract):
    pass


class TestSQLiteHistoryIndex(SQLiteStores, HistoryIndexContract):
    pass


class TestPostgresHistoryIndex(PostgresStores, HistoryIndexContract):
    checks_assumptions = True


# ---------------------------------------------------------------- the idempotency keys


class IdempotencyKeysContract:
    """The cases every backend's `IdempotencyKeys` passes (the races of threads for one key:
    `tests/integration/test_idempotency_keys.py`)."""

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    @pytest.fixture
    def keys(self) -> IdempotencyKeys:
        keys = ports_of(self.open_store(views=False))[1]
        keys.create()  # made on first use already: a second time changes nothing
        self.now = 1_000_000.0
        keys.clock = lambda: self.now  # type: ignore[method-assign]
        return keys

    def test_the_port_is_an_implementation_of_it(self, keys: IdempotencyKeys) -> None:
        assert isinstance(keys, IdempotencyKeys)

    def test_a_key_is_reserved_once_then_keeps_the_first_response(self, keys: IdempotencyKeys) -> None:
        assert keys.get("k") is None

        reserved, mine = keys.reserve("k", "fp-1")
        again, second = keys.reserve("k", "fp-2")
        kept = keys.finish("k", reserved, StoredResponse("fp-1", 200, '{"version": 2}'))

        assert mine is True and second is False and again == reserved
        assert reserved.status == IN_FLIGHT and reserved.body_hash == "fp-1"
        assert float(orjson.loads(reserved.response)["in_flight_until"]) == self.now + keys.seconds
        assert kept == StoredResponse("fp-1", 200, '{"version": 2}') == keys.get("k")
        assert keys.reserve("k", "fp-1") == (kept, False)
        assert keys.get("other") is None

    def test_a_released_reservation_frees_the_key(self, keys: IdempotencyKeys) -> None:
        reserved, _ = keys.reserve("k", "fp-1")

        keys.release("k", reserved)

        assert keys.get("k") is None
        taken, mine = keys.reserve("k", "fp-2")
        assert mine is True and taken.body_hash == "fp-2"

    def test_an_expired_reservation_is_taken_over_and_only_the_taker_finishes(self, keys: IdempotencyKeys) -> None:
        stale, _ = keys.reserve("k", "fp-1")
        self.now += keys.seconds - 1
        assert keys.reserve("k", "fp-1") == (stale, False)

        self.now += 1
        taken, mine = keys.reserve("k", "fp-2")
        late = keys.finish("k", stale, StoredResponse("fp-1", 200, "{}"))  # the first request came back after all
        keys.release("k", stale)  # nor can it release the taker's reservation

        assert mine is True and taken != stale and taken.body_hash == "fp-2"
        assert late == taken == keys.get("k")
        assert keys.finish("k", taken, StoredResponse("fp-2", 200, '{"ok": true}')) == StoredResponse("fp-2", 200, '{"ok": true}')
        assert keys.get("k") == StoredResponse("fp-2", 200, '{"ok": true}')

    def test_a_kept_response_never_expires(self, keys: IdempotencyKeys) -> None:
        reserved, _ = keys.reserve("k", "fp-1")
        keys.finish("k", reserved, StoredResponse("fp-1", 200, "{}"))
        self.now += 10 * keys.seconds

        assert keys.reserve("k", "fp-2") == (StoredResponse("fp-1", 200, "{}"), False)
        keys.release("k", reserved)
        assert keys.get("k") == StoredResponse("fp-1", 200, "{}")


class TestMemoryIdempotencyKeys(MemoryStores, IdempotencyKeysContract):
    pass


class TestSQLiteIdempotencyKeys(SQLiteStores, IdempotencyKeysContract):
    pass


class TestPostgresIdempotencyKeys(PostgresStores, IdempotencyKeysContract):
    pass


# ---------------------------------------------------------------- the data keys' rows

WRAPPED = b"\x01" + bytes(range(40))
"""A data key as a master key wraps it: first byte 1 (the bytes are opaque to the port)."""
PLAIN = b"\x00" + bytes(32)
"""A data key kept unwrapped: first byte 0."""


def erased_time(row: Any) -> datetime:
    """Returns the erasure time of a key row (a datetime, or its ISO text), in UTC."""
    at = row[1]
    found = at if isinstance(at, datetime) else datetime.fromisoformat(at)
    return found.astimezone(UTC)


class DataKeyStoreContract:
    """The cases every backend's `DataKeyStore` passes."""

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    @pytest.fixture
    def rows(self) -> DataKeyStore:
        return ports_of(self.open_store(views=False))[2]

    def test_the_port_is_an_implementation_of_it(self, rows: DataKeyStore) -> None:
        assert isinstance(rows, DataKeyStore)

    def test_an_empty_store_has_no_rows(self, rows: DataKeyStore) -> None:
        assert rows.select(uuid4()) is None
        assert rows.select_check() is None
        assert rows.wrapped_sample() is None
        assert rows.counts() == (0, 0, 0)

    def test_a_key_is_inserted_once(self, rows: DataKeyStore) -> None:
        one = uuid4()

        rows.insert(one, WRAPPED, None)
        rows.insert(one, PLAIN, None)  # the conversation has its key: kept as it was

        assert rows.select(one) == (WRAPPED, None)
        assert rows.counts() == (1, 0, 0)
        assert rows.wrapped_sample() == (one, WRAPPED)

    def test_a_key_is_inserted_only_while_the_check_row_is_the_one_given(self, rows: DataKeyStore) -> None:
        first, second, third = uuid4(), uuid4(), uuid4()

        rows.insert(first, WRAPPED, b"check")  # no check row yet: not as the writer saw it
        assert rows.select(first) is None
        assert rows.insert_check(b"check") is True
        rows.insert(second, WRAPPED, b"check")
        rows.insert(third, WRAPPED, None)  # the writer saw no check row: it changed since

        assert rows.select_check() == b"check"
        assert rows.select(second) == (WRAPPED, None)
        assert rows.select(third) is None

    def test_the_check_row_is_made_once_and_never_over_unwrapped_keys(self, rows: DataKeyStore) -> None:
        assert rows.insert_check(b"first") is True
        assert rows.insert_check(b"second") is True  # there is one: it stays

        assert rows.select_check() == b"first"

    def test_no_check_row_is_made_where_a_key_is_kept_unwrapped(self, rows: DataKeyStore) -> None:
        rows.insert(uuid4(), PLAIN, None)

        assert rows.insert_check(b"check") is True
        assert rows.select_check() is None
        assert rows.wrapped_sample() is None  # only a wrapped key is a sample of the master key
        assert rows.counts() == (0, 1, 0)

    def test_an_erased_key_keeps_its_first_time(self, rows: DataKeyStore) -> None:
        kept, never = uuid4(), uuid4()
        rows.insert(kept, WRAPPED, None)

        rows.erase(kept, AT)
        rows.erase(kept, AT + timedelta(days=1))
        rows.erase(never, AT + timedelta(hours=1))  # no key yet: it gets an erased row

        for conversation, at in ((kept, AT), (never, AT + timedelta(hours=1))):
            row = rows.select(conversation)
            assert row is not None and row[0] is None and erased_time(row) == at
        assert rows.counts() == (0, 0, 2)
        assert rows.wrapped_sample() is None
        rows.insert(kept, WRAPPED, None)  # an erased key is never made again
        assert rows.select(kept) is not None and rows.select(kept)[0] is None  # type: ignore[index]

    def test_erased_names_the_conversations_whose_key_is_erased(self, rows: DataKeyStore) -> None:
        kept, gone, never = uuid4(), uuid4(), uuid4()
        assert rows.erased() == set()
        rows.insert(kept, WRAPPED, None)
        rows.insert(gone, PLAIN, None)

        rows.erase(gone, AT)
        rows.erase(never, AT)  # no key yet: an erased row

        assert rows.erased() == {gone, never}
        assert all(isinstance(conversation, UUID) for conversation in rows.erased())

    def test_rewrap_changes_every_key_and_the_check_row_in_one_go(self, rows: DataKeyStore) -> None:
        one, two, gone = uuid4(), uuid4(), uuid4()
        rows.insert(one, PLAIN, None)
        rows.insert(two, PLAIN, None)
        rows.erase(gone, AT)
        seen: list[tuple[UUID, bytes]] = []
        also: list[object] = []

        def change(conversation: UUID, key: bytes) -> bytes:
            seen.append((conversation, key))
            return b"\x01" + conversation.bytes + key[1:]

        changed = rows.rewrap(change, b"sealed", also.append)

        assert changed == 2 and len(also) == 1
        assert sorted(seen) == sorted([(one, PLAIN), (two, PLAIN)])  # the erased key is not a key
        assert rows.select(one) == (b"\x01" + one.bytes + PLAIN[1:], None)
        assert rows.select(two) == (b"\x01" + two.bytes + PLAIN[1:], None)
        assert rows.select_check() == b"sealed"
        assert rows.counts() == (2, 0, 1)

        assert rows.rewrap(lambda _, key: PLAIN, None, lambda _: None) == 2  # unwrapped again: no check row
        assert rows.select_check() is None and rows.counts() == (0, 2, 1)

    @pytest.mark.parametrize("failing", ["change", "also"])
    def test_a_rewrap_that_fails_changes_nothing(self, rows: DataKeyStore, failing: str) -> None:
        one, two = uuid4(), uuid4()
        rows.insert(one, PLAIN, None)
        rows.insert(two, PLAIN, None)

        def change(conversation: UUID, key: bytes) -> bytes:
            if failing == "change" and conversation == max(one, two):
                raise RuntimeError("no key for it")
            return WRAPPED

        def also(_: object) -> None:
            if failing == "also":
                raise RuntimeError("the other write failed")

        with pytest.raises(RuntimeError):
            rows.rewrap(change, b"sealed", also)

        assert rows.select(one) == (PLAIN, None) and rows.select(two) == (PLAIN, None)
        assert rows.select_check() is None and rows.counts() == (0, 2, 0)

    def test_scrub_keeps_every_row(self, rows: DataKeyStore) -> None:
        one, gone = uuid4(), uuid4()
        rows.insert(one, WRAPPED, None)
        rows.erase(gone, AT)

        rows.scrub()

        assert rows.select(one) == (WRAPPED, None) and rows.counts() == (1, 0, 1)


class TestMemoryDataKeyStore(MemoryStores, DataKeyStoreContract):
    pass


class TestSQLiteDataKeyStore(SQLiteStores, DataKeyStoreContract):
    pass


class TestPostgresDataKeyStore(PostgresStores, DataKeyStoreContract):
    pass
