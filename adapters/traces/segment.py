"""One segment's spans as plain values: `invoke_agent`, with `chat` and `execute_tool` children. The
segment's span ends at its event's time and lasts the sum of its steps' durations. Each step's span
starts at its place among the steps and lasts its `duration_ms`. Attributes are counts, names and
readings; never a tool argument or result."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GenAiOperationNameValues,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

from domain.events import SegmentReturned
from domain.values import ModelCall
from projections.rules import RuleSet
from projections.steps import DecisionKind, read_segment

AttributeValue = str | bool | int | float | tuple[str, ...]

AGENT_NAME = "nr-llm"
"""`gen_ai.agent.name` of every `invoke_agent` span: the agent whose runs the chat records."""
INVOKE_AGENT = GenAiOperationNameValues.INVOKE_AGENT.value
EXECUTE_TOOL = GenAiOperationNameValues.EXECUTE_TOOL.value
CHAT = GenAiOperationNameValues.CHAT.value
UNKNOWN_MODEL = "unknown"
"""The model name in a `chat` span's name where the segment's line named none (docs/traces.md)."""
COST = "chatrecord.cost"
"""A `chat` span's estimated cost (nr-llm's `estimatedCost`), also given as OpenInference's `llm.cost.total`."""
Requested = dict[tuple[int, str], list[str]]
"""The requested calls not yet paired with a tool step: (round, tool) -> their call ids, in order."""
TOOL_TYPE = "function"
"""`gen_ai.tool.type` of nr-llm's tools: functions the model calls by name."""
DECLINED_LABEL = "abgelehnt"
"""`chatrecord.tool.label` of a declined card's call (the activity list shows no entry for it)."""
REFUSED = frozenset({"held", "declined", "not_permitted"})
"""Readings of a call that did not run: marked by a name suffix and `chatrecord.tool.refused`."""
FAILED_OUTCOMES = frozenset({"failed", "error"})
"""Segment outcomes with status ERROR and `error.type` the outcome."""
FINISH_REASONS = {"completed": "stop", "awaiting_approval": "tool_call", "awaiting_input": "tool_call", "failed": "error"}
"""The output message's `finish_reason` of a segment, read from its outcome in the conventions'
values; any other outcome is given as it is (a `chat` span carries the provider's own reason)."""


@dataclass(frozen=True)
class SpanEvent:
    """A span event: `name`, time `time_ns` (ns since the epoch), `attributes`."""

    name: str
    time_ns: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """One span as plain values. `trace_id` is 128 bit; `span_id` and `parent_id` 64 bit (None for a
    root). Times are ns since the epoch. `error` True is status ERROR. `kind` is `internal` or
    `client`."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    events: tuple[SpanEvent, ...] = ()
    error: bool = False
    kind: str = "internal"


def trace_id_of(conversation: str, turn: int) -> int:
    """Returns the 128-bit trace id of turn `turn` (from 1) of `conversation`: SHA-256, first 16 bytes."""
    return _hash(16, "chatrecord-trace", conversation, turn)


def span_id_of(conversation: str, *parts: str | int) -> int:
    """Returns the 64-bit span id of `parts` (a segment id, a call's position) in `conversation`."""
    return _hash(8, "chatrecord-span", conversation, *parts)


def _hash(size: int, *parts: str | int) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    value = int.from_bytes(digest[:size], "big")
    return value or 1  # an all-zero id is invalid in OTLP


@dataclass(frozen=True)
class Ids:
    """What a segment's spans take from their turn: conversation, trace, root span and provider."""

    conversation: str
    trace_id: int
    parent_id: int
    provider: str

    def span_id(self, *parts: str | int) -> int:
        return span_id_of(self.conversation, *parts)


def ns(at: datetime) -> int:
    """Returns `at` in ns since the epoch (whole microseconds, as the events keep them)."""
    return int(at.timestamp() * 1_000_000) * 1000


def finish_reason(outcome: str) -> str:
    return FINISH_REASONS.get(outcome, outcome)


def usage_attributes(call: ModelCall) -> dict[str, AttributeValue]:
    """Returns a `chat` span's usage attributes, only of what the llm step stated. They are the GenAI
    tokens and finish reasons, and OpenInference's `llm.token_count.*` and `llm.cost.total`."""
    attributes: dict[str, AttributeValue] = {}
    if call.prompt_tokens is not None:
        attributes[GEN_AI_USAGE_INPUT_TOKENS] = call.prompt_tokens
        attributes["llm.token_count.prompt"] = call.prompt_tokens
    if call.completion_tokens is not None:
        attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = call.completion_tokens
        attributes["llm.token_count.completion"] = call.completion_tokens
    if call.total_tokens is not None:
        attributes["llm.token_count.total"] = call.total_tokens
    if call.estimated_cost is not None:
        attributes[COST] = call.estimated_cost
        attributes["llm.cost.total"] = call.estimated_cost
    if call.finish_reason is not None:
        attributes[GEN_AI_RESPONSE_FINISH_REASONS] = (call.finish_reason,)
    if call.requested:
        attributes["chatrecord.requested_tools"] = tuple(r.tool or "" for r in call.requested)
    return attributes


def messages(role: str, text: str, finish: str | None = None) -> str:
    """Returns one GenAI message (`gen_ai.input.messages`/`output.messages` JSON)."""
    message: dict[str, object] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if finish is not None:
        message["finish_reason"] = finish
    return json.dumps([message], ensure_ascii=False)


def segment_spans(
    ids: Ids,
    event: SegmentReturned,
    follows: DecisionKind | None,
    rules: RuleSet,
    input_text: str | None,
    with_texts: bool,
    requested: Requested | None = None,
) -> list[Span]:
    """Returns the segment's `invoke_agent` span, then its children in step order. `input_text` is the
    message the segment read, sent only `with_texts`. `requested` holds calls asked for and not run
    yet. A tool step takes the first of its round and tool as its `gen_ai.tool.call.id`."""
    requested = {} if requested is None else requested
    provider = event.provider or ids.provider
    span_id = ids.span_id(event.segment)
    reading = read_segment(event.steps, event.trigger, follows, rules, outcome=event.outcome)
    end_ns = ns(event.timestamp)
    start_ns = end_ns - sum(int(step.duration_ms * 1_000_000) for step in event.steps)
    base: dict[str, AttributeValue] = {GEN_AI_CONVERSATION_ID: ids.conversation, "chatrecord.segment": event.segment}
    children: list[Span] = []
    at = start_ns
    calls = iter(reading.calls)
    for step in event.steps:
        step_ns = int(step.duration_ms * 1_000_000)
        if step.kind == "llm":
            n = sum(1 for c in children if c.kind == "client") + 1
            attributes = {
                **base,
                GEN_AI_OPERATION_NAME: CHAT,
                GEN_AI_PROVIDER_NAME: provider,
                "chatrecord.round": step.round,
            }
            if event.model is not None:
                attributes[GEN_AI_REQUEST_MODEL] = event.model
                attributes["llm.model_name"] = event.model
            if step.call is not None:
                attributes.update(usage_attributes(step.call))
                for call_asked in step.call.requested:
                    requested.setdefault((step.round, call_asked.tool or ""), []).append(call_asked.call_id)
            children.append(
                Span(
                    f"{CHAT} {event.model or UNKNOWN_MODEL}",
                    ids.trace_id,
                    ids.span_id(event.segment, "llm", n),
                    span_id,
                    at,
                    at + step_ns,
                    attributes,
                    kind="client",
                )
            )
        elif step.kind == "tool":
            call = next(calls)
            n = sum(1 for c in children if c.kind == "internal") + 1
            attributes = {
                **base,
                GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
                GEN_AI_TOOL_NAME: call.tool,
                GEN_AI_TOOL_TYPE: TOOL_TYPE,
                "chatrecord.tool.reading": call.reading,
                "chatrecord.tool.refused": call.reading in REFUSED,
                "chatrecord.round": call.round,
            }
            label = DECLINED_LABEL if call.reading == "declined" else call.label
            if label is not None:
                attributes["chatrecord.tool.label"] = label
            if call.hint is not None:
                attributes["chatrecord.tool.hint"] = call.hint
            waiting_ids = requested.get((call.round, call.tool))
            if waiting_ids:
                attributes[GEN_AI_TOOL_CALL_ID] = waiting_ids.pop(0)
            if call.reading == "failed":
                attributes[ERROR_TYPE] = "tool_error"
            if call.write is not None:
                attributes["chatrecord.record_written"] = call.write.record
                attributes["chatrecord.record_completeness"] = call.write.completeness
            name = f"{EXECUTE_TOOL} {call.tool}"
            if call.reading != "ran":
                name += f" ({call.reading.replace('_', ' ')})"
            children.append(
                Span(
                    name,
                    ids.trace_id,
                    ids.span_id(event.segment, n),
                    span_id,
                    at,
                    at + step_ns,
                    attributes,
                    error=call.reading == "failed",
                )
            )
        at += step_ns
    attributes = {
        **base,
        GEN_AI_OPERATION_NAME: INVOKE_AGENT,
        GEN_AI_AGENT_NAME: AGENT_NAME,
        GEN_AI_PROVIDER_NAME: provider,
        "chatrecord.run": event.run,
        "chatrecord.trigger": event.trigger,
        "chatrecord.outcome": event.outcome,
        "chatrecord.message": event.message,
        "chatrecord.nothing_saved": event.nothing_saved,
        "chatrecord.records_written": tuple(w.record for w in reading.writes),
        "chatrecord.records_completeness": tuple(w.completeness for w in reading.writes),
        "chatrecord.waiting_tools": tuple(w.tool_name for w in event.waiting),
        "chatrecord.model_calls": sum(1 for c in children if c.kind == "client"),
        "chatrecord.tool_calls": sum(1 for c in children if c.kind == "internal"),
    }
    failed = event.outcome in FAILED_OUTCOMES
    if failed:
        attributes[ERROR_TYPE] = event.outcome
    if follows is not None:
        attributes["chatrecord.follows"] = follows
    if with_texts:
        if input_text is not None:
            attributes[GEN_AI_INPUT_MESSAGES] = messages("user", input_text)
            attributes["input.value"] = input_text
        if event.answer is not None:
            attributes[GEN_AI_OUTPUT_MESSAGES] = messages("assistant", event.answer, finish_reason(event.outcome))
            attributes["output.value"] = event.answer
    agent = Span(
        f"{INVOKE_AGENT} {AGENT_NAME} ({event.trigger} → {event.outcome})",
        ids.trace_id,
        span_id,
        ids.parent_id,
        start_ns,
        end_ns,
        attributes,
        error=failed,
    )
    return [agent, *children]
