"""The activity list read model: per segment, what the chat shows the editor (spec S45–S51).

Labels are German, from the amendment's table. It reads steps by `projections.steps.read_segment`,
as the run record does. A segment's entries: first the decision or answer it continues, then one
`tool` entry per call. A declined card's calls get no entry. A call nr-llm no longer permits gets a
hint to ask an administrator."""

from __future__ import annotations

from functools import singledispatch
from typing import Literal

from domain.events import (
    CardDecided,
    ConversationEvent,
    QuestionAnswered,
    SegmentReturned,
    TurnsTruncated,
)
from domain.values import Immutable
from projections.rules import RuleSet, resolve
from projections.steps import LastDecision, decision_after, decision_kind, read_segment

APPROVED_HEADING = "Von dir freigegeben"
DECLINED_HEADING = "Von dir abgelehnt"
ANSWERED_LABEL = "Von dir beantwortet"


class ActivityEntry(Immutable):
    """One line shown to the editor: `kind`, the tool (for a call), its reading, the label, an optional
    hint."""

    kind: Literal["decision", "answer", "tool"]
    """`decision`, `answer` or `tool` (a call)."""
    label: str
    """The German label the editor reads."""
    tool: str | None = None
    """The call's tool; None for a decision or an answer."""
    reading: str | None = None
    """How the call was read (`ran`, `failed`, `not_permitted`, `held`, `declined`); None for a
    decision or an answer."""
    answer: str | None = None
    """The editor's answer, for a decision."""
    hint: str | None = None
    """A hint shown with the label, if any."""


class SegmentActivity(Immutable):
    """The activity of one segment."""

    segment: str
    """The segment's id."""
    entries: tuple[ActivityEntry, ...] = ()
    """Its lines, in order."""


class Activity(Immutable):
    """The activity list of one conversation, by segment. `follow` is what the next continuation follows."""

    segments: tuple[SegmentActivity, ...] = ()
    """The activity of each segment, in order."""
    follow: LastDecision | None = None
    """The decision or answer the next continuation follows."""


def initial() -> Activity:
    """Returns the activity list of a conversation before its first event."""
    return Activity()


def apply(state: Activity, event: ConversationEvent, rules: RuleSet | str) -> Activity:
    """Returns the activity list after `event`, read under `rules`."""
    return _apply(event, state, resolve(rules))


def decision_entry(follow: LastDecision) -> ActivityEntry:
    """Returns the entry of a decision on a card or an answer to a question."""
    if follow.kind == "answered":
        return ActivityEntry(kind="answer", label=ANSWERED_LABEL)
    heading = APPROVED_HEADING if follow.kind == "approved" else DECLINED_HEADING
    return ActivityEntry(kind="decision", label=f"{heading}: {follow.answer}", answer=follow.answer)


def _decided(state: Activity, event: ConversationEvent) -> Activity:
    """Returns the state with the decision entry on the card's or question's own segment."""
    follow = decision_after(state.follow, event)
    assert follow is not None
    segments = tuple(
        s.model_copy(update={"entries": (*s.entries, decision_entry(follow))}) if s.segment == follow.segment else s
        for s in state.segments
    )
    return state.model_copy(update={"segments": segments, "follow": follow})


@singledispatch
def _apply(event: ConversationEvent, state: Activity, rules: RuleSet) -> Activity:
    return state


@_apply.register
def _(event: SegmentReturned, state: Activity, rules: RuleSet) -> Activity:
    follows = decision_kind(event.trigger, state.follow)
    reading = read_segment(event.steps, event.trigger, follows, rules, outcome=event.outcome)
    entries = []
    for call in reading.calls:
        if call.label is None:
            continue  # a declined card's call: no entry
        entries.append(ActivityEntry(kind="tool", label=call.label, tool=call.tool, reading=call.reading, hint=call.hint))
    segment = SegmentActivity(segment=event.segment, entries=tuple(entries))
    return state.model_copy(update={"segments": (*state.segments, segment), "follow": decision_after(state.follow, event)})


@_apply.register(CardDecided)
@_apply.register(QuestionAnswered)
def _(event: ConversationEvent, state: Activity, rules: RuleSet) -> Activity:
    return _decided(state, event)


@_apply.register
def _(event: TurnsTruncated, state: Activity, rules: RuleSet) -> Activity:
    cut = set(event.cut_segments)
    follow = decision_after(state.follow, event)
    kept = tuple(s for s in state.segments if s.segment not in cut)
    return state.model_copy(update={"segments": kept, "follow": follow})
