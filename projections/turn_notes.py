"""The chat's read of a turn: the page line and each note with its place, without the transcript.
`turn_notes` selects notes as `turn_input` does and places them by the same rule. It asks only for
the messages beside each note and for block ends; its cost is the budget's. `apply_notes` puts the
notes in and gives exactly `turn_input(...).messages`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from projections.card_outcomes import CardOutcome
from projections.notes import NoteOf, note_of, select_notes
from projections.page_line import PageCheck, every_page, page_line
from projections.placement import PlacedNote, apply_notes, place_notes
from projections.rules import RuleSet, resolve
from projections.run_record import RunRecord
from projections.transcript import Message
from projections.view_context import ViewContext

Into = Literal["assistant", "user", "new"]


@dataclass(frozen=True)
class TurnNotes:
    """What the chat adds for the next model call: `page_line` and `notes` in order of appearance. They
    are read under rule set `rules` at conversation `version`."""

    conversation: str
    rules: str
    version: int
    page_line: str
    notes: tuple[PlacedNote, ...]

    def to_json(self) -> dict[str, Any]:
        """Returns `{"conversation", "rules", "version", "page_line", "notes": [...]}`."""
        return {
            "conversation": self.conversation,
            "rules": self.rules,
            "version": self.version,
            "page_line": self.page_line,
            "notes": [n.to_json() for n in self.notes],
        }


def turn_notes(
    conversation: str,
    version: int,
    kind: str,
    view: ViewContext,
    record: RunRecord,
    newest_outcomes: Sequence[CardOutcome],
    outcome_count: int,
    length: int,
    messages: Callable[[set[int]], dict[int, Message]],
    block_ends: Callable[[set[int]], dict[int, int | None]],
    rules: RuleSet | str,
    can_see_page: PageCheck = every_page,
    note: NoteOf = note_of,
) -> TurnNotes:
    """Returns the turn's notes with their places. `record`: the kept run record entries.
    `newest_outcomes`: at least `rules.max_notes + 1` newest card outcomes, or all, oldest first.
    `outcome_count`: how many exist. `note` renders an item's note (`note_of`, or a caching one)."""
    rules = resolve(rules)
    placed: tuple[PlacedNote, ...] = ()
    if rules.notes and kind == "chat":
        selected, older = select_notes(record, newest_outcomes, rules, can_see_page, outcome_count, note)
        placed = place_notes(selected, older, length, messages, block_ends)
    return TurnNotes(conversation, rules.id, version, page_line(view, rules, can_see_page), placed)


__all__ = ["PlacedNote", "TurnNotes", "apply_notes", "turn_notes"]
