"""Where a turn's notes go in the transcript (docs/spec-map.md, S25–S27).

A note's place is a transcript position p, the number of messages before it. An entry's p is the end
of its user message's block; a card outcome's is its `after`. At p a note goes into the assistant
message before p, else the one at p. Otherwise it gets its own assistant message between the user
messages at p-1 and p. At the transcript's end or start it goes into that user message. Notes follow
an assistant's text and precede a user's text. The transcript is not changed.

`place_notes` places notes, reading only the messages it needs. `apply_notes` puts placed notes into
a transcript; `place` does both."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from projections.notes import OLDER, Note, labelled
from projections.transcript import Message

NOTE_SEPARATOR = "\n"
TEXT_SEPARATOR = "\n\n"

Into = Literal["assistant", "user", "new"]


@dataclass(frozen=True)
class PlacedNote:
    """One note and its place. `index` is a 0-based index into the chat's transcript (no system
    message). `into`: the note joins the assistant message at `index` at offset `at`, or the user
    message at `index` before its text, or is `new`: its own assistant message before `index`. `at`
    counts code points (PHP's `mb_substr`); `at_byte` counts UTF-8 bytes (PHP's `substr`)."""

    text: str
    index: int
    into: Into
    at: int | None = None
    at_byte: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Returns `{"text", "index", "into", "at", "at_byte"}`."""
        return {"text": self.text, "index": self.index, "into": self.into, "at": self.at, "at_byte": self.at_byte}


_new = object.__new__


def _placed(text: str, index: int, into: Into, at: int | None = None, at_byte: int | None = None) -> PlacedNote:
    """Returns `PlacedNote(text, index, into, at, at_byte)`, its fields set at once (a frozen
    dataclass's `__init__` sets them one by one through `object.__setattr__`): a turn read
    places each of its notes."""
    placed: PlacedNote = _new(PlacedNote)
    placed.__dict__.update(text=text, index=index, into=into, at=at, at_byte=at_byte)
    return placed


def _target(length: int, p: int, role: Callable[[int], str | None]) -> tuple[int, int]:
    """Returns where a note at position `p` goes. (index, 1) is into message `index`; (index, 0) is a
    new assistant message before it."""
    p = max(0, min(p, length))
    if p > 0 and role(p - 1) == "assistant":
        return (p - 1, 1)
    if p < length and role(p) == "assistant":
        return (p, 1)
    if 0 < p < length or length == 0:
        return (p, 0)
    return (length - 1, 1) if p == length else (0, 1)


def _offsets(message: Message, segments: Sequence[str | None]) -> list[int]:
    """Returns each note's character offset in an assistant message: after its segment's answer, else
    by time."""
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
    notes: Sequence[Note],
    older: bool,
    length: int,
    messages: Callable[[set[int]], dict[int, Message]],
    block_ends: Callable[[set[int]], dict[int, int | None]],
) -> tuple[PlacedNote, ...]:
    """Returns the notes with their places, in order of appearance. `messages(indexes)` reads those
    transcript messages in one read. `block_ends(numbers)` gives the index of the user message after
    each `n`; None runs to the end."""
    ends = block_ends({n.at for n in notes if n.anchor != "position"})
    found = [n.at if n.anchor == "position" else ends.get(n.at) for n in notes]
    positions = [max(0, min(length if p is None else p, length)) for p in found]
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
            placed.extend(_placed(text, index, "new") for text in texts)
            continue
        target = read.get(index)
        assert target is not None
        if target.role == "user":
            placed.extend(_placed(text, index, "user") for text in texts)
            continue
        offsets = _offsets(target, [n.segment for n in ordered])
        ascii_text = target.text.isascii()  # a code point is a byte: the offset is the byte offset
        placed.extend(
            _placed(text, index, "assistant", at, at if ascii_text else len(target.text[:at].encode("utf-8")))
            for text, at in zip(texts, offsets, strict=True)
        )
    return tuple(placed)


def apply_notes(messages: Sequence[Message], notes: Sequence[PlacedNote]) -> tuple[Message, ...]:
    """Returns the transcript with the notes put in, as the chat does with `turn_notes`. Notes at one
    place are joined by a line break. A new assistant message holds only notes. A user message gets
    notes, a blank line, its text. An assistant message gets a blank line and notes at `at`."""
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


def block_ends(messages: Sequence[Message], numbers: set[int]) -> dict[int, int | None]:
    """Returns, per user message number, the index of the next user message; None when none follows."""
    if not numbers:
        return {}
    lowest, next_user = min(numbers), None
    ends: dict[int, int | None] = {}
    for index in range(len(messages) - 1, -1, -1):
        number = messages[index].number
        if messages[index].role != "user" or number is None:
            continue
        if number in numbers:
            ends[number] = next_user
        next_user = index
        if number <= lowest:
            break
    return ends


def place(messages: tuple[Message, ...], notes: Sequence[Note], older: bool) -> tuple[tuple[Message, ...], tuple[str, ...]]:
    """Returns the transcript with `notes` placed and their texts in order of appearance. With `older`,
    the first note says older notes exist."""
    placed = place_notes(
        notes,
        older,
        len(messages),
        lambda wanted: {i: messages[i] for i in wanted},
        lambda numbers: block_ends(messages, numbers),
    )
    if not placed:
        return messages, ()
    return apply_notes(messages, placed), tuple(n.text for n in placed)
