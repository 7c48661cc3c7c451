"""The card rules the aggregate and the projections share, each once. See docs/spec-map.md, S10, D13,
D14."""

from __future__ import annotations

from domain.events import (
    ConversationEvent,
    SegmentReturned,
    TurnRetried,
    UserMessagePosted,
)
from domain.values import PLAIN_DENIAL


def records_outcome(guided: bool, answer: str) -> bool:
    """Returns True when a card's decision records card outcomes. The card must be guided and the
    answer not a plain denial ("abgelehnt"). The run record carries a denial instead."""
    return guided and answer != PLAIN_DENIAL


def continues_run(trigger: str, run: str, approved_run: str | None) -> bool:
    """Returns True when a segment of `trigger` and `run` continues approved run `approved_run`.
    `approved_run` None means no approval is pending."""
    return approved_run is not None and trigger == "approval" and run == approved_run


def starts_model_call(event: ConversationEvent) -> bool:
    """Returns True when `event` starts a new model call (a typed message or a retry). A pending
    approval without its continuation is then given up."""
    return isinstance(event, (UserMessagePosted, TurnRetried))


def is_guided(event: SegmentReturned) -> bool:
    """Returns True when a skill was in force as the segment returned. Only a guided card's decision
    can record card outcomes."""
    return event.skill is not None
