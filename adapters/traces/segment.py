"""One segment's spans: its `invoke_agent` span with a `chat` child per model round and an
`execute_tool` child per tool call, as plain values (no SDK, no I/O).

Times: the segment's span ends at its event's time and starts the sum of its steps' durations
earlier; each step's span starts where the step lies among the segment's steps and lasts its
`duration_ms`. Attributes are counts, names and readings of stored facts, never a tool argument
or result (the events hold none).
"""

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
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    GenAiOperationNameValues,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

from domain.events import SegmentReturned
from projections.rules import RuleSet
from projections.steps import DecisionKind, read_segment

AttributeValue = str | bool | int | float | tuple[str, ...]

AGENT_NAME = "nr-llm"
"""`gen_ai.agent.name` of every `invoke_agent` span: the agent whose runs the chat records."""
INVOKE_AGENT = GenAiOperationNameValues.INVOKE_AGENT.value
EXECUTE_TOOL = GenAiOperationNameValues.EXECUTE_TOOL.value
CHAT = GenAiOperationNameValues.CHAT.value
UNKNOWN_MODEL = "unknown"
"""The model name in a `chat` span's name while the store keeps none (docs/traces.md)."""
TOOL_TYPE = "function"
"""`gen_ai.tool.type` of nr-llm's tools: functions the model calls by name."""
DECLINED_LABEL = "abgelehnt"
"""`chatrecord.tool.label` of a declined card's call (the activity list shows no entry for it)."""
REFUSED = frozenset({"held", "declined", "not_permitted"})
"""Readings of a call that did not run: marked by a name suffix and `chatrecord.tool.refused`."""
FAILED_OUTCOMES = frozenset({"failed", "error"})
"""Segment outcomes with status ERROR and `error.type` the outcome."""
FINISH_REASONS = {"completed": "stop", "awaiting_approval": "tool_call", "awaiting_input": "tool_call", "failed": "error"}
"""The output message's `finish_reason` of a segment, read from its outcome (the store keeps no
model finish reason yet); any other outcome is given as it is."""


@dataclass(frozen=True)
class SpanEvent:
    """A span event: `name`, time `time_ns` (ns since the epoch), `attributes`."""

    name: str
    time_ns: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """One span as plain values: `trace_id` (128 bit), `span_id` and `parent_id` (64 bit, None
    for a root), times in ns since the epoch, `error` True for status ERROR, `kind` the span
    kind (`internal`, or `client` for a model call)."""

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
    """Returns the 128-bit trace id of turn `turn` (its position among the conversation's turns,
    from 1) of `conversation` (its stored id): SHA-256, first 16 bytes."""
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
    """What a segment's spans take from their turn: the conversation, the turn's trace and root
    span, the provider (`gen_ai.provider.name`)."""

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
) -> list[Span]:
    """Returns the segment's `invoke_agent` span, then its `chat` and `execute_tool` children
    in step order. `input_text` is the user message (or answer) the segment read, sent only
    `with_texts`."""
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
                GEN_AI_PROVIDER_NAME: ids.provider,
                "chatrecord.round": step.round,
            }
            children.append(
                Span(
                    f"{CHAT} {UNKNOWN_MODEL}",
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
        GEN_AI_PROVIDER_NAME: ids.provider,
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
