"""Over HTTP, on SQLite and PostgreSQL: the new user's line (ten model calls of cost 1e9, which
`POST /v1/lines` answered 200 while every later `GET …/turn` answered 500) and a segment whose
calls sum past the segment's cost are refused as `bad-line`, naming the field, and nothing of the
request is stored."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.http.conftest import Server, unique
from tests.http.test_http import problem


def _lines(conversation: str, cost: float, calls: int) -> bytes:
    step = {"kind": "llm", "round": 1, "durationMs": 1.0, "finishReason": "stop", "estimatedCost": cost}
    lines: list[dict[str, Any]] = [
        {"type": "conversation_started", "conversation": conversation, "at": "2026-11-02T10:00:00Z", "kind": "chat", "owner": 7},
        {
            "type": "user_message",
            "conversation": conversation,
            "at": "2026-11-02T10:01:00Z",
            "message": 1,
            "text": "x",
            "page": 1,
        },
        {
            "type": "segment_returned",
            "conversation": conversation,
            "at": "2026-11-02T10:01:30Z",
            "segment": "r1/1",
            "run": "r1",
            "trigger": "turn",
            "outcome": "completed",
            "answer": "a",
            "steps": [step] * calls,
        },
    ]
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


@pytest.mark.parametrize(
    ("cost", "calls", "field", "said"),
    [
        (1e9, 10, "steps[0].estimatedCost", "expected a number <= 1e+06, got the number 1000000000.0"),
        (
            250_000.0,
            5,
            "steps",
            'the llm steps\' estimatedCost sum to 1,250,000; the most a segment may state is 1,000,000 (README, "Input limits")',
        ),
    ],
)
def test_a_segment_past_the_cost_limits_is_a_bad_line_and_nothing_is_stored(
    server: Server, cost: float, calls: int, field: str, said: str
) -> None:
    conversation = unique("ocost")
    sent = server.client.post(
        "/v1/lines", content=_lines(conversation, cost, calls), headers={"content-type": "application/x-ndjson"}
    )

    bad = problem(sent, 422, "bad-line")
    turn = server.client.get(f"/v1/conversations/{conversation}/turn")

    assert (bad["field"], bad["detail"]) == (field, f"request: line 3, {field}: {said}")
    problem(turn, 404, "unknown-conversation")
