"""Delivery in any order (issue 35, item 2): the chat delivers lines at least once and a retry
queue may deliver them in any order. A line that cannot be placed yet is refused as too early
(retryable, `waits_for` names what it waits for) and stores nothing; a redelivery in order then
ends in the store of an in-order delivery, on every backend."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.api import Chatrecord
from adapters.bootstrap import build_store, open_store
from adapters.service.export import export_lines
from adapters.store.settings import postgres_env, sqlite_env
from domain.errors import ChatrecordError

sys.path.insert(0, str(Path(__file__).parent.parent / "unit"))
from test_properties import EPISODES, tell

sys.path.insert(0, str(Path(__file__).parent))
from test_conversations import _schema_named, same_store

DEMO = Path(__file__).parent.parent / "data" / "demo_seo_tour.jsonl"
PLACED_BY_THEIR_FACTS = frozenset({"conversation_started", "card_decided", "question_answered"})
"""The lines the store places by their own facts (the start; a decision or an answer on the
segment it names); every other line is placed by the `follows` the chat sends with it (a user
message after a turn, a turn's segment, a continuation, an edit, a retry, a tour end)."""


def delivered(chat: Chatrecord, lines: list[bytes]) -> tuple[int, list[str]]:
    """Ingests `lines` in order with refused lines skipped, as `ingest --skip-bad` does; returns
    the events appended and the refusals."""
    report = chat.ingest(lines, "delivery.jsonl", skip_bad=True)
    assert report.stopped is None
    return report.appended, list(report.rejected)


def stored(chat: Chatrecord, conversation: str) -> list[tuple[int, str, str | None]]:
    return [(e.originator_version, type(e).__name__, e.source) for e in chat.store.events(conversation)]


def same_conversation(chat: Chatrecord, in_order: Chatrecord, conversation: str) -> None:
    """Asserts `chat` holds `conversation` as `in_order` does: the log, the export, replay, audit,
    the rebuild diff, and read-model rows that are the fold of that log."""
    assert stored(chat, conversation) == stored(in_order, conversation)
    assert chat.export(conversation).lines == in_order.export(conversation).lines
    same_store(in_order, chat, conversation)
    assert [(v.differs, v.problem) for v in chat.verify_rows(conversation)] in ([((), None)], [])


@pytest.mark.parametrize("seed", range(6))
def test_the_demo_shuffled_then_delivered_in_order_is_the_demo_delivered_in_order(seed: int) -> None:
    """The issue's story: the demo tour shuffled and ingested with --skip-bad, then the file in
    order. An early line used to be stored where it did not belong (user message 3 before the
    tour), and the in-order delivery then failed on it."""
    lines = DEMO.read_bytes().splitlines()
    in_order = Chatrecord(open_store(memory=True))
    in_order.ingest(lines, "demo.jsonl")
    shuffled = list(lines)
    random.Random(seed).shuffle(shuffled)
    chat = Chatrecord(open_store(memory=True))

    delivered(chat, shuffled)
    report = chat.ingest(lines, "demo.jsonl")

    assert (report.stopped, report.rejected) == (None, [])
    same_conversation(chat, in_order, "conv-demo-seo")


def test_a_user_message_past_a_gap_waits_for_the_message_before_it_and_says_so_per_line() -> None:
    lines = DEMO.read_bytes().splitlines()
    chat = Chatrecord(open_store(memory=True))

    appended, refused = delivered(chat, [lines[0], lines[-1], lines[1]])

    assert appended == 3  # started, the skill of message 1, message 1
    assert refused == [
        "delivery.jsonl: line 2, message: user message 3 waits for message 2: the conversation's last user message is 0 "
        "(numbers go up by one; nothing of it was stored, deliver it again after message 2)"
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Chatrecord]]:
    """Opens a new empty store of the backend each call (one file, one PostgreSQL schema); the
    caller closes it."""
    counter = iter(range(10**6))
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else ""
    base = request.getfixturevalue("postgres_schema") if request.param == "postgres" else ""

    def open_one() -> Chatrecord:
        n = next(counter)
        if request.param == "sqlite":
            return Chatrecord(build_store(sqlite_env(tmp_path / f"s{n}.sqlite")))
        env = {**postgres_env(url), "POSTGRES_SCHEMA": _schema_named(url, request, f"{base}_{n}"), "POSTGRES_POOL_SIZE": "1"}
        return Chatrecord(build_store(env))

    yield open_one


def test_any_shuffle_with_repeats_then_the_whole_conversation_in_order_is_the_in_order_store(
    fresh: Callable[[], Chatrecord],
) -> None:
    """Conversations told at random (cards, questions, edits, retried and undecided cards, tour
    ends, legacy rows), each line delivered once or more in any order, one by one, a refused
    line skipped; then the whole conversation in order. Every refusal is a line that came too
    early, named by what it waits for; nothing early is ever in the log before what precedes it
    (the log is a prefix of the in-order log); and the end is the in-order store."""

    @settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(
        legacy=st.integers(0, 2),
        episodes=EPISODES,
        data=st.data(),
    )
    def shuffled(legacy: int, episodes: list[tuple], data: st.DataObject) -> None:
        told = [dict(x) for x in export_lines(tell(legacy, episodes, "conv-test").events).lines]
        in_order = Chatrecord(open_store(memory=True))
        version = 0
        for x in told:
            follows = version
            version = in_order.record(x).state.version  # type: ignore[union-attr]
            if x["type"] not in PLACED_BY_THEIR_FACTS or data.draw(st.booleans(), label="follows"):
                x["follows"] = follows
        copies = data.draw(st.lists(st.integers(1, 3), min_size=len(told), max_size=len(told)), label="copies")
        delivery = data.draw(st.permutations([x for x, n in zip(told, copies, strict=True) for _ in range(n)]), label="order")
        chat = fresh()
        try:
            for x in delivery:
                try:
                    chat.record(x)
                except ChatrecordError as refused:
                    assert refused.waits_for is not None, f"{type(refused).__name__}: {refused}"
            early = stored(chat, "conv-test") if chat.store.events("conv-test") else []
            assert early == stored(in_order, "conv-test")[: len(early)]

            report = chat.ingest([json.dumps(x) for x in told], "in-order.jsonl")

            assert (report.stopped, report.rejected) == (None, [])
            same_conversation(chat, in_order, "conv-test")
        finally:
            chat.close()
            in_order.close()

    shuffled()
