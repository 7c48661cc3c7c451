"""The usage audit (issue 38 item 4), on every backend: `Chatrecord.usage` sums the flat usage
rows kept with each segment per conversation, owner and day over a range of the chat's time, a
page at a time; the demo's totals are the sums of its lines (computed here from the file, not by
the code); unknown stays unknown; a rebuild refills the rows and an erasure keeps them."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from adapters.service.usage import BadUsageCursor, UsageNeedsRebuild
from tests.application import test_conversations
from tests.application.test_conversations import Opener, line

stores = test_conversations.stores
"""The fixture: a new, empty store of each backend (memory, SQLite, PostgreSQL) per call."""

DEMO = Path(__file__).parent.parent / "data" / "demo_seo_tour.jsonl"


def demo_sums() -> dict[str, Any]:
    """The demo's usage as its lines state it: every step's duration, every `llm` step's counts
    and cost (summed as decimals), its `tool` steps; one segment per `segment_returned` line."""
    lines = [json.loads(raw) for raw in DEMO.read_text(encoding="utf-8").splitlines() if raw.strip()]
    steps = [s for d in lines if d["type"] == "segment_returned" for s in d.get("steps", [])]
    llm = [s for s in steps if s["kind"] == "llm"]
    return {
        "segments": sum(1 for d in lines if d["type"] == "segment_returned"),
        "duration_ms": float(sum(Decimal(str(s["durationMs"])) for s in steps)),
        "model_calls": len(llm),
        "input_tokens": sum(s["promptTokens"] for s in llm),
        "output_tokens": sum(s["completionTokens"] for s in llm),
        "total_tokens": sum(s["totalTokens"] for s in llm),
        "cost": float(sum(Decimal(str(s["estimatedCost"])) for s in llm)),
        "tool_calls": sum(1 for s in steps if s["kind"] == "tool"),
        "first_at": min(d["at"] for d in lines if d["type"] == "segment_returned"),
        "last_at": max(d["at"] for d in lines if d["type"] == "segment_returned"),
    }


def demo(chat: Any) -> None:
    chat.ingest(DEMO.read_text(encoding="utf-8").splitlines(), "demo_seo_tour.jsonl")


def test_the_demos_usage_totals_are_the_sums_of_its_lines(stores: Opener) -> None:
    chat = stores()
    demo(chat)
    expected = demo_sums()

    page = chat.usage()
    total = page.to_json()["total"]

    assert {k: total[k] for k in expected} == expected
    assert (expected["input_tokens"], expected["cost"], expected["segments"]) == (18000, 0.041, 8)  # the file's, read here
    assert (total["calls_without_usage"], total["calls_without_cost"], total["failed_calls"], total["refused_calls"]) == (
        0,
        0,
        0,
        0,
    )
    assert [g.to_json() for g in page.groups] == [{**page.to_json()["total"], "key": "conv-demo-seo"}]
    assert [(g.key, g.segments) for g in chat.usage("owner").groups] == [(7, 8)]
    assert [(g.key, g.input_tokens) for g in chat.usage("day").groups] == [("2026-10-28", 18000)]


def _call(tokens: int | None, cost: float | None, ms: float = 100.0) -> dict[str, Any]:
    step: dict[str, Any] = {"kind": "llm", "round": 1, "durationMs": ms}
    if tokens is not None:
        step |= {"promptTokens": tokens, "completionTokens": tokens // 10, "totalTokens": tokens + tokens // 10}
    if cost is not None:
        step["estimatedCost"] = cost
    return step


def _turn(chat: Any, conversation: str, at: str, number: int, steps: list[dict[str, Any]], outcome: str = "completed") -> None:
    chat.record(line("user_message", conversation, at.replace(":05Z", ":00Z"), message=number, text="Hallo", page=0))
    chat.record(
        line(
            "segment_returned",
            conversation,
            at,
            segment=f"{conversation}-{number}/1",
            run=f"{conversation}-{number}",
            trigger="turn",
            outcome=outcome,
            answer="Hi",
            steps=steps,
        )
    )


FAILED_TOOL = {
    "kind": "tool",
    "round": 1,
    "durationMs": 5.0,
    "toolName": "get_page",
    "toolIsError": True,
    "toolOutcome": "failed",
}


def three_days(chat: Any) -> None:
    """Conversations of owners 7, 8 and 9 over three days: one call stating
    no usage at all, one stating tokens but no cost, a failed tool call."""
    chat.record(line("conversation_started", "a", "2026-10-28T08:00:00Z", kind="chat", owner=7))
    chat.record(line("conversation_started", "b", "2026-10-28T08:00:00Z", kind="chat", owner=8))
    chat.record(line("conversation_started", "c", "2026-10-28T08:00:00Z", kind="chat", owner=9))
    _turn(chat, "a", "2026-10-28T09:00:05Z", 1, [_call(1000, 0.002)])
    _turn(chat, "a", "2026-10-29T09:00:05Z", 2, [_call(2000, 0.004), _call(None, None)])
    _turn(chat, "b", "2026-10-29T10:00:05Z", 1, [_call(500, None), FAILED_TOOL], outcome="failed")
    _turn(chat, "c", "2026-10-30T09:00:05Z", 1, [_call(None, None, ms=50.5)])


def test_usage_splits_by_day_owner_and_conversation_and_keeps_unknowns_unknown(stores: Opener) -> None:
    chat = stores()
    three_days(chat)

    days = {g.key: g for g in chat.usage("day").groups}
    owners = {g.key: g for g in chat.usage("owner").groups}
    conversations = chat.usage("conversation")

    assert list(days) == ["2026-10-30", "2026-10-29", "2026-10-28"]  # newest first
    assert (days["2026-10-28"].input_tokens, days["2026-10-28"].cost, days["2026-10-28"].output_tokens) == (1000, 0.002, 100)
    day29 = days["2026-10-29"]
    assert (day29.segments, day29.model_calls, day29.input_tokens, day29.total_tokens) == (2, 3, 2500, 2750)
    assert (day29.cost, day29.calls_without_usage, day29.calls_without_cost) == (0.004, 1, 2)
    assert (day29.tool_calls, day29.failed_calls, day29.duration_ms) == (1, 1, 305.0)
    day30 = days["2026-10-30"]  # a call that stated nothing: unknown, never 0
    assert (day30.input_tokens, day30.cost, day30.calls_without_usage, day30.duration_ms) == (None, None, 1, 50.5)
    assert list(owners) == [7, 8, 9]
    assert (owners[7].segments, owners[7].input_tokens, owners[8].cost, owners[9].input_tokens) == (2, 3000, None, None)
    assert [g.key for g in conversations.groups] == ["a", "b", "c"]
    assert conversations.to_json()["total"] | {"first_at": None, "last_at": None} == {
        "key": None,
        "segments": 4,
        "duration_ms": 455.5,
        "model_calls": 5,
        "calls_without_usage": 2,
        "calls_without_cost": 3,
        "input_tokens": 3500,
        "output_tokens": 350,
        "total_tokens": 3850,
        "cost": 0.006,
        "tool_calls": 1,
        "failed_calls": 1,
        "refused_calls": 0,
        "first_at": None,
        "last_at": None,
    }


def test_usage_sums_a_range_and_pages_with_a_cursor_that_keeps_its_grouping(stores: Opener) -> None:
    from datetime import UTC, datetime

    chat = stores()
    three_days(chat)
    since, until = datetime(2026, 10, 29, tzinfo=UTC), datetime(2026, 10, 30, tzinfo=UTC)

    ranged = chat.usage("conversation", since, until)
    first = chat.usage("day", limit=2)
    second = chat.usage("conversation", limit=2, cursor=first.cursor)  # the cursor's grouping wins
    by_owner = chat.usage("owner", limit=1)
    owner_pages = [by_owner]
    while owner_pages[-1].cursor:
        owner_pages.append(chat.usage("owner", limit=1, cursor=owner_pages[-1].cursor))

    assert [(g.key, g.segments) for g in ranged.groups] == [("a", 1), ("b", 1)]
    assert (ranged.total.segments, ranged.total.input_tokens) == (2, 2500)
    assert ([g.key for g in first.groups], first.cursor) == (["2026-10-30", "2026-10-29"], "d2026-10-29")
    assert (second.by, [g.key for g in second.groups], second.cursor) == ("day", ["2026-10-28"], None)
    assert second.total.segments == 4  # every page carries the range's total
    assert [[g.key for g in p.groups] for p in owner_pages] == [[7], [8], [9]]
    assert [p.cursor for p in owner_pages] == ["o7", "o8", None]
    assert [g.key for g in chat.usage(cursor="o-").groups] == [7, 8, 9]  # after the unknown owner's group
    with pytest.raises(BadUsageCursor):
        chat.usage(cursor="x1")
    with pytest.raises(ValueError):
        chat.usage(limit=0)


def test_an_empty_range_sums_nothing_as_unknown(stores: Opener) -> None:
    chat = stores()

    page = chat.usage("day")

    assert page.groups == () and page.cursor is None
    assert (page.total.segments, page.total.input_tokens, page.total.cost, page.total.first_at) == (0, None, None, None)


def test_an_edits_cut_segments_are_still_counted_and_an_erasure_keeps_the_counts(stores: Opener) -> None:
    chat = stores()
    three_days(chat)
    chat.record(line("message_edited", "a", "2026-10-31T09:00:00Z", message=1, text="Anders"))  # cuts a's segments
    before = chat.usage().to_json()

    chat.erase("a")

    assert before["total"]["segments"] == 4 and before["groups"][0]["input_tokens"] == 3000
    assert chat.usage().to_json() == before  # counts are facts, not texts


def test_a_rebuild_refills_the_usage_rows_and_read_models_without_them_ask_for_one(stores: Opener) -> None:
    chat = stores()
    three_days(chat)
    before = chat.usage("day").to_json()
    storage, generation = chat.read_models.storage, chat.read_models.live_pointer().generation

    chat.rebuild(chat.read_models.active_rules())
    assert chat.read_models.live_pointer().generation == generation + 1
    assert chat.usage("day").to_json() == before

    if storage.usage_tables:  # as an earlier version left a generation: no usage table
        generation += 1
        with storage.transaction(write=True) as curs:
            schema = f'"{storage.schema}".' if storage.p == "%s" else ""
            curs.execute(f"DROP TABLE {schema}views_g{generation}_usage")
        with pytest.raises(UsageNeedsRebuild) as refused:
            chat.usage()
        assert str(refused.value).endswith("run: chatrecord rebuild --rules 2026-11-02")
        chat.rebuild(chat.read_models.active_rules())
        assert chat.usage("day").to_json() == before
