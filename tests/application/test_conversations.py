"""`list` and `export` (issue 21, items 1 and 2) and ids as chatrecord prints them (issue 20,
item 8), on every backend: the list pages newest activity first with a stable cursor, and an
export ingested into an empty store gives the same turns, audit rows and chain."""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.api import Chatrecord
from adapters.backends.settings import postgres_env, sqlite_env
from adapters.bootstrap import build_store, open_store
from adapters.service.conversations import CURSOR_PATTERN, BadCursor, BadFilter, ListNeedsRebuild
from adapters.service.export import NoSuchMessage, export_lines
from adapters.views.listing import ListQuery

sys.path.insert(0, str(Path(__file__).parent.parent / "unit"))
from test_properties import EPISODES, tell

DEMO = Path(__file__).parent.parent / "data" / "demo_seo_tour.jsonl"
Opener = Callable[[], Chatrecord]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Yields a function that opens a new, empty store of the backend each call."""
    opened: list[Chatrecord] = []
    count = 0

    def open_one() -> Chatrecord:
        nonlocal count
        count += 1
        if request.param == "memory":
            store = open_store(memory=True)
        elif request.param == "sqlite":
            store = build_store(sqlite_env(tmp_path / f"store{count}.sqlite"))
        else:
            url = request.getfixturevalue("postgres_url")
            schema = request.getfixturevalue("postgres_schema") if count == 1 else _schema(url, request, count)
            store = build_store({**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "1"})
        chat = Chatrecord(store)
        opened.append(chat)
        return chat

    yield open_one
    for chat in opened:
        chat.close()


def _schema(url: str, request: pytest.FixtureRequest, count: int) -> str:
    import psycopg
    from psycopg import sql

    name = f"{request.getfixturevalue('postgres_schema')}_{count}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    request.addfinalizer(lambda: _drop(url, name))
    return name


def _drop(url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def line(line_type: str, conversation: str, at: str, **fields: Any) -> dict[str, Any]:
    return {"type": line_type, "conversation": conversation, "at": at, **fields}


def started(chat: Chatrecord, conversation: str, at: str) -> None:
    chat.record(line("conversation_started", conversation, at, kind="chat", owner=7))


# ---------------------------------------------------------------- list


def test_list_pages_newest_activity_first_with_a_stable_cursor(stores: Opener) -> None:
    chat = stores()
    started(chat, "a", "2026-10-28T09:00:00Z")
    started(chat, "chat 17", "2026-10-28T09:01:00Z")
    started(chat, "c", "2026-10-28T09:02:00Z")
    chat.record(line("user_message", "a", "2026-10-29T10:00:00Z", message=1, text="Hallo", page=0))
    chat.record(
        line(
            "segment_returned",
            "a",
            "2026-10-29T10:00:05Z",
            segment="r/1",
            run="r",
            trigger="turn",
            outcome="completed",
            answer="Hi",
        )
    )

    first = chat.conversations(limit=2)
    second = chat.conversations(limit=2, cursor=first.cursor)
    chat.record(line("user_message", "c", "2026-10-30T10:00:00Z", message=1, text="neu", page=0))  # moves to the front
    again = chat.conversations(limit=2, cursor=first.cursor)

    assert [c.to_json() for c in first.conversations] == [
        {
            "conversation": "a",
            "kind": "chat",
            "messages": 1,
            "segments": 1,
            "events": 3,
            "first_at": "2026-10-28T09:00:00Z",
            "last_at": "2026-10-29T10:00:05Z",
            "erased": False,
            "owner": 7,
            "status": [],
        },
        {
            "conversation": "c",
            "kind": "chat",
            "messages": 0,
            "segments": 0,
            "events": 1,
            "first_at": "2026-10-28T09:02:00Z",
            "last_at": "2026-10-28T09:02:00Z",
            "erased": False,
            "owner": 7,
            "status": [],
        },
    ]
    assert [c.conversation for c in second.conversations] == ["chat17:h9a90eaf363ff759f"]
    assert second.cursor is None
    assert [c.conversation for c in again.conversations] == ["chat17:h9a90eaf363ff759f"]
    assert [c.conversation for c in chat.conversations().conversations] == ["c", "a", "chat17:h9a90eaf363ff759f"]
    since = datetime(2026, 10, 29, tzinfo=UTC)
    assert [c.conversation for c in chat.conversations(since=since).conversations] == ["c", "a"]
    # the cursor is the page's last conversation: its last activity (µs) and its UUID
    a_last = int(datetime(2026, 10, 28, 9, 2, tzinfo=UTC).timestamp()) * 1_000_000
    assert first.cursor is not None and re.fullmatch(CURSOR_PATTERN, first.cursor)
    assert first.cursor.startswith(f"c{a_last}.")
    # every cursor of the documented form is a page start: one after all times reads from the newest
    far = chat.conversations(cursor="c999999999999999999." + "f" * 32)
    assert [c.conversation for c in far.conversations] == ["c", "a", "chat17:h9a90eaf363ff759f"]
    assert chat.conversations(cursor="c1." + "0" * 32).conversations == ()
    for bad in ("", "c", "Y3IxOjMy", "c-1", "c1x", "c12", "c1.abc", "c1." + "F" * 32):
        with pytest.raises(BadCursor):
            chat.conversations(cursor=bad)


def test_list_orders_by_the_time_of_the_last_event_not_by_storage_order(stores: Opener) -> None:
    """Lines stored in one order with times in the other (a chat's late delivery, a clock that
    disagrees): the newest last event comes first, ties by id, each listed once across pages."""
    chat = stores()
    for n in range(6):  # stored 0..5, last activity 5..0 days after 10-01
        started(chat, f"k{n}", f"2026-10-{6 - n:02d}T09:00:00Z")
    for n in (6, 7, 8):  # three at the same time
        started(chat, f"k{n}", "2026-10-03T12:00:00Z")
    chat.record(line("user_message", "k5", "2026-09-30T09:00:00Z", message=1, text="früher", page=0))  # earlier

    pages, cursor = [], None
    while True:
        page = chat.conversations(limit=2, cursor=cursor)
        pages.append([c.conversation for c in page.conversations])
        cursor = page.cursor
        if cursor is None:
            break
    listed = [name for page in pages for name in page]

    assert listed[:3] == ["k0", "k1", "k2"]
    assert sorted(listed[3:6]) == ["k6", "k7", "k8"] and listed[6:] == ["k3", "k4", "k5"]
    assert all(len(page) <= 2 for page in pages) and len(listed) == len(set(listed)) == 9
    assert chat.conversations(limit=50).conversations[-1].last_at == datetime(2026, 9, 30, 9, tzinfo=UTC)
    since = datetime(2026, 10, 4, tzinfo=UTC)
    assert [c.conversation for c in chat.conversations(since=since).conversations] == ["k0", "k1", "k2"]


@pytest.mark.parametrize("stores", ["sqlite", "postgres"], indirect=True)
def test_read_models_of_an_earlier_version_are_upgraded_for_the_list_by_rebuild(stores: Opener) -> None:
    """Read models an earlier version made keep no last activity in their heads, nor its index:
    `list` says to run `chatrecord rebuild`, whose new generation lists newest activity first."""
    chat = stores()
    started(chat, "old", "2026-10-28T09:00:00Z")
    started(chat, "new", "2026-10-29T09:00:00Z")
    backend, generation = chat.read_models.storage, chat.read_models.live_pointer().generation
    heads = f"views_g{generation}_heads"
    postgres = backend.p == "%s"
    with backend.transaction(write=True) as curs:  # as an earlier version left them
        schema = f'"{backend.schema}".' if postgres else ""
        curs.execute(f"DROP TABLE {schema}views_g{generation}_listing")
        curs.execute(
            f"UPDATE {schema}{heads} SET body = "
            + ("(body::jsonb - 'last_at')::text" if postgres else "json_remove(body, '$.last_at')")
        )
    with pytest.raises(ListNeedsRebuild) as refused:
        chat.conversations()
    assert str(refused.value).endswith("run: chatrecord rebuild --rules 2026-11-02")  # the pinned rule set kept

    chat.rebuild(chat.read_models.active_rules())

    assert chat.read_models.live_pointer().generation == generation + 1
    assert [c.conversation for c in chat.conversations().conversations] == ["new", "old"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_process_of_this_version_appends_to_a_generation_without_the_list_table(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A generation an earlier version made has no list table: a process that opens it writes
    no list rows (its append function's list insert never runs), and its appends and reads work."""
    if backend == "sqlite":
        env = sqlite_env(tmp_path / "old.sqlite")
    else:
        url = request.getfixturevalue("postgres_url")
        env = {**postgres_env(url), "POSTGRES_SCHEMA": request.getfixturevalue("postgres_schema")}
    chat = Chatrecord(build_store(env))
    started(chat, "old", "2026-10-28T09:00:00Z")
    storage, generation = chat.read_models.storage, chat.read_models.live_pointer().generation
    with storage.transaction(write=True) as curs:  # as an earlier version left it
        schema = f'"{storage.schema}".' if backend == "postgres" else ""
        curs.execute(f"DROP TABLE {schema}views_g{generation}_listing")
    chat.close()

    again = Chatrecord(build_store(env))
    for n in (1, 2):
        again.record(line("user_message", "old", f"2026-10-30T09:0{n}:00Z", message=n, text=f"m{n}", page=0))
    assert again.read_models.summary("old").version == 3
    assert [v.differs for v in again.verify_rows("old")] == [()]
    again.close()


def _segment(chat: Chatrecord, conversation: str, at: str, outcome: str, **more: Any) -> None:
    chat.record(line("user_message", conversation, at.replace(":05Z", ":00Z"), message=1, text="Hallo", page=0))
    chat.record(
        line("segment_returned", conversation, at, segment="r/1", run="r", trigger="turn", outcome=outcome, answer="Hi", **more)
    )


def _filtered_store(chat: Chatrecord) -> None:
    """Five conversations: completed (owner 7), failed (owner 8), a question waiting, one left
    undecided (the tour ended), and one erased; each a minute later than the one before."""
    for n, (name, owner) in enumerate((("ok_1", 7), ("bad-1", 8), ("wait-1", 7), ("left-1", 8), ("gone-1", 7))):
        chat.record(line("conversation_started", name, f"2026-10-28T09:0{n}:00Z", kind="chat", owner=owner))
    _segment(chat, "ok_1", "2026-10-29T09:01:05Z", "completed")
    _segment(chat, "bad-1", "2026-10-29T09:02:05Z", "failed")
    question = {"pending": [{"toolName": "ask_choice"}]}
    _segment(chat, "wait-1", "2026-10-29T09:03:05Z", "awaiting_input", **question)
    _segment(chat, "left-1", "2026-10-29T09:04:05Z", "awaiting_input", **question)
    chat.record(line("tour_ended", "left-1", "2026-10-29T09:04:30Z"))
    _segment(chat, "gone-1", "2026-10-29T09:05:05Z", "completed")
    chat.erase("gone-1")


def test_list_filters_by_owner_time_part_of_the_id_and_status(stores: Opener) -> None:
    chat = stores()
    _filtered_store(chat)

    def names(**asked: Any) -> list[str]:
        return [c.conversation for c in chat.conversations(**asked).conversations]

    listed = {c.conversation: c for c in chat.conversations().conversations}
    assert list(listed) == ["gone-1", "left-1", "wait-1", "bad-1", "ok_1"]  # the chat's time of last activity
    assert {n: (c.owner, c.status) for n, c in listed.items()} == {
        "gone-1": (7, ("erased",)),
        "left-1": (8, ("undecided",)),
        "wait-1": (7, ("waiting",)),
        "bad-1": (8, ("failed",)),
        "ok_1": (7, ()),
    }
    assert listed["left-1"].to_json()["status"] == ["undecided"] and listed["ok_1"].to_json()["owner"] == 7
    assert names(owner=8) == ["left-1", "bad-1"]
    assert names(search="-1") == ["gone-1", "left-1", "wait-1", "bad-1"]
    assert names(search="_") == ["ok_1"]  # `_` is the id's own character, not LIKE's
    assert names(search="WAIT") == ["wait-1"]
    assert names(status=("failed", "undecided")) == ["left-1", "bad-1"]
    assert names(status=("waiting",), owner=8) == []
    since, until = datetime(2026, 10, 29, 9, 2, 5, tzinfo=UTC), datetime(2026, 10, 29, 9, 4, 30, tzinfo=UTC)
    assert names(since=since, until=until) == ["wait-1", "bad-1"]  # left-1's last line is at 09:04:30
    assert names(status=("unchecked",)) == ["gone-1", "left-1", "wait-1", "bad-1", "ok_1"]
    assert names(status=("verified", "broken")) == []
    assert names(since=until, until=since) == [] and names(since=since, until=since) == []  # an empty range
    with pytest.raises(BadFilter):
        chat.conversations(status=("lost",))


def test_a_filtered_list_pages_with_its_cursor(stores: Opener) -> None:
    chat = stores()
    _filtered_store(chat)

    first = chat.conversations(limit=1, owner=7)
    second = chat.conversations(limit=1, cursor=first.cursor, owner=7)
    third = chat.conversations(limit=1, cursor=second.cursor, owner=7)
    chained = chat.conversations(limit=2, status=("unchecked",), search="-")
    after = chat.conversations(limit=2, cursor=chained.cursor, status=("unchecked",), search="-")

    assert [[c.conversation for c in p.conversations] for p in (first, second, third)] == [["gone-1"], ["wait-1"], ["ok_1"]]
    assert third.cursor is None
    assert [c.conversation for c in chained.conversations] == ["gone-1", "left-1"]
    assert ([c.conversation for c in after.conversations], after.cursor) == (["wait-1", "bad-1"], None)


def _messages(chat: Chatrecord) -> dict[str, int]:
    return {c.conversation: c.messages for c in chat.conversations().conversations}


def test_list_counts_the_live_user_messages_not_the_newest_number(stores: Opener) -> None:
    """Issue 21: `messages` is how many user messages a conversation has (after an edit's
    cut), read with its head, not the newest message's number."""
    chat = stores()
    started(chat, "big", "2026-10-28T09:00:00Z")
    for n in (1, 2):  # message 1 edited (cutting 2), then message 3: 2 messages, the newest numbered 3
        chat.record(line("user_message", "big", f"2026-10-28T09:00:0{n}Z", message=n, text="eins", page=0))
    chat.record(line("message_edited", "big", "2026-10-28T09:00:03Z", message=1, text="anders"))
    chat.record(line("user_message", "big", "2026-10-28T09:00:04Z", message=3, text="drei", page=0))
    started(chat, "ed", "2026-10-28T09:00:00Z")
    for n in (1, 2, 3):
        chat.record(line("user_message", "ed", f"2026-10-28T09:0{n}:00Z", message=n, text=f"m{n}", page=0))
    assert _messages(chat) == {"big": 2, "ed": 3}

    chat.record(line("message_edited", "ed", "2026-10-28T09:05:00Z", message=2, text="anders"))  # cuts message 3
    assert _messages(chat) == {"big": 2, "ed": 2}
    chat.record(line("user_message", "ed", "2026-10-28T09:06:00Z", message=3, text="neu", page=0))
    assert _messages(chat) == {"big": 2, "ed": 3}


@pytest.mark.parametrize("stores", ["sqlite", "postgres"], indirect=True)
def test_a_head_an_earlier_version_wrote_without_the_count_lists_the_history_index_count(stores: Opener) -> None:
    chat = stores()
    started(chat, "old", "2026-10-28T09:00:00Z")
    for n in (1, 2, 3):
        chat.record(line("user_message", "old", f"2026-10-28T09:0{n}:00Z", message=n, text=f"m{n}", page=0))
    chat.record(line("message_edited", "old", "2026-10-28T09:05:00Z", message=2, text="anders"))
    backend, generation = chat.read_models.storage, chat.read_models.live_pointer().generation
    postgres = backend.p == "%s"
    with backend.transaction(write=True) as curs:  # as an earlier version left it: no count
        schema = f'"{backend.schema}".' if postgres else ""
        curs.execute(
            f"UPDATE {schema}views_g{generation}_heads SET body = "
            + ("(body::jsonb - 'users')::text" if postgres else "json_remove(body, '$.users')")
        )
        curs.execute(f"UPDATE {schema}views_g{generation}_listing SET users = NULL")
    with backend.transaction(write=False) as curs:
        assert [(r.conversation, r.users) for r in backend.listed(curs, generation, ListQuery(10))] == [("old", None)]

    assert _messages(chat) == {"old": 2}  # messages 1 and 2: counted in the history index
    assert [(v.differs, v.problem) for v in chat.verify_rows("old")] == [((), None)]  # no count is no difference


def test_list_marks_an_erased_conversation_and_every_command_takes_the_id_it_prints(stores: Opener) -> None:
    chat = stores()
    started(chat, "chat 17", "2026-10-28T09:00:00Z")
    chat.record(line("user_message", "chat 17", "2026-10-28T09:00:05Z", message=1, text="geheim", page=0))
    listed = chat.conversations().conversations[0].conversation
    chat.erase(listed)

    assert listed == "chat17:h9a90eaf363ff759f"
    assert [(c.conversation, c.erased) for c in chat.conversations().conversations] == [(listed, True)]
    assert [v.ok for v in chat.verify(listed)] == [True]
    assert chat.replay(listed).turns[0].message == 1
    assert chat.export(listed).erased is True


def test_an_empty_store_lists_nothing_and_a_bad_cursor_is_refused(stores: Opener) -> None:
    chat = stores()
    assert (chat.conversations().conversations, chat.conversations().cursor) == ((), None)
    with pytest.raises(BadCursor):
        chat.conversations(cursor="nonsense")


# ---------------------------------------------------------------- export


def same_store(a: Chatrecord, b: Chatrecord, conversation: str) -> None:
    """Asserts that `b` holds `conversation` as `a` does: turn inputs byte for byte, audit rows,
    the rebuild diff, and a chain that verifies."""
    assert json.dumps(b.replay(conversation).to_json()) == json.dumps(a.replay(conversation).to_json())
    assert [r.to_json() for r in b.audit(conversation).rows] == [r.to_json() for r in a.audit(conversation).rows]
    for rules in ("2026-11-01", "2026-11-02"):
        assert [d.conversation for d in b.diff(rules)] == [d.conversation for d in a.diff(rules)]
    assert [v.ok for v in b.verify(conversation)] in ([True], [])  # the memory store keeps no chain


def test_the_demo_exported_and_ingested_again_is_the_same_conversation(stores: Opener) -> None:
    a, b = stores(), stores()
    a.ingest(DEMO.read_bytes().splitlines(), "demo.jsonl")
    lines = a.export("conv-demo-seo").lines
    report = b.ingest([json.dumps(x) for x in lines], "export.jsonl")

    assert (report.stopped, report.rejected) == (None, [])
    same_store(a, b, "conv-demo-seo")
    assert b.export("conv-demo-seo").lines == lines


def test_upto_stops_after_a_message_and_what_belongs_to_it(stores: Opener) -> None:
    a = stores()
    a.ingest(DEMO.read_bytes().splitlines(), "demo.jsonl")
    types = [x["type"] for x in a.export("conv-demo-seo", upto=1).lines]
    assert types == ["conversation_started", "user_message", "segment_returned"]
    for wrong in (4, 99):
        with pytest.raises(NoSuchMessage) as refused:
            a.export("conv-demo-seo", upto=wrong)
        assert str(refused.value) == (f"--upto {wrong}: no user message {wrong}; the conversation's user messages are 1, 2, 3")


def deliver_out_of_order(chat: Chatrecord, lines: Sequence[dict[str, Any]], window: int, seed: int) -> int:
    """Ingests `lines` (each with its `follows`) as a chat delivers them out of order: every line
    twice, shuffled within windows of `window`, a refused line delivered again in the next
    round, until none is refused. Returns how many deliveries were refused."""
    rng = random.Random(seed)
    delivery = [line for _ in range(2) for line in lines]
    for start in range(0, len(delivery), window):
        part = delivery[start : start + window]
        rng.shuffle(part)
        delivery[start : start + window] = part
    refused = 0
    while delivery:
        report = chat.ingest([json.dumps(x) for x in delivery], "delivery.jsonl", skip_bad=True)
        assert report.stopped is None
        again = [int(re.search(r": line (\d+), follows: ", m).group(1)) for m in report.rejected]  # type: ignore[union-attr]
        assert len(again) == len(report.rejected) < len(delivery)  # only lines that came too early, and progress
        refused += len(again)
        delivery = [delivery[n - 1] for n in again]
    return refused


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_generated_conversations_exported_and_ingested_again_are_the_same(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Hypothesis over the conversations `test_properties.tell` makes (edits, undecided cards,
    failed segments, legacy rows, stray continuations), under an id the store keeps or one it
    reduces (`chat 17`), with some lines' times set back (a chat's clock that disagrees with the
    order of its lines): its lines delivered to store A out of order (each with its `follows`,
    twice, shuffled, refused ones delivered again), A's export into an empty store B. A holds
    what the lines in order give, and A and B hold the same conversation: the same turns byte
    for byte, audit rows, rebuild diff, a chain that verifies and the same export."""
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else ""
    base = request.getfixturevalue("postgres_schema") if backend == "postgres" else ""
    counter = iter(range(10**6))

    def fresh() -> Chatrecord:
        n = next(counter)
        if backend == "sqlite":
            return Chatrecord(build_store(sqlite_env(tmp_path / f"s{n}.sqlite")))
        return Chatrecord(
            build_store(
                {
                    **postgres_env(url),
                    "POSTGRES_SCHEMA": _schema_named(url, request, f"{base}_{n}"),
                    "POSTGRES_POOL_SIZE": "1",
                }
            )
        )

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(
        legacy=st.integers(0, 2),
        episodes=EPISODES,
        reduced=st.booleans(),
        window=st.integers(1, 6),
        seed=st.integers(0, 2**16),
        skews=st.dictionaries(st.integers(1, 60), st.integers(1, 7200), max_size=4),
    )
    def round_trip(legacy: int, episodes: list[tuple], reduced: bool, window: int, seed: int, skews: dict[int, int]) -> None:
        told = [dict(x) for x in export_lines(tell(legacy, episodes, "chat 17" if reduced else "conv-test").events).lines]
        for index, seconds in skews.items():  # a line stamped earlier than the one before it
            if index < len(told):
                at = datetime.fromisoformat(told[index]["at"]) - timedelta(seconds=seconds)
                told[index]["at"] = at.isoformat().replace("+00:00", "Z")
        key = "chat17:h9a90eaf363ff759f" if reduced else "conv-test"
        in_order = Chatrecord(open_store(memory=True))
        version = 0
        for x in told:
            x["follows"] = version
            version = in_order.record(x).state.version  # type: ignore[union-attr]
        a, b = fresh(), fresh()
        try:
            deliver_out_of_order(a, told, window, seed)
            exported = a.export(key).lines
            assert exported == in_order.export(key).lines
            assert [x["conversation"] for x in exported] == [key] * len(exported)
            assert b.ingest([json.dumps(x) for x in exported], "export.jsonl").stopped is None
            same_store(a, b, key)
            assert b.export(key).lines == exported
            assert [c.conversation for c in b.conversations().conversations] == [key]
        finally:
            a.close()
            b.close()
            in_order.close()

    round_trip()


def test_out_of_order_delivery_is_refused_and_delivered_again_until_stored() -> None:
    """The delivery the property test uses refuses lines that come too early (so it exercises
    out-of-order lines) and ends in the store of the lines in order."""
    told = [dict(x) for x in _demo_export()]
    version, in_order = 0, Chatrecord(open_store(memory=True))
    for x in told:
        x["follows"] = version
        version = in_order.record(x).state.version  # type: ignore[union-attr]
    chat = Chatrecord(open_store(memory=True))
    assert deliver_out_of_order(chat, told, 4, 8) > 0
    assert chat.export("conv-demo-seo").lines == in_order.export("conv-demo-seo").lines


def _demo_export() -> tuple[dict[str, Any], ...]:
    chat = Chatrecord(open_store(memory=True))
    chat.ingest(DEMO.read_bytes().splitlines(), "demo.jsonl")
    return chat.export("conv-demo-seo").lines


def _schema_named(url: str, request: pytest.FixtureRequest, name: str) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    request.addfinalizer(lambda: _drop(url, name))
    return name


def test_a_conversation_past_the_run_record_cap_round_trips(stores: Opener) -> None:
    """205 turns, each a user message and a segment with a write: past the run record's
    200 entries, whose dropped count the notes read."""
    a, b = stores(), stores()
    told = [line("conversation_started", "long", "2026-10-28T09:00:00Z", kind="chat", owner=7)]
    for n in range(1, 206):
        at = f"2026-10-28T{9 + n // 60:02d}:{n % 60:02d}:00Z"
        told.append(line("user_message", "long", at, message=n, text=f"m{n}", page=42))
        told.append(
            line(
                "segment_returned",
                "long",
                at,
                segment=f"r{n}/1",
                run=f"r{n}",
                trigger="turn",
                outcome="completed" if n % 7 else "failed",
                answer=f"a{n}",
                steps=[
                    {
                        "kind": "tool_write",
                        "round": 1,
                        "durationMs": 3.0,
                        "toolName": "update_page_metadata",
                        "toolIsError": False,
                        "toolOutcome": "ok",
                        "writeTargetTable": "pages",
                        "writeTargetUid": 42,
                        "writeCompleteness": "complete",
                    }
                ],
            )
        )
    assert a.ingest([json.dumps(x) for x in told], "long.jsonl").stopped is None
    exported = a.export("long").lines
    assert b.ingest([json.dumps(x) for x in exported], "export.jsonl").stopped is None

    assert len(exported) == 411
    assert json.dumps(b.turn_input("long").to_json()) == json.dumps(a.turn_input("long").to_json())  # the latest turn
    assert b.turn_notes("long").to_json() == a.turn_notes("long").to_json()
    assert [r.to_json() for r in b.audit("long").rows] == [r.to_json() for r in a.audit("long").rows]
    assert [v.ok for v in b.verify("long")] in ([True], [])


@pytest.mark.parametrize("stores", ["sqlite", "postgres"], indirect=True)  # memory reads the log with every read
def test_a_read_of_a_conversation_this_process_holds_asks_the_log_nothing_to_find_its_key(stores: Opener) -> None:
    """`turn_notes` finds the key a conversation is stored under without reading the log where
    the process holds its state (it appended to it): one round trip less per turn read. Another
    process, holding nothing of it, reads the log once per read to find it. (In memory the read
    models read the log with every read, so there is nothing to count.)"""
    chat = stores()
    started(chat, "Mix-1", "2026-10-28T09:00:00Z")
    chat.record(line("user_message", "Mix-1", "2026-10-28T09:01:00Z", message=1, text="hallo", page=42, skill=None))
    asked: list[object] = []
    select = chat.store.recorder.select_events

    def counted(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("limit") == 1:  # whether a key is stored (the read models read the log otherwise)
            asked.append(args)
        return select(*args, **kwargs)

    chat.store.recorder.select_events = counted  # type: ignore[method-assign]
    notes = chat.turn_notes("Mix-1")
    assert asked == [] and notes.conversation == "Mix-1"
    chat.store.repository.cache.get(chat.store.get("Mix-1").id, evict=True)  # type: ignore[union-attr]
    assert chat.turn_notes("Mix-1").version == notes.version
    assert len(asked) == 1  # not held: the log says whether the key is stored
