"""A valid-looking line must not poison a conversation (the usage sums' overflow), on every
backend: a segment whose summed cost, tokens or time would not fit a usage row is refused at the
edge, naming the line and the field, and nothing of it is stored; events stored before that
limit (here: with the segment limits lifted) fold with the sum that does not fit as unknown, so
every read, replay, rebuild, erasure and row check works; the usage audit's sums over rows that
each fit but together pass 64 bits are exact."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from adapters.ingest import step_models
from domain.errors import InvalidInput
from domain.limits import STORED_INT_MAX
from projections.usage import COST_UNIT
from tests.application import test_conversations
from tests.application.test_conversations import Opener, line

stores = test_conversations.stores
"""The fixture: a new, empty store of each backend (memory, SQLite, PostgreSQL) per call."""


def _lines(conversation: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        line("conversation_started", conversation, "2026-11-02T10:00:00Z", kind="chat", owner=7),
        line("user_message", conversation, "2026-11-02T10:01:00Z", message=1, text="x", page=1),
        line(
            "segment_returned",
            conversation,
            "2026-11-02T10:01:30Z",
            segment="r1/1",
            run="r1",
            trigger="turn",
            outcome="completed",
            answer="a",
            steps=steps,
        ),
    ]


def _llm(**usage: Any) -> dict[str, Any]:
    return {"kind": "llm", "round": 1, "durationMs": 1.0, "finishReason": "stop", **usage}


def _ingest(chat: Any, lines: list[dict[str, Any]], name: str = "o.jsonl") -> Any:
    report = chat.ingest([orjson.dumps(d) for d in lines], name)
    assert report.stopped is None
    return report


def _record(chat: Any, lines: list[dict[str, Any]], name: str = "o.jsonl") -> Any:
    """Records the lines all or nothing (an ingest would store the lines before a refused one)."""
    return chat.record_lines([orjson.dumps(d) for d in lines], name)


@pytest.mark.parametrize(
    ("steps", "said"),
    [
        (
            [_llm(estimatedCost=200_000.0)] * 6,
            "the llm steps' estimatedCost sum to 1,200,000; the most a segment may state is 1,000,000",
        ),
        (
            [_llm(promptTokens=2**31 - 1)] * 466,
            "the llm steps' promptTokens sum to 1,000,727,379,502; the most a segment may state is 1,000,000,000,000",
        ),
        (
            [_llm(totalTokens=2**31 - 1)] * 466,
            "the llm steps' totalTokens sum to 1,000,727,379,502; the most a segment may state is 1,000,000,000,000",
        ),
        (
            [_llm(durationMs=6e9), {"kind": "tool", "round": 1, "durationMs": 4e9 + 1}],
            "the steps' durationMs sum to 10,000,000,001; the most a segment may state is 10,000,000,000",
        ),
    ],
)
def test_a_segment_whose_sums_do_not_fit_is_refused_naming_line_and_field_and_nothing_is_stored(
    stores: Opener, steps: list[dict[str, Any]], said: str
) -> None:
    chat = stores()

    with pytest.raises(InvalidInput) as refused:
        _record(chat, _lines("o", steps))

    assert str(refused.value) == f'o.jsonl: line 3, steps: {said} (README, "Input limits")'
    assert chat.conversations().conversations == ()
    assert chat.usage().total.segments == 0


def test_a_step_costing_more_than_the_segment_may_is_refused_at_its_own_field(stores: Opener) -> None:
    chat = stores()

    with pytest.raises(InvalidInput) as refused:
        _record(chat, _lines("o", [_llm(estimatedCost=1e9)] * 10))  # the new user's ocost10.jsonl

    assert (
        str(refused.value) == "o.jsonl: line 3, steps[0].estimatedCost: expected a number <= 1e+06, got the number 1000000000.0"
    )
    assert chat.conversations().conversations == ()


def test_a_segment_at_every_bound_is_stored_and_summed_exactly(stores: Opener) -> None:
    chat = stores()
    # 500 calls summing to each bound exactly: cost 1e6, 1e12 tokens in, 1e10 ms
    steps = [_llm(estimatedCost=2_000.0, promptTokens=2_000_000_000, durationMs=2e7)] * 500

    _ingest(chat, _lines("o", steps))
    total = chat.usage().to_json()["total"]

    assert (total["cost"], total["input_tokens"], total["duration_ms"]) == (1e6, 10**12, 1e10)
    assert (total["calls_without_cost"], total["calls_without_usage"]) == (0, 0)


def _lifted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lifts the segment limits, as the edge was before them (a store written then)."""
    monkeypatch.setattr(step_models, "SEGMENT_COST_MAX", float("inf"))
    monkeypatch.setattr(step_models, "SEGMENT_TOKENS_MAX", 2**80)
    monkeypatch.setattr(step_models, "SEGMENT_DURATION_MS_MAX", float("inf"))


def test_a_stored_segment_whose_cost_does_not_fit_reads_as_unknown_everywhere(
    stores: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = stores()
    _lifted(monkeypatch)
    # 10,000 calls of 1e6: 1e19 billionths, past 9.22e18, as ten calls of 1e9 were before the limits
    _ingest(chat, _lines("big", [_llm(estimatedCost=1e6, promptTokens=5)] * 10_000))
    _ingest(chat, _lines("small", [_llm(estimatedCost=0.5, promptTokens=7)]))

    usage = {g.key: g.to_json() for g in chat.usage().groups}
    listed = sorted(c.conversation for c in chat.conversations().conversations)
    replayed = chat.replay("big")
    turn = chat.turn_input("big")
    audited = [r for r in chat.audit("big").to_json() if r["kind"] == "segment"]
    rows = {v.conversation: v.ok for v in chat.verify_rows()}
    report = chat.rebuild("2026-11-02")
    erased = chat.erase("big")

    assert (usage["big"]["cost"], usage["big"]["calls_without_cost"], usage["big"]["input_tokens"]) == (None, 10_000, 50_000)
    assert (usage["small"]["cost"], usage["small"]["calls_without_cost"]) == (0.5, 0)
    assert listed == ["big", "small"]
    assert [t.message for t in replayed.turns] == [1]
    assert turn.message == 1
    assert [(r["usage"]["cost"], r["usage"]["input_tokens"]) for r in audited] == [(None, 50_000)]
    assert rows == {"big": True, "small": True}
    assert (report.conversations, report.unreadable) == (2, ())
    assert erased.conversation == "big"
    assert chat.usage().to_json()["total"]["cost"] == 0.5


def test_the_audit_sums_rows_that_together_pass_64_bits_exactly(stores: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = stores()
    _lifted(monkeypatch)
    per_row = 4_000 * 1_000_000 * COST_UNIT  # 4e18 billionths: each row fits, three do not
    assert per_row <= STORED_INT_MAX < 3 * per_row
    for name in ("a", "b", "c"):
        _ingest(chat, _lines(name, [_llm(estimatedCost=1e6, promptTokens=2**31 - 1)] * 4_000))

    total = chat.usage().to_json()["total"]
    by_owner = chat.usage("owner").groups

    assert (total["cost"], total["calls_without_cost"]) == (12e9, 0)
    assert total["input_tokens"] == 3 * 4_000 * (2**31 - 1)
    assert [(g.key, g.cost) for g in by_owner] == [(7, 12e9)]
