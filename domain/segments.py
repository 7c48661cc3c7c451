"""A recorded segment as the invariants see it, and what it waits for. Shared by `domain.state` and
`domain.history_index`; apart to avoid an import circle."""

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
    """What the invariants need of a recorded segment. Its `version`, `run`, the user `message` it
    answered, whether it was `guided`, what it `waits` for and how many `calls`."""

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
    """Returns True when a segment of `trigger` and `run` continues approved card `approval`. Its
    outcomes come with it. Any other segment or a new model call gives them up."""
    return continues_run(trigger, run, approval[2] if approval is not None else None)


def resumed_round(steps: Sequence[StepFact]) -> int | None:
    """Returns the round of the pause a continuation resumes, from its first step. Waiting calls
    (`tool`, `tool_write`) run at the paused round, a model round at the next. Returns None when the
    steps cannot tell."""
    if not steps or steps[0].kind == "unknown":
        return None
    return steps[0].round if steps[0].kind in ("tool", "tool_write") else steps[0].round - 1
