"""A conversation written back as the chat's JSON Lines (`export_lines`), optionally up to a user message.
Ingested into an empty store, they give the same turns, audit rows and notes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.service.conversations import iso
from adapters.store.crypto import ERASED
from domain.errors import ChatrecordError
from domain.events import (
    CardDecided,
    ConversationErased,
    ConversationEvent,
    ConversationStarted,
    LegacyRowImported,
    MessageEdited,
    QuestionAnswered,
    SegmentReturned,
    TourEnded,
    TranscriptReplaced,
    TurnRetried,
    UserMessagePosted,
)
from domain.values import StepFact, WaitingCall


def _step(step: StepFact) -> dict[str, Any]:
    """Returns a stored step as nr-llm's RunStep with the fields the privacy filter keeps, plus kept usage
    and offered tool names."""
    line: dict[str, Any] = {"kind": step.kind, "round": step.round, "durationMs": step.duration_ms}
    if step.tool_name is not None:
        line["toolName"] = step.tool_name
    if step.tool_is_error is not None:
        line["toolIsError"] = step.tool_is_error
    if step.tool_outcome is not None:
        line["toolOutcome"] = step.tool_outcome
    if step.write_target is not None:
        line["writeTargetTable"] = step.write_target.table
        line["writeTargetUid"] = step.write_target.uid
    if step.write_completeness is not None:
        line["writeCompleteness"] = step.write_completeness
    if step.hook_failed_after_write:
        line["hookFailedAfterWrite"] = True
    if step.offered_tools is not None:
        line["toolSpecs"] = list(step.offered_tools)
    call = step.call
    if call is not None:
        usage = {
            "promptTokens": call.prompt_tokens,
            "completionTokens": call.completion_tokens,
            "totalTokens": call.total_tokens,
            "estimatedCost": call.estimated_cost,
            "finishReason": call.finish_reason,
        }
        line.update((key, value) for key, value in usage.items() if value is not None)
        if call.requested:
            line["requestedToolCalls"] = [
                {"id": r.call_id} if r.tool is None else {"id": r.call_id, "name": r.tool} for r in call.requested
            ]
    return line


def _pending(call: WaitingCall) -> dict[str, Any]:
    line: dict[str, Any] = {"toolName": call.tool_name}
    if call.target is not None:
        line["table"], line["uid"] = call.target.table, call.target.uid
    if call.fields:
        line["fields"] = list(call.fields)
    return line


def _line(conversation: str, group: Sequence[ConversationEvent]) -> dict[str, Any] | None:
    """Returns the input line that stored the events `group`; None for events no line made (an erasure)."""
    for event in group:
        common: dict[str, Any] = {"conversation": conversation, "at": iso(event.timestamp)}
        match event:
            case ConversationStarted():
                return {"type": "conversation_started", **common, "kind": event.kind, "owner": event.owner}
            case UserMessagePosted():
                return {
                    "type": "user_message",
                    **common,
                    "message": event.message,
                    "text": event.text,
                    "page": event.page,
                    "skill": event.skill,
                }
            case SegmentReturned():
                line = {
                    "type": "segment_returned",
                    **common,
                    "segment": event.segment,
                    "run": event.run,
                    "trigger": event.trigger,
                    "outcome": event.outcome,
                    "answer": event.answer,
                }
                if event.nothing_saved:
                    line["flag"] = "nothingSaved"
                if event.model is not None:
                    line["model"] = event.model
                if event.provider is not None:
                    line["provider"] = event.provider
                line["steps"] = [_step(s) for s in event.steps]
                line["pending"] = [_pending(c) for c in event.waiting]
                return line
            case CardDecided():
                line = {
                    "type": "card_decided",
                    **common,
                    "segment": event.segment,
                    "approved": event.approved,
                    "answer": event.answer,
                }
                if event.message is not None:
                    line["message"], line["text"] = event.message, event.text
                return line
            case QuestionAnswered():
                return {
                    "type": "question_answered",
                    **common,
                    "segment": event.segment,
                    "message": event.message,
                    "text": event.text,
                }
            case TurnRetried():
                return {"type": "turn_retried", **common, "message": event.message}
            case MessageEdited():
                return {"type": "message_edited", **common, "message": event.message, "text": event.text}
            case TranscriptReplaced():
                return {
                    "type": "transcript_replaced",
                    **common,
                    "messages": [{"role": m.role, "text": m.text} for m in event.messages],
                }
            case LegacyRowImported():
                outcomes = []
                for o in event.card_outcomes:
                    outcome: dict[str, Any] = {"outcome": o.outcome, "after": o.after, "tool": o.tool}
                    if o.target is not None:
                        outcome["table"], outcome["uid"] = o.target.table, o.target.uid
                    if o.fields:
                        outcome["fields"] = list(o.fields)
                    outcomes.append(outcome)
                return {
                    "type": "legacy_row",
                    **common,
                    "messages": [{"role": m.role, "text": m.text} for m in event.messages],
                    "card_outcomes": outcomes,
                }
    for event in group:
        if isinstance(event, TourEnded):
            return {"type": "tour_ended", "conversation": conversation, "at": iso(event.timestamp)}
    return None


def _groups(events: Iterable[ConversationEvent]) -> Iterator[list[ConversationEvent]]:
    """Yields the events of each input line in order: consecutive events of one `source`."""
    group: list[ConversationEvent] = []
    for event in events:
        if group and (event.source is None or event.source != group[0].source):
            yield group
            group = []
        group.append(event)
    if group:
        yield group


@dataclass(frozen=True)
class Export:
    """A conversation as the chat's lines. `lines`: JSON objects in store order. `erased`: its texts read
    `[erased]`. `broken`: its hash chain does not verify."""

    conversation: str
    lines: tuple[dict[str, Any], ...]
    erased: bool
    broken: str | None = None
    """None; or, where the store keeps a hash chain that does not verify, where it breaks
    ("version N (changed): ..."): the lines hold the events as the store holds them now, a
    changed one among them, and a store they are ingested into chains them anew."""
    reproductions: tuple[dict[str, Any], ...] = ()
    """The reproduction records of its kept reproductions where asked for
    (`adapters.ingest.reproduction_line`), written after its lines."""

    def records(self) -> tuple[dict[str, Any], ...]:
        """Returns what an export writes, one JSON object a line: the lines, then the
        reproduction records."""
        return self.lines + self.reproductions


class NoSuchMessage(ChatrecordError):
    """Raised when `export --upto N` names no user message of the conversation."""


def _user_numbers(line: dict[str, Any]) -> Iterable[int]:
    """Returns the user message numbers a line adds or answers: its `message`, or 1 to its count for a
    whole-transcript line."""
    if "message" in line and line["message"] is not None:
        return (line["message"],)
    if line["type"] in ("transcript_replaced", "legacy_row"):
        return range(1, 1 + sum(1 for m in line.get("messages", ()) if m.get("role") == "user"))
    return ()


def export_lines(events: Sequence[ConversationEvent], upto: int | None = None) -> Export:
    """Returns the input lines (docs/input-format.md) that store `events`, one conversation's log, again.
    Lines follow the store's order and hold only what the store keeps; erased texts read `[erased]`.
    Events no line makes (an erasure) give no line. `upto`: stop before the first line that adds a higher
    user message. Ingested into an empty store, the lines give the same turns, audit rows, notes and
    digests. Raises NoSuchMessage when `upto` is no user message of the lines, naming those that are."""
    if not events or not isinstance(events[0], ConversationStarted):
        raise ValueError("export_lines needs a conversation's log from its first event")
    conversation = events[0].conversation
    lines: list[dict[str, Any]] = []
    erased = any(isinstance(e, ConversationErased) for e in events)
    numbers: set[int] = set()  # the user message numbers of the lines
    cut = False
    for group in _groups(events):
        line = _line(conversation, group)
        if line is None:
            continue
        numbers.update(_user_numbers(line))
        if upto is not None and line.get("message", 0) > upto:  # a user message, answer or card text after it
            if upto in numbers:
                break
            cut = True  # read on only to name the conversation's user messages
        if not cut:
            lines.append(line)
    if upto is not None and upto not in numbers:
        if not numbers:
            raise NoSuchMessage(f"--upto {upto}: no user message {upto}; the conversation has no user messages yet")
        shown = ", ".join(map(str, sorted(numbers)))
        raise NoSuchMessage(f"--upto {upto}: no user message {upto}; the conversation's user messages are {shown}")
    erased = erased or any(line.get("text") == ERASED for line in lines)
    return Export(conversation, tuple(lines), erased)
