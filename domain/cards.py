"""The card rules the aggregate and the projections share: each rule once (docs/spec-map.md, S10, D13, D14).

- "A guided card's decision records a card outcome, except a plain denial" (`records_outcome`);
  a declined one records it at once, an approved one with its continuation.
- "An approval's outcome comes with its own run's continuation" (`continues_run`).
- "A new model call gives up a pending approval" (`starts_model_call`); so does any segment
  that is not the approval's continuation.
"""

from __future__ import annotations

from domain.events import (
    ConversationEvent,
    SegmentReturned,
    TurnRetried,
    UserMessagePosted,
)
from domain.values import PLAIN_DENIAL


def records_outcome(guided: bool, answer: str) -> bool:
    """Returns True when a card's decision records card outcomes: the card belongs to a guided
    process (a skill was in force) and the answer is not a plain denial ("abgelehnt"), which the
    run record carries instead."""
    return guided and answer != PLAIN_DENIAL


def continues_run(trigger: str, run: str, approved_run: str | None) -> bool:
    """Returns True when a segment of `trigger` and `run` is the continuation of an approved
    card of run `approved_run` (None: no approval pending): its outcomes come with it."""
    return approved_run is not None and trigger == "approval" and run == approved_run


def starts_model_call(event: ConversationEvent) -> bool:
    """Returns True when `event` starts a new model call (a typed message or a retry): a
    pending approval whose continuation has not come is given up."""
    return isinstance(event, (UserMessagePosted, TurnRetried))


def is_guided(event: SegmentReturned) -> bool:
    """Returns True when a segment's card belongs to a guided process: a skill was in force
    when it returned. Only such a card's decision can record card outcomes."""
    return event.skill is not None
