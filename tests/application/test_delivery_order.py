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
from adapters.backends.settings import postgres_env, sqlite_env
from adapters.bootstrap import build_store, open_store
from adapters.service.export import export_lines
from domain.errors import ChatrecordError
from tests.line_sources import versions_by_line

sys.path.insert(0, str(Path(__file__).parent.parent / "unit"))
from test_properties import EPISODES, tell

sys.path.insert(0, str(Path(__file__).parent))
from test_conversations import _schema_named, same_store

DEMO = Path(__file__).parent.parent / "data" / "demo_seo_tour.jsonl"
BEHALTEN = Path(__file__).parent.parent / "data" / "behalten_tour.jsonl"
PLACED_BY_THEIR_FACTS = frozenset({"conversation_started", "card_decided", "question_answered"})
"""The lines the store places by their own facts (the start; a decision or an answer on the
segment it names; and a continuation, `placed_by_their_facts`); every other line is placed by the
`follows` the chat sends with it (a user message after a turn, a turn's segment, an edit, a
retry, a tour end)."""


def placed_by_their_facts(line: dict) -> bool:  # type: ignore[type-arg]
    """Returns True for a line the store places without `follows`: a continuation resumes the
    run and round its decision ended the pause of."""
    return line["type"] in PLACED_BY_THEIR_FACTS or line.get("trigger") in ("approval", "answer")


def delivered(chat: Chatrecord, lines: list[bytes]) -> tuple[int, list[str]]:
    """Ingests `lines` in order with refused lines skipped, as `ingest --skip-bad` does; returns
    the events appended and the refusals."""
    report = chat.ingest(lines, "delivery.jsonl", skip_bad=True)
    assert report.stopped is None
    return report.appended, list(report.rejected)


def stored(chat: Chatrecord, conversation: str) -> list[tuple[int, str, str | None]]:
    return versions_by_line(chat.store.events(conversation))


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


def test_a_continuation_delivered_before_the_decisions_before_it_waits_for_its_own_and_then_fits() -> None:
    """The tester's shuffle (F5): the Behalten tour's last continuation (segment /4, resuming the
    run at round 3) delivered right after the first card's decision. It used to be stored as
    the continuation of card /1, and the in-order delivery then failed on segment /2."""
    lines = BEHALTEN.read_bytes().splitlines()
    in_order = Chatrecord(open_store(memory=True))
    in_order.ingest(lines, "behalten.jsonl")
    chat = Chatrecord(open_store(memory=True))

    appended, refused = delivered(chat, [*lines[:4], lines[8]])

    assert appended == 5  # started, the skill, message 1, segment /1, its card decided
    assert refused == [
        "delivery.jsonl: line 5, trigger: segment 7c1d0b5e-2f4a-4b8e-9c3d-5a6b7c8d9e01/4 resumes run "
        "7c1d0b5e-2f4a-4b8e-9c3d-5a6b7c8d9e01 paused at round 3, but the decision recorded last ended the pause of run "
        "7c1d0b5e-2f4a-4b8e-9c3d-5a6b7c8d9e01 at round 1; it continues another decision, still to come "
        "(nothing of it was stored; deliver it again after the card_decided it continues)"
    ]
    with pytest.raises(ChatrecordError) as early:
        chat.record(json.loads(lines[8]))
    assert early.value.waits_for == "card_decided of run 7c1d0b5e-2f4a-4b8e-9c3d-5a6b7c8d9e01 paused at round 3"
    report = chat.ingest(lines, "behalten.jsonl")

    assert (report.stopped, report.rejected, report.appended) == (None, [], 7)  # lines 5 to 11, one event each
    same_conversation(chat, in_order, "conv-behalten")


@pytest.mark.parametrize("seed", [41, 99, 150, 161, 0, 1])
def test_the_behalten_tour_shuffled_with_no_follows_on_its_continuations_ends_in_the_in_order_store(seed: int) -> None:
    """Every line but the start, the decisions and the continuations carries `follows`; the
    continuations land where they belong all the same: each waits for the decision that ended
    its run's pause at the round it resumes. (Seeds 41, 99, 150 and 161 stored a continuation
    after another card's decision; the in-order delivery then failed.)"""
    lines = BEHALTEN.read_bytes().splitlines()
    in_order = Chatrecord(open_store(memory=True))
    told, version = [], 0
    for line in lines:
        x, follows = json.loads(line), version
        version = in_order.record(x).state.version  # type: ignore[union-attr]
        told.append(x if placed_by_their_facts(x) else {**x, "follows": follows})
    random.Random(seed).shuffle(told)
    chat = Chatrecord(open_store(memory=True))

    delivered(chat, [json.dumps(x).encode() for x in told])
    report = chat.ingest(lines, "behalten.jsonl")

    assert (report.stopped, report.rejected) == (None, [])
    same_conversation(chat, in_order, "conv-behalten")


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
            if not placed_by_their_facts(x) or data.draw(st.booleans(), label="follows"):
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
