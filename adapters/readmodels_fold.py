"""One read-model row per conversation, and the fold that advances it by one event.

A row holds the conversation's `TurnState` after its last applied event, the state as its
latest turn saw it (the turn a `turn_input` builds), the edit a following truncation may
complete, and the version and notification id of the last event applied. `advance` refuses an
event whose version does not follow the row's, so no event is applied twice or skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from domain.events import ConversationEvent, ConversationStarted, MessageEdited
from projections import turn
from projections.rules import RuleSet
from projections.turn import TurnState


class ReadModelOutOfStep(IntegrityError):
    """Raised when an event's version does not follow the version its row was built to:
    applying it would apply an event twice or skip one. Nothing of its batch is written."""


class PositionMoved(IntegrityError):
    """Raised when a batch was read after one position but the view's tracking position is
    another (a concurrent catch-up applied those events): the batch is not written."""


@dataclass(frozen=True)
class Turn:
    """The latest turn: user message number, time, and the state as the turn saw it (after
    the event that started it, version `version`)."""

    message: int
    at: datetime
    version: int
    state: TurnState


@dataclass(frozen=True)
class Row:
    """A conversation's read models after event `version` (notification id `position`)."""

    aggregate_id: UUID
    conversation: str
    version: int
    position: int
    state: TurnState
    turn: Turn | None = None
    edited: int | None = None


def advance(row: Row | None, event: ConversationEvent, position: int, rules: RuleSet) -> Row:
    """Returns the row after `event` (notification id `position`) folded under `rules`.

    Raises ReadModelOutOfStep when the event is not the one after the row's last event.
    """
    version = row.version if row else 0
    if event.originator_version != version + 1:
        raise ReadModelOutOfStep(
            f"event version {event.originator_version} of {event.originator_id} at position {position} "
            f"does not follow the read model's version {version}"
        )
    state = turn.apply(row.state if row else turn.initial(), event, rules)
    number = turn.starts_turn(event, row.edited if row else None)
    latest = row.turn if row else None
    if number is not None:
        latest = Turn(number, event.timestamp, event.originator_version, state)
    if row is None:
        name = event.conversation if isinstance(event, ConversationStarted) else str(event.originator_id)
    else:
        name = row.conversation
    return Row(
        aggregate_id=event.originator_id,
        conversation=name,
        version=event.originator_version,
        position=position,
        state=state,
        turn=latest,
        edited=event.message if isinstance(event, MessageEdited) else None,
    )


def fold(
    rows: Mapping[UUID, Row], events: Iterable[tuple[int, ConversationEvent]], rules: RuleSet
) -> dict[UUID, Row]:
    """Returns the rows changed by `events` (notification id, event), in log order, starting
    from `rows`. Raises ReadModelOutOfStep as `advance`."""
    changed: dict[UUID, Row] = {}
    for position, event in events:
        key = event.originator_id
        changed[key] = advance(changed.get(key) or rows.get(key), event, position, rules)
    return changed


def dump_state(state: TurnState) -> str:
    """Returns the JSON text a row stores for a state (as `model_dump(mode="json")` gives it)."""
    return state.model_dump_json()


def load_state(value: Any) -> TurnState:
    """Returns the state of stored JSON (text, bytes, or already parsed by the driver)."""
    if isinstance(value, (str, bytes, bytearray)):
        return TurnState.model_validate_json(value)
    return TurnState.model_validate(value)
