"""The chat's read of a turn: the page line and each note with its place, without the
transcript (which the chat holds already).

`turn_notes` selects the notes as `projections.turn.turn_input` does and places them by the
same rule (`placement.target`), but it only asks for the transcript messages it needs: the
message on each side of a note's position, and where a user message's block ends. So its cost
is bounded by the notes' budget, not by the history. `apply_notes` is the reference for the
chat: it puts the notes into the transcript, giving exactly `turn_input(...).messages`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from projections.card_outcomes import CardOutcome
from projections.notes import OLDER, Note, labelled, select_notes
from projections.page_line import PageCheck, every_page, page_line
from projections.placement import NOTE_SEPARATOR, TEXT_SEPARATOR
from projections.rules import RuleSet, resolve
from projections.run_record import Entry, RunRecord
from projections.transcript import Message
from projections.view_context import ViewContext

Into = Literal["assistant", "user", "new"]


@dataclass(frozen=True)
class PlacedNote:
    """One note and its place. `index` is a 0-based index into the transcript the chat holds
    (user and assistant messages; no system message). `into`: the note joins the assistant
    message at `index` (inserted at character offset `at` of its text, after the answer that
    ends there), joins the user message at `index` (before its text), or is `new`: part of an
    assistant message of its own inserted before the message at `index` (at the end when
    `index` is the transcript's length)."""

    text: str
    index: int
    into: Into
    at: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Returns `{"text", "index", "into", "at"}`."""
        return {"text": self.text, "index": self.index, "into": self.into, "at": self.at}


@dataclass(frozen=True)
class TurnNotes:
    """What the chat adds to its transcript for the next model call: the system message's
    `page_line` and the `notes` in the order they appear, under rule set `rules`, read at
    conversation `version`."""

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


def _target(length: int, p: int, role: Callable[[int], str | None]) -> tuple[int, int]:
    """`placement.target` over a transcript of `length` messages read one role at a time."""
    p = max(0, min(p, length))
    if p > 0 and role(p - 1) == "assistant":
        return (p - 1, 1)
    if p < length and role(p) == "assistant":
        return (p, 1)
    if 0 < p < length or length == 0:
        return (p, 0)
    return (length - 1, 1) if p == length else (0, 1)


def _offsets(message: Message, segments: Sequence[str | None]) -> list[int]:
    """Returns where each note goes in an assistant message (`placement.beside`'s rule): after
    its own segment's answer, else where it falls in time; as character offsets."""
    split = bool(message.ends) and message.ends[-1] == len(message.text)
    where = {segment: i for i, segment in enumerate(message.segments)} if split else {}
    done, out = 1, []
    for segment in segments:
        i = where.get(segment) if segment is not None else None
        if i is not None and i >= done:
            done = i + 1
        out.append(message.ends[done - 1] if split else len(message.text))
    return out


def place_notes(
    notes: Sequence[Note], older: bool, length: int,
    messages: Callable[[set[int]], dict[int, Message]], block_ends: Callable[[set[int]], dict[int, int | None]],
) -> tuple[PlacedNote, ...]:
    """Returns the notes placed as `placement.place` places them, in order of appearance.
    `messages(indexes)` reads those transcript messages (one read); `block_ends(numbers)` the
    index of the user message after each user message `n` (absent or None: the block runs to
    the end, or there is no such message)."""
    ends = block_ends({n.at for n in notes if n.anchor != "position"})
    positions = [n.at if n.anchor == "position" else ends.get(n.at) for n in notes]
    positions = [max(0, min(length if p is None else p, length)) for p in positions]
    read = messages({i for p in positions for i in (p - 1, p) if 0 <= i < length})

    def role(i: int) -> str | None:
        found = read.get(i)
        return found.role if found else None

    groups: dict[tuple[int, int], list[Note]] = {}
    for note, p in zip(notes, positions, strict=True):
        groups.setdefault(_target(length, p, role), []).append(note)
    placed: list[PlacedNote] = []
    for key in sorted(groups):
        ordered = sorted(groups[key], key=lambda n: n.order)
        bodies = [n.body for n in ordered]
        if older and not placed:
            bodies[0] = f"{OLDER} {bodies[0]}"
        texts = [labelled(body) for body in bodies]
        index, into = key
        if into == 0:
            placed.extend(PlacedNote(text, index, "new") for text in texts)
            continue
        target = read.get(index)
        assert target is not None
        if target.role == "user":
            placed.extend(PlacedNote(text, index, "user") for text in texts)
            continue
        offsets = _offsets(target, [n.segment for n in ordered])
        placed.extend(PlacedNote(text, index, "assistant", at) for text, at in zip(texts, offsets, strict=True))
    return tuple(placed)


def turn_notes(
    conversation: str, version: int, kind: str, view: ViewContext, record: RunRecord,
    newest_outcomes: tuple[CardOutcome, ...], outcome_count: int, length: int,
    messages: Callable[[set[int]], dict[int, Message]], block_ends: Callable[[set[int]], dict[int, int | None]],
    rules: RuleSet | str, can_see_page: PageCheck = every_page,
) -> TurnNotes:
    """Returns the turn's notes with their places. `record` holds the kept run record entries;
    `newest_outcomes` the newest card outcomes (at least `rules.max_notes + 1` of them, or all),
    oldest first; `outcome_count` how many exist."""
    rules = resolve(rules)
    placed: tuple[PlacedNote, ...] = ()
    if rules.notes and kind == "chat":
        selected, older = select_notes(record, newest_outcomes, rules, can_see_page, outcome_count)
        placed = place_notes(selected, older, length, messages, block_ends)
    return TurnNotes(conversation, rules.id, version, page_line(view, rules, can_see_page), placed)


def apply_notes(messages: Sequence[Message], notes: Sequence[PlacedNote]) -> tuple[Message, ...]:
    """Returns the transcript with the notes put in: notes in one place are joined by a line
    break; a new assistant message holds only its notes; a user message gets its notes, a blank
    line, then its text; an assistant message gets a blank line and its notes at offset `at`.
    This is what the chat does with `turn_notes`; it gives `turn_input(...).messages`."""
    new: dict[int, list[str]] = {}
    into_user: dict[int, list[str]] = {}
    into_assistant: dict[int, dict[int, list[str]]] = {}
    for note in notes:
        if note.into == "new":
            new.setdefault(note.index, []).append(note.text)
        elif note.into == "user":
            into_user.setdefault(note.index, []).append(note.text)
        else:
            into_assistant.setdefault(note.index, {}).setdefault(note.at or 0, []).append(note.text)
    out: list[Message] = []
    for index in range(len(messages) + 1):
        if index in new:
            out.append(Message(role="assistant", text=NOTE_SEPARATOR.join(new[index])))
        if index == len(messages):
            break
        m = messages[index]
        if index in into_user:
            out.append(m.model_copy(update={"text": NOTE_SEPARATOR.join(into_user[index]) + TEXT_SEPARATOR + m.text}))
        elif index in into_assistant:
            text, done = "", 0
            for at in sorted(into_assistant[index]):
                text += m.text[done:at] + TEXT_SEPARATOR + NOTE_SEPARATOR.join(into_assistant[index][at])
                done = at
            out.append(Message(role="assistant", text=text + m.text[done:]))
        else:
            out.append(m)
    return tuple(out)
