"""Two turns of one conversation compared under one rule set: what changed from the first to
the second (messages appended, notes added, moved and dropped, the page line, the run record's
entries, the card outcomes), in the form of `replay --changes` (`projections.turn_changes`).

Example:
    compared = compare_turns(events, "2026-11-02", 1, 3)
    compared.changes["notes"]["added"]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.errors import ChatrecordError
from domain.events import ConversationEvent
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn_changes import Seen, Turn, changes_json, seen, turn_states


@dataclass(frozen=True)
class Compared:
    """Turn `first` (the user message that started it) and turn `second`, each with its time
    and page line, and `changes`: the second turn as what changed since the first
    (`projections.turn_changes.changes_json`; `kept` counts the first's messages the second
    still holds, `appended` the ones after them)."""

    first: int
    second: int
    first_at: datetime
    second_at: datetime
    first_line: str
    second_line: str
    changes: dict[str, Any]


class TurnMissing(ChatrecordError):
    """Raised when a turn to compare does not exist; the message names the turns that do."""


def compare_turns(
    events: Iterable[ConversationEvent], rules: str, first: int, second: int, can_see_page: PageCheck = every_page
) -> Compared:
    """Returns the turn of user message `second` compared with the turn of `first` (each its
    latest turn when retried), under `rules`. One fold of the log. Raises TurnMissing."""
    rule_set = resolve(rules)
    found: dict[int, tuple[Turn, Seen]] = {}
    numbers: list[int] = []
    for turn in turn_states(events, rule_set):
        numbers.append(turn.message)
        if turn.message in (first, second):
            found[turn.message] = (turn, seen(turn.state, rule_set, can_see_page))
    for wanted in (first, second):
        if wanted not in found:
            shown = ", ".join(map(str, sorted(set(numbers)))) or "none"
            raise TurnMissing(f"no turn starts at user message {wanted}; turns start at messages {shown}")
    (one, before), (two, now) = found[first], found[second]
    return Compared(first, second, one.at, two.at, before.system, now.system, changes_json(two, before, now))
