"""The spans of a conversation: its stored facts as OpenTelemetry GenAI spans, as plain values.

Names follow `opentelemetry-semantic-conventions` 0.66b2; docs/traces.md shows the shape. * One
trace per user turn. Its root `turn {message}` runs to the end of the last span it caused.
    With `with_texts` it carries the input and output texts.
* Under it, an `invoke_agent` span per segment, with `chat unknown` and `execute_tool` children. * A
span per card decision, answer and undecided card, from the asking segment's end. * Edits and cuts
are span events of the root; a cut segment has `chatrecord.cut` True.

Ids are hashes of stored ids and positions, so the same facts give the same ids. No tool argument or
result goes out; message texts only `with_texts`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GEN_AI_CONVERSATION_ID,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
)
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

from adapters.traces.segment import (
    FAILED_OUTCOMES,
    AttributeValue,
    Ids,
    Requested,
    Span,
    SpanEvent,
    finish_reason,
    messages,
    ns,
    segment_spans,
    span_id_of,
    trace_id_of,
)
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
from projections.steps import LastDecision, decision_after, decision_kind

__all__ = ["DEFAULT_PROVIDER", "Span", "SpanEvent", "conversation_spans", "span_id_of", "trace_id_of"]

OPENINFERENCE_KIND = "openinference.span.kind"
"""Named on the spans the GenAI conventions have no operation for (turns, decisions) as CHAIN,
so a receiver that reads OpenInference (Phoenix) does not guess them a model call."""
DEFAULT_PROVIDER = "unknown"
"""`gen_ai.provider.name` where no provider is set (CHATRECORD_GENAI_PROVIDER, docs/traces.md)."""


@dataclass
class _Turn:
    position: int
    ids: Ids
    message: int | None
    start_ns: int
    input_text: str | None
    spans: list[Span] = field(default_factory=list)
    events: list[SpanEvent] = field(default_factory=list)
    last: SegmentReturned | None = None
    segments: int = 0


def conversation_spans(
    conversation: str,
    events: Iterable[ConversationEvent],
    rules: RuleSet | str,
    with_texts: bool = False,
    provider: str = DEFAULT_PROVIDER,
) -> list[Span]:
    """Returns the spans of `conversation` from its full log `events`, read under `rules`, in log
    order. Per turn: its root, its segments' spans (parents first), its decisions' spans. `provider`
    is every model span's `gen_ai.provider.name`. With `with_texts` they carry the messages and
    answers; never a tool argument or result."""
    rule_set = resolve(rules)
    follow: LastDecision | None = None
    texts: dict[int, str] = {}
    decided: str | None = None  # the text of the newest decision or answer: a continuation's input
    turns: list[_Turn] = []
    turn_of: dict[str, _Turn] = {}
    agents: dict[str, int] = {}  # segment -> index of its invoke_agent span in its turn
    requested: Requested = {}  # the calls asked for and not yet run, for gen_ai.tool.call.id
    ended: dict[str, int] = {}  # segment -> its end in ns

    def new_turn(message: int | None, start_ns: int) -> _Turn:
        n = len(turns) + 1
        ids = Ids(conversation, trace_id_of(conversation, n), span_id_of(conversation, "turn", n), provider)
        turn = _Turn(n, ids, message, start_ns, texts.get(message) if message is not None else None)
        turns.append(turn)
        return turn

    for event in events:
        if isinstance(event, UserMessagePosted):
            texts[event.message] = event.text
            new_turn(event.message, ns(event.timestamp))
        elif isinstance(event, MessageEdited):
            texts[event.message] = event.text
            turn = new_turn(event.message, ns(event.timestamp))
            turn.events.append(SpanEvent("chatrecord.message_edited", turn.start_ns, {"chatrecord.message": event.message}))
        elif isinstance(event, SegmentReturned):
            follows = decision_kind(event.trigger, follow)
            if not turns or (event.trigger == "turn" and turns[-1].segments):
                start = ns(event.timestamp) - sum(int(s.duration_ms * 1_000_000) for s in event.steps)
                new_turn(None, start)
            turn = turns[-1]
            input_text = turn.input_text if event.trigger in ("turn", "retry") else decided
            spans = segment_spans(turn.ids, event, follows, rule_set, input_text, with_texts, requested)
            agents[event.segment] = len(turn.spans)
            turn.spans.extend(spans)
            turn.last, turn.segments = event, turn.segments + 1
            turn_of[event.segment], ended[event.segment] = turn, spans[0].end_ns
        elif isinstance(event, CardDecided) and event.segment in turn_of:
            decided = event.text or event.answer
            kind = "approved" if event.approved else "declined"
            attributes: dict[str, AttributeValue] = {
                "chatrecord.decision": kind,
                "chatrecord.card.approved": event.approved,
                "chatrecord.card.answer": event.answer,
            }
            _decision(turn_of[event.segment], f"card {kind} ({event.answer})", event, ended[event.segment], attributes)
        elif isinstance(event, QuestionAnswered) and event.segment in turn_of:
            decided = event.text
            attributes = {"chatrecord.decision": "answered", "chatrecord.message": event.message}
            if with_texts:
                attributes["chatrecord.answer.text"] = event.text
            _decision(turn_of[event.segment], "question answered", event, ended[event.segment], attributes)
        elif isinstance(event, CardLeftUndecided) and event.segment in turn_of:
            attributes = {
                "chatrecord.decision": "undecided",
                "chatrecord.card.waiting": event.waiting_kind,
                "chatrecord.card.reason": event.reason,
                "chatrecord.card.decidable_elsewhere": event.decidable_elsewhere,
            }
            name = f"{event.waiting_kind} left undecided ({event.reason})"
            _decision(turn_of[event.segment], name, event, ended[event.segment], attributes)
        elif isinstance(event, TurnsTruncated):
            for segment in event.cut_segments:
                if segment in turn_of:
                    turn = turn_of[segment]
                    agent = turn.spans[agents[segment]]
                    turn.spans[agents[segment]] = _with(agent, {"chatrecord.cut": True})
            if turns:
                turns[-1].events.append(
                    SpanEvent(
                        "chatrecord.turns_truncated",
                        ns(event.timestamp),
                        {
                            "chatrecord.after_message": event.after_message,
                            "chatrecord.cut_messages": tuple(str(m) for m in event.cut_messages),
                            "chatrecord.cut_segments": tuple(event.cut_segments),
                            "chatrecord.cut_cards": tuple(event.cut_cards),
                        },
                    )
                )
        follow = decision_after(follow, event)
    out: list[Span] = []
    for turn in turns:
        out.append(_root(turn, with_texts))
        out.extend(s if s.attributes.get("gen_ai.operation.name") != "invoke_agent" else _cut(s) for s in turn.spans)
    return out


def _with(span: Span, attributes: dict[str, AttributeValue]) -> Span:
    return Span(
        span.name,
        span.trace_id,
        span.span_id,
        span.parent_id,
        span.start_ns,
        span.end_ns,
        {**span.attributes, **attributes},
        span.events,
        span.error,
        span.kind,
    )


def _cut(span: Span) -> Span:
    return span if "chatrecord.cut" in span.attributes else _with(span, {"chatrecord.cut": False})


def _decision(
    turn: _Turn,
    name: str,
    event: CardDecided | QuestionAnswered | CardLeftUndecided,
    asked_ns: int,
    attributes: dict[str, AttributeValue],
) -> None:
    """Adds the span of a decision on `event.segment`, from `asked_ns` to the decision's time."""
    at = ns(event.timestamp)
    kind = str(attributes["chatrecord.decision"])
    turn.spans.append(
        Span(
            name,
            turn.ids.trace_id,
            turn.ids.span_id(event.segment, "decision", kind),
            turn.ids.parent_id,
            min(asked_ns, at),
            at,
            {
                GEN_AI_CONVERSATION_ID: turn.ids.conversation,
                OPENINFERENCE_KIND: "CHAIN",
                "chatrecord.segment": event.segment,
                **attributes,
            },
        )
    )


def _root(turn: _Turn, with_texts: bool) -> Span:
    """Returns the root span of `turn`: from its message to the end of the last span or event in it."""
    last = turn.last
    end_ns = max([turn.start_ns, *(s.end_ns for s in turn.spans), *(e.time_ns for e in turn.events)])
    start_ns = min([turn.start_ns, *(s.start_ns for s in turn.spans)])
    outcome = last.outcome if last is not None else "no_answer"
    attributes: dict[str, AttributeValue] = {
        GEN_AI_CONVERSATION_ID: turn.ids.conversation,
        GEN_AI_PROVIDER_NAME: turn.ids.provider,
        OPENINFERENCE_KIND: "CHAIN",
        "chatrecord.turn": turn.position,
        "chatrecord.outcome": outcome,
        "chatrecord.segments": turn.segments,
    }
    if turn.message is not None:
        attributes["chatrecord.message"] = turn.message
    failed = outcome in FAILED_OUTCOMES
    if failed:
        attributes[ERROR_TYPE] = outcome
    if with_texts:
        if turn.input_text is not None:
            attributes["input.value"] = turn.input_text
            attributes[GEN_AI_INPUT_MESSAGES] = messages("user", turn.input_text)
        if last is not None and last.answer is not None:
            attributes["output.value"] = last.answer
            attributes[GEN_AI_OUTPUT_MESSAGES] = messages("assistant", last.answer, finish_reason(last.outcome))
    name = f"turn {turn.message}" if turn.message is not None else "turn"
    return Span(
        f"{name} ({outcome})",
        turn.ids.trace_id,
        turn.ids.parent_id,
        None,
        start_ns,
        end_ns,
        attributes,
        tuple(turn.events),
        failed,
    )
