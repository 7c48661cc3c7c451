"""What a segment used: its model calls' tokens and estimated cost, its tool calls as read
(failed, refused), its time. Sums of the facts its steps stated: a count no step stated is
unknown (None), never zero, and `calls_without_usage` says how many model calls stated none.

Costs are summed in whole billionths of nr-llm's currency unit (`COST_UNIT`), so the sums of
many segments are exact: the demo's ten calls of 0.0041 make 0.041, not 0.041000000000000005.

Example:
    usage = segment_usage(event, read_segment(event.steps, event.trigger, follows, rules, outcome=event.outcome))
    usage.input_tokens, usage.cost
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.events import SegmentReturned
from domain.limits import STORED_INT_MAX
from domain.values import Immutable, ModelCall
from projections.steps import SegmentReading

COST_UNIT = 1_000_000_000
"""Costs are summed as whole numbers of 1/COST_UNIT of nr-llm's currency unit."""
REFUSED_READINGS = frozenset({"held", "declined", "not_permitted"})
"""The readings of a call that did not run because it was refused or held back."""


class SegmentUsage(Immutable):
    """One segment's usage: `duration_ms` the sum of its steps' durations; `model` and
    `provider` as its line named them (None: unknown); `model_calls` its `llm` steps, of which
    `calls_without_usage` stated no token count; the tokens and `cost` summed over the calls
    that stated them (None where none did); `tool_calls` its tool steps, `failed_calls` those
    read failed, `refused_calls` those held, declined or no longer permitted."""

    duration_ms: float = 0.0
    model: str | None = None
    provider: str | None = None
    model_calls: int = 0
    calls_without_usage: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost: float | None = None
    tool_calls: int = 0
    failed_calls: int = 0
    refused_calls: int = 0


def cost_units(cost: float | None) -> int | None:
    """Returns `cost` in whole 1/COST_UNIT (None stays None)."""
    return None if cost is None else round(cost * COST_UNIT)


def cost_of(units: int | None) -> float | None:
    """Returns whole 1/COST_UNIT as a cost (None stays None)."""
    return None if units is None else units / COST_UNIT


def _sum(values: list[int | None]) -> int | None:
    """Returns the sum of the stated values (None where none is), None too where it is more than a
    read model's column keeps (`STORED_INT_MAX`): a line stored before the segment limits (README,
    "Input limits") reads as unknown rather than failing every write and read of its rows."""
    stated = [v for v in values if v is not None]
    total = sum(stated) if stated else None
    return None if total is None or total > STORED_INT_MAX else total


def _dropped(values: list[int | None]) -> bool:
    """Whether some of `values` are stated but their sum is not kept (`_sum`)."""
    return any(v is not None for v in values) and _sum(values) is None


def _counted(event: SegmentReturned) -> tuple[list[ModelCall | None], list[ModelCall], float]:
    """Returns the model calls of `event`'s `llm` steps (None: a step that stated none), those that
    stated one, and the sum of its steps' durations (ms): what both `segment_usage` and `usage_row`
    count, taken in one pass over the steps."""
    calls: list[ModelCall | None] = []
    duration: float = 0  # as `sum` starts
    for step in event.steps:
        duration += step.duration_ms
        if step.kind == "llm":
            calls.append(step.call)
    return calls, [c for c in calls if c is not None], duration


def _without_usage(calls: list[ModelCall | None], stated: list[ModelCall]) -> int:
    """Returns how many of `calls` count as stating no usage: every call where a token sum of them is
    not kept (`_sum`: unknown, never a part), else those that stated no token count."""
    if any(_dropped([getattr(c, n) for c in stated]) for n in ("prompt_tokens", "completion_tokens")):
        return len(calls)
    return sum(1 for c in calls if c is None or (c.prompt_tokens is None and c.completion_tokens is None))


def segment_usage(event: SegmentReturned, reading: SegmentReading) -> SegmentUsage:
    """Returns the usage of the segment `event`, its calls read as `reading` says."""
    calls, stated, duration = _counted(event)
    return SegmentUsage(
        duration_ms=duration,
        model=event.model,
        provider=event.provider,
        model_calls=len(calls),
        calls_without_usage=_without_usage(calls, stated),
        input_tokens=_sum([c.prompt_tokens for c in stated]),
        output_tokens=_sum([c.completion_tokens for c in stated]),
        total_tokens=_sum([c.total_tokens for c in stated]),
        cost=cost_of(_sum([cost_units(c.estimated_cost) for c in stated])),
        tool_calls=len(reading.calls),
        failed_calls=sum(1 for c in reading.calls if c.reading == "failed"),
        refused_calls=sum(1 for c in reading.calls if c.reading in REFUSED_READINGS),
    )


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One segment's usage as the usage audit keeps it, flat (a row of the read models, written
    by the row fold with the segment's entry): its version `seq`, the chat's time `at`
    (microseconds since 1970, UTC), the conversation's stored id and `owner` (None: unknown),
    the time in whole microseconds (`duration_us`), the cost in whole 1/COST_UNIT (`cost`),
    `calls_without_cost` the model calls that stated no cost, the rest as `SegmentUsage`."""

    seq: int
    at: int
    conversation: str
    owner: int | None
    duration_us: int
    model_calls: int
    calls_without_usage: int
    calls_without_cost: int
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    cost: int | None
    tool_calls: int
    failed_calls: int
    refused_calls: int


def usage_row(event: SegmentReturned, reading: SegmentReading, at: int, conversation: str, owner: int | None) -> UsageRow:
    """Returns the flat usage row of the segment `event`, its calls read as `reading` says, at
    `at` (the event's time in microseconds) in conversation `conversation` of `owner`."""
    calls, stated, duration = _counted(event)  # one pass, no `SegmentUsage` made and dropped
    costs = [cost_units(c.estimated_cost) for c in stated]
    return UsageRow(
        seq=event.originator_version,
        at=at,
        conversation=conversation,
        owner=owner,
        duration_us=round(duration * 1000),
        model_calls=len(calls),
        calls_without_usage=_without_usage(calls, stated),
        calls_without_cost=len(calls) if _dropped(costs) else sum(1 for c in calls if c is None or c.estimated_cost is None),
        input_tokens=_sum([c.prompt_tokens for c in stated]),
        output_tokens=_sum([c.completion_tokens for c in stated]),
        total_tokens=_sum([c.total_tokens for c in stated]),
        cost=_sum(costs),
        tool_calls=len(reading.calls),
        failed_calls=sum(1 for c in reading.calls if c.reading == "failed"),
        refused_calls=sum(1 for c in reading.calls if c.reading in REFUSED_READINGS),
    )


def tool_times(event: SegmentReturned) -> tuple[tuple[str, float], ...]:
    """Returns each tool call of the segment `event` in order, as its tool's name and the
    duration its step stated in ms (a refused call of a waiting turn states 0.0)."""
    return tuple((step.tool_name or "", step.duration_ms) for step in event.steps if step.kind == "tool")


def usage_line(usage: dict[str, Any]) -> str:
    """Returns a segment's usage (`SegmentUsage.model_dump()`, as an audit row holds it) in one
    line, as `audit` and the timeline page show it: time, model calls with the model, tokens in
    and out, estimated cost; what no step stated reads `unknown`."""
    calls = f"{usage['model_calls']} model call{'' if usage['model_calls'] == 1 else 's'}"
    if usage["model"]:
        calls += f" ({usage['model']})"
    if usage["input_tokens"] is None and usage["output_tokens"] is None:
        tokens = "tokens unknown"
    else:
        tokens = f"{_count(usage['input_tokens'])} in / {_count(usage['output_tokens'])} out tokens"
    if usage["calls_without_usage"] and usage["model_calls"]:
        tokens += f" ({usage['calls_without_usage']} without usage)"
    cost = "cost unknown" if usage["cost"] is None else f"cost {usage['cost']:.6g}"
    return f"usage: {usage['duration_ms']:,.0f} ms, {calls}, {tokens}, {cost}"


def _count(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"
