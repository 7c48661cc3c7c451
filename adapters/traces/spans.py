"""The spans of a conversation: its stored facts mapped to OpenTelemetry GenAI spans, as plain
values (no SDK, no I/O), so the mapping is unit-tested on its own.

Mapping (the GenAI semantic conventions as `opentelemetry-semantic-conventions` 0.66b2 names them;
its attribute constants are used):
  * one `invoke_agent` span per segment (`SegmentReturned`): `gen_ai.operation.name`
    `invoke_agent`, `gen_ai.conversation.id`, `chatrecord.segment`, `chatrecord.run`,
    `chatrecord.trigger`, `chatrecord.outcome`, the records written
    (`chatrecord.records_written`, `chatrecord.records_completeness`); it ends at the event's
    time and starts the sum of its steps' durations earlier;
  * a child `execute_tool` span per tool call, read by `projections.steps.read_segment` (the
    reading the activity list shows, RefusedCalls): `gen_ai.tool.name`,
    `chatrecord.tool.reading` (`ran`, `failed`, `held`, `not_permitted`, `declined`), its
    activity label; a failed call gets `error.type` `tool_error` and status ERROR; its start is
    where its step lies among the segment's steps, its duration the step's `duration_ms`;
  * span events on the segment's span: `chatrecord.card_decided` (approved, answer),
    `chatrecord.card_undecided` (waiting kind, reason), `chatrecord.question_answered`,
    `chatrecord.message_edited` and `chatrecord.turns_truncated` (on the newest segment before
    the edit); a segment an edit cut away keeps its span with `chatrecord.cut` True.

Trace id: the first 16 bytes of SHA-256 of the conversation's stored id; span id: the first 8
bytes of SHA-256 of the conversation id and the segment (and the call's position), so the same
facts give the same ids every time. Only stored facts go out: no tool argument or result (the
events hold none); message texts (`gen_ai.input.messages`, `gen_ai.output.messages`) only
with `with_texts`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_AGENT_NAME,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_TOOL_NAME,
    GenAiOperationNameValues,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationEvent,
    MessageEdited,
    QuestionAnswered,
    SegmentReturned,
    TurnsTruncated,
    UserMessagePosted,
)
from projections.rules import RuleSet, resolve
from projections.steps import DecisionKind, LastDecision, decision_after, decision_kind, read_segment

AttributeValue = str | bool | int | float | tuple[str, ...]

AGENT_NAME = "nr-llm"
"""`gen_ai.agent.name` of every `invoke_agent` span: the agent whose runs the chat records."""
INVOKE_AGENT = GenAiOperationNameValues.INVOKE_AGENT.value
EXECUTE_TOOL = GenAiOperationNameValues.EXECUTE_TOOL.value


@dataclass(frozen=True)
class SpanEvent:
    """A span event: `name`, time `time_ns` (ns since the epoch), `attributes`."""

    name: str
    time_ns: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """One span as plain values: `trace_id` (128 bit), `span_id` and `parent_id` (64 bit, None
    for a root), times in ns since the epoch, `error` True for status ERROR."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    events: tuple[SpanEvent, ...] = ()
    error: bool = False


def trace_id_of(conversation: str) -> int:
    """Returns the 128-bit trace id of `conversation` (its stored id): SHA-256, first 16 bytes."""
    return _hash(16, "chatrecord-trace", conversation)


def span_id_of(conversation: str, *parts: str | int) -> int:
    """Returns the 64-bit span id of `parts` (a segment id, a call's position) in `conversation`."""
    return _hash(8, "chatrecord-span", conversation, *parts)


def _hash(size: int, *parts: str | int) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    value = int.from_bytes(digest[:size], "big")
    return value or 1  # an all-zero id is invalid in OTLP


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000) * 1000


@dataclass
class _Building:
    span: Span
    tools: list[Span]
    events: list[SpanEvent]
    cut: bool = False


def conversation_spans(
    conversation: str, events: Iterable[ConversationEvent], rules: RuleSet | str, with_texts: bool = False
) -> list[Span]:
    """Returns the spans of `conversation` (its stored id) from its full event log `events`,
    read under `rules`: per segment its `invoke_agent` span, then its `execute_tool` children,
    in the order of the log. With `with_texts` the segment's span carries the user message it
    answers and the assistant's answer; never a tool argument or result."""
    rule_set = resolve(rules)
    trace_id = trace_id_of(conversation)
    follow: LastDecision | None = None
    texts: dict[int, str] = {}
    built: dict[str, _Building] = {}
    order: list[str] = []
    for event in events:
        if isinstance(event, UserMessagePosted):
            texts[event.message] = event.text
        elif isinstance(event, MessageEdited):
            texts[event.message] = event.text
            if order:
                built[order[-1]].events.append(
                    SpanEvent("chatrecord.message_edited", _ns(event.timestamp), {"chatrecord.message": event.message})
                )
        elif isinstance(event, SegmentReturned):
            follows = decision_kind(event.trigger, follow)
            b = _segment(conversation, trace_id, event, follows, rule_set, texts if with_texts else None)
            built[event.segment] = b
            order.append(event.segment)
        elif isinstance(event, CardDecided) and event.segment in built:
            built[event.segment].events.append(
                SpanEvent(
                    "chatrecord.card_decided",
                    _ns(event.timestamp),
                    {"chatrecord.card.approved": event.approved, "chatrecord.card.answer": event.answer},
                )
            )
        elif isinstance(event, QuestionAnswered) and event.segment in built:
            attributes: dict[str, AttributeValue] = {"chatrecord.message": event.message}
            if with_texts:
                attributes["chatrecord.answer.text"] = event.text
            built[event.segment].events.append(SpanEvent("chatrecord.question_answered", _ns(event.timestamp), attributes))
        elif isinstance(event, CardLeftUndecided) and event.segment in built:
            built[event.segment].events.append(
                SpanEvent(
                    "chatrecord.card_undecided",
                    _ns(event.timestamp),
                    {
                        "chatrecord.card.waiting": event.waiting_kind,
                        "chatrecord.card.reason": event.reason,
                        "chatrecord.card.decidable_elsewhere": event.decidable_elsewhere,
                    },
                )
            )
        elif isinstance(event, TurnsTruncated):
            for segment in event.cut_segments:
                if segment in built:
                    built[segment].cut = True
            if order:
                built[order[-1]].events.append(
                    SpanEvent(
                        "chatrecord.turns_truncated",
                        _ns(event.timestamp),
                        {
                            "chatrecord.after_message": event.after_message,
                            "chatrecord.cut_messages": tuple(str(m) for m in event.cut_messages),
                            "chatrecord.cut_segments": tuple(event.cut_segments),
                            "chatrecord.cut_cards": tuple(event.cut_cards),
                        },
                    )
                )
        follow = decision_after(follow, event)
    spans: list[Span] = []
    for segment in order:
        b = built[segment]
        attributes = dict(b.span.attributes)
        attributes["chatrecord.cut"] = b.cut
        spans.append(
            Span(
                b.span.name,
                b.span.trace_id,
                b.span.span_id,
                None,
                b.span.start_ns,
                b.span.end_ns,
                attributes,
                tuple(b.events),
                b.span.error,
            )
        )
        spans.extend(b.tools)
    return spans


def _segment(
    conversation: str,
    trace_id: int,
    event: SegmentReturned,
    follows: DecisionKind | None,
    rules: RuleSet,
    texts: dict[int, str] | None,
) -> _Building:
    reading = read_segment(event.steps, event.trigger, follows, rules, outcome=event.outcome)
    end_ns = _ns(event.timestamp)
    start_ns = end_ns - sum(int(step.duration_ms * 1_000_000) for step in event.steps)
    span_id = span_id_of(conversation, event.segment)
    tools: list[Span] = []
    at = start_ns
    calls = iter(reading.calls)
    for step in event.steps:
        step_ns = int(step.duration_ms * 1_000_000)
        if step.kind == "tool":
            call = next(calls)
            n = len(tools) + 1
            attributes: dict[str, AttributeValue] = {
                GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
                GEN_AI_TOOL_NAME: call.tool,
                GEN_AI_CONVERSATION_ID: conversation,
                "chatrecord.tool.reading": call.reading,
                "chatrecord.round": call.round,
            }
            if call.label is not None:
                attributes["chatrecord.tool.label"] = call.label
            if call.hint is not None:
                attributes["chatrecord.tool.hint"] = call.hint
            if call.reading == "failed":
                attributes[ERROR_TYPE] = "tool_error"
            if call.write is not None:
                attributes["chatrecord.record_written"] = call.write.record
                attributes["chatrecord.record_completeness"] = call.write.completeness
            tools.append(
                Span(
                    f"{EXECUTE_TOOL} {call.tool}",
                    trace_id,
                    span_id_of(conversation, event.segment, n),
                    span_id,
                    at,
                    at + step_ns,
                    attributes,
                    error=call.reading == "failed",
                )
            )
        at += step_ns
    attributes = {
        GEN_AI_OPERATION_NAME: INVOKE_AGENT,
        GEN_AI_AGENT_NAME: AGENT_NAME,
        GEN_AI_CONVERSATION_ID: conversation,
        "chatrecord.segment": event.segment,
        "chatrecord.run": event.run,
        "chatrecord.trigger": event.trigger,
        "chatrecord.outcome": event.outcome,
        "chatrecord.message": event.message,
        "chatrecord.nothing_saved": event.nothing_saved,
        "chatrecord.records_written": tuple(w.record for w in reading.writes),
        "chatrecord.records_completeness": tuple(w.completeness for w in reading.writes),
        "chatrecord.waiting_tools": tuple(w.tool_name for w in event.waiting),
    }
    if follows is not None:
        attributes["chatrecord.follows"] = follows
    if texts is not None:
        if event.message in texts:
            attributes[GEN_AI_INPUT_MESSAGES] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": texts[event.message]}]}], ensure_ascii=False
            )
        if event.answer is not None:
            attributes[GEN_AI_OUTPUT_MESSAGES] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": event.answer}]}], ensure_ascii=False
            )
    span = Span(
        f"{INVOKE_AGENT} {AGENT_NAME}",
        trace_id,
        span_id,
        None,
        start_ns,
        end_ns,
        attributes,
        error=event.outcome in ("failed", "error"),
    )
    return _Building(span, tools, [])
