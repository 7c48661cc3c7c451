"""A whole conversation read under two rule sets, turn by turn: the notes one sends that the
other does not, and the page line where it differs (the timeline page's rule-set diff). A page
of turns at a time: the log is folded once under each rule set up to the turn after the page
(no further), and only the turns asked for are read for their notes (each costs the notes'
budget, not the transcript).

Example:
    turns, more = rules_diff(events, "2026-11-02", "transcript-only", start=0, limit=20)
    turns[0].dropped  # the notes 2026-11-02 sends at the first turn and transcript-only does not
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import tee

from domain.events import ConversationEvent
from projections.page_line import PageCheck, every_page, page_line
from projections.rules import resolve
from projections.turn_changes import placed_notes, turn_states


@dataclass(frozen=True)
class TurnDiff:
    """One turn (`index` among the conversation's turns, from 0; the user `message` that
    started it and when): `added` the notes sent under the other rule set and not under the
    base, `dropped` those sent under the base and not under the other, in the order each rule
    set sends them; `page_line` the base's and the other's page line where they differ."""

    index: int
    message: int
    at: datetime
    added: tuple[str, ...]
    dropped: tuple[str, ...]
    page_line: tuple[str, str] | None

    @property
    def same(self) -> bool:
        """Whether the two rule sets send this turn the same notes and page line."""
        return not self.added and not self.dropped and self.page_line is None


def _missing(notes: Sequence[str], other: Sequence[str]) -> tuple[str, ...]:
    """Returns the notes of `notes` not in `other`, counted (a note sent twice and once there
    is missing once)."""
    left: dict[str, int] = {}
    for n in other:
        left[n] = left.get(n, 0) + 1
    missing = []
    for n in notes:
        if left.get(n, 0):
            left[n] -= 1
        else:
            missing.append(n)
    return tuple(missing)


def rules_diff(
    events: Iterable[ConversationEvent],
    base: str,
    other: str,
    *,
    start: int = 0,
    limit: int = 20,
    can_see_page: PageCheck = every_page,
) -> tuple[list[TurnDiff], bool]:
    """Returns the differences of turns `start`…`start + limit - 1` (by their index among the
    conversation's turns) between rule sets `base` and `other`, and whether a turn follows
    them. `events` is iterated once (each event folded under both rule sets)."""
    one, two = resolve(base), resolve(other)
    found: list[TurnDiff] = []
    read_one, read_two = tee(events, 2)  # the two folds advance together: the buffer holds a turn's events at most
    for first, second in zip(turn_states(read_one, one), turn_states(read_two, two), strict=True):
        if first.index >= start + limit:
            return found, True
        if first.index < start:
            continue
        here = [n.text for n in placed_notes(first.state, one, can_see_page)]
        there = [n.text for n in placed_notes(second.state, two, can_see_page)]
        lines = page_line(first.state.view, one, can_see_page), page_line(second.state.view, two, can_see_page)
        found.append(
            TurnDiff(
                first.index,
                first.message,
                first.at,
                _missing(there, here),
                _missing(here, there),
                lines if lines[0] != lines[1] else None,
            )
        )
    return found, False
