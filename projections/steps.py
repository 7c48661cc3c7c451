"""The step reading (RefusedCalls, spec S52–S60), shared by the activity list and the run record.

It reads structure only, never a result text: * position: a continuation opens with the waiting
turn's calls, before its first model round; * duration: nr-llm records a waiting call's refusal with
exactly 0.0 ms; * whether the tool asks the editor (`RuleSet.question_tools`).

Readings of a tool step (the amendment's table, spec S45–S51): `declined`      row 1: a declined
card's calls (and that turn's load_skill): no entry `not_permitted` row 2: an approved call no
longer offered; row 4: the answered question's tool `held`          rows 3, 5, 6: not run, "noch
nicht ausgeführt" `failed`        row 7: a refusal timed like a call that ran, and every call that
ran in error `ran`           a call without error Without the amendment (`refused_calls` False)
every error is `failed`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from domain.events import (
    CardDecided,
    ConversationEvent,
    QuestionAnswered,
    SegmentReturned,
    TurnsTruncated,
)
from domain.values import Completeness, Immutable, StepFact
from projections.rules import RuleSet

DecisionKind = Literal["approved", "declined", "answered"]
Reading = Literal["ran", "failed", "not_permitted", "held", "declined"]

PAUSED = frozenset({"awaiting_approval", "awaiting_input"})
"""Outcomes of a segment that paused for a card (a proposal) or a question."""

MODEL_ROUND_KINDS = frozenset({"context", "request", "llm", "assembled", "dropped"})
"""Step kinds of a model round: the first of them ends a continuation's opening."""

LABELS: dict[str, str] = {
    "ran": "ausgeführt",
    "failed": "fehlgeschlagen",
    "not_permitted": "nicht ausgeführt: nicht mehr freigegeben",
    "held": "noch nicht ausgeführt",
}
"""German activity labels of the readings (the amendment's column "Shown to the editor")."""

NOT_PERMITTED_HINT = "Bitte eine Administratorin oder einen Administrator, das Werkzeug wieder freizugeben."
"""Shown with `not_permitted`: ask an administrator to allow the tool again."""


class LastDecision(Immutable):
    """What a continuation follows: a decision on card `segment` (with `answer`) or an answer to its
    question."""

    kind: DecisionKind
    """`approved`, `declined` or `answered`."""
    segment: str
    """The segment of the card or question."""
    answer: str | None = None
    """The editor's answer, if any."""


def decision_after(follow: LastDecision | None, event: ConversationEvent) -> LastDecision | None:
    """Returns what the next continuation follows once `event` happened. A decision or answer sets it;
    a segment uses it up; a cut of its segment drops it. The run record, activity list and audit
    share this fold."""
    if isinstance(event, CardDecided):
        return LastDecision(kind="approved" if event.approved else "declined", segment=event.segment, answer=event.answer)
    if isinstance(event, QuestionAnswered):
        return LastDecision(kind="answered", segment=event.segment)
    if isinstance(event, SegmentReturned):
        return None
    if isinstance(event, TurnsTruncated) and follow is not None and follow.segment in event.cut_segments:
        return None
    return follow


@dataclass(frozen=True, slots=True)
class WriteReading:
    """A `tool_write` step: record `table:uid`, completeness, hook flag. The readings are
    plain frozen dataclasses, not models: made from validated steps, read once, never stored."""

    tool: str
    record: str
    completeness: Completeness
    hook_failed: bool = False


@dataclass(frozen=True, slots=True)
class CallReading:
    """A tool step as read. `opening`: a waiting call at a continuation's start. `write`: the write
    step after it."""

    tool: str
    round: int
    opening: bool
    reading: Reading
    write: WriteReading | None = None

    @property
    def label(self) -> str | None:
        """Returns the German activity label; None for a declined card's call (no entry)."""
        return LABELS.get(self.reading)

    @property
    def hint(self) -> str | None:
        """Returns the hint shown with `not_permitted`, else None."""
        return NOT_PERMITTED_HINT if self.reading == "not_permitted" else None


@dataclass(frozen=True, slots=True)
class SegmentReading:
    """One segment read: its tool calls in order and every record written."""

    calls: tuple[CallReading, ...] = ()
    writes: tuple[WriteReading, ...] = ()


def decision_kind(trigger: str, follow: LastDecision | None) -> DecisionKind | None:
    """Returns what a segment of `trigger` follows: the decision, the answer, or None. None for a turn,
    a retry, or when `follow` does not fit the trigger."""
    if follow is None:
        return None
    if trigger == "approval" and follow.kind in ("approved", "declined"):
        return follow.kind
    if trigger == "answer" and follow.kind == "answered":
        return "answered"
    return None


def read_segment(
    steps: Sequence[StepFact], trigger: str, follows: DecisionKind | None, rules: RuleSet, *, outcome: str
) -> SegmentReading:
    """Returns the reading of one segment's `steps` (see the module docstring). `trigger` is the
    segment's trigger; `follows` what it continues (None for a turn or retry). `outcome` is nr-llm's
    AgentRunOutcome; only a paused segment holds calls back. Reads kind, position, duration, tool
    name and error flag only."""
    paused = outcome in PAUSED
    opening = trigger in ("approval", "answer")
    calls: list[CallReading] = []
    writes: list[WriteReading] = []
    for step in steps:  # a rebuild reads every segment: each step's kind is looked at once
        kind = step.kind
        if kind == "tool":
            calls.append(
                CallReading(
                    step.tool_name or "",
                    step.round,
                    opening,
                    "ran" if not step.tool_is_error else read_call(step, opening, follows, rules, paused),
                )
            )
        elif kind == "tool_write":
            target = step.write_target
            if target is None:
                continue
            tool = step.tool_name or ""
            write = WriteReading(tool, str(target), step.write_completeness or "unconfirmed", step.hook_failed_after_write)
            writes.append(write)
            if calls:
                last = calls[-1]
                if last.write is None and last.tool == tool:
                    calls[-1] = CallReading(last.tool, last.round, last.opening, last.reading, write)
        elif kind in MODEL_ROUND_KINDS:
            opening = False
    return SegmentReading(calls=tuple(calls), writes=tuple(writes))


def read_call(step: StepFact, opening: bool, follows: DecisionKind | None, rules: RuleSet, paused: bool) -> Reading:
    """Returns the reading of one tool step; `paused` tells a segment that ended waiting."""
    if not step.tool_is_error:
        return "ran"
    if not rules.refused_calls or step.duration_ms != 0.0:
        return "failed"  # row 7: timed like a call that ran; or the rule set before the amendment
    if not opening:
        return "held" if paused else "failed"  # row 6: beside a proposal or a question; else row 7
    asks = (step.tool_name or "") in rules.question_tools
    if follows == "declined":
        return "declined"  # row 1
    if follows == "approved":
        return "held" if asks else "not_permitted"  # rows 3 and 2
    if follows == "answered":
        return "not_permitted" if asks else "held"  # rows 4 and 5
    return "failed"  # a continuation whose decision is unknown: read as before the amendment
