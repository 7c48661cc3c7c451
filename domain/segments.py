"""A recorded segment as the aggregate's invariants see it, and what it waits for.

Shared by the aggregate's state (`domain.state`) and its history index (`domain.history_index`),
which imports the state's fold; kept apart so that neither imports the other in a circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from domain.cards import continues_run
from domain.values import Immutable, StepFact

WaitingKind = Literal["card", "question"]
_WAITS_FOR: dict[str, WaitingKind] = {"awaiting_approval": "card", "awaiting_input": "question"}


def waits_for(outcome: str) -> WaitingKind | None:
    """Returns what a segment that ended with `outcome` waits for: a card, a question, or None."""
    return _WAITS_FOR.get(outcome)


class SegmentInfo(Immutable):
    """What the invariants need of a recorded segment: its `version`, `run`, the user `message` it
    answered, whether a skill was in force (`guided`), what it `waits` for and how many `calls`."""

    version: int
    """The version of the event that recorded the segment."""
    run: str
    """The run the segment belongs to."""
    message: int
    """The user message number it answered."""
    guided: bool
    """Whether a skill was in force when it returned (a guided process)."""
    waits: WaitingKind | None = None
    """What it waits for: a `card` or a `question`; None when nothing waits."""
    calls: int = 0
    """How many calls its card or question names."""


def continues_approval(approval: tuple[str, int, str] | None, trigger: str, run: str) -> bool:
    """Returns True when a segment of `trigger` and `run` is the continuation of the approved
    card `approval` (card segment, calls, run): its outcomes come with it. Any other segment or
    a new model call gives them up."""
    return continues_run(trigger, run, approval[2] if approval is not None else None)


def resumed_round(steps: Sequence[StepFact]) -> int | None:
    """Returns the round the pause a continuation resumes was at, read from its first step: nr-llm
    runs the waiting calls (`tool`, `tool_write`) at the round the run paused in, a model round
    after them at the next one; None when the steps cannot tell (none, or an unknown kind)."""
    if not steps or steps[0].kind == "unknown":
        return None
    return steps[0].round if steps[0].kind in ("tool", "tool_write") else steps[0].round - 1
