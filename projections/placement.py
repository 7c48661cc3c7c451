"""Where a turn's notes go in the transcript (docs/spec-map.md, S25–S27).

A note's place is a transcript position p (the number of messages before it): a run record
entry's is the end of the block of its user message (where the segment's answer joined), a
card outcome's is its `after`. At p a note goes into the assistant message before p, else into
the assistant message at p, else into an assistant message of its own between the user
messages at p-1 and p; at the transcript's end or start it goes into that user message.
Notes follow an assistant's text and precede a user's text. The transcript is not changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from projections.notes import OLDER, Note, labelled
from projections.transcript import JOIN, Message

NOTE_SEPARATOR = "\n"
TEXT_SEPARATOR = "\n\n"


def _positions(messages: tuple[Message, ...], notes: Sequence[Note]) -> dict[int, int]:
    """Returns, for each user message number notes anchor to, the end of its block; scans
    back from the end only as far as the oldest such number."""
    wanted = {n.at for n in notes if n.anchor == "message"}
    if not wanted:
        return {}
    lowest = min(wanted)
    ends: dict[int, int] = {}
    next_user = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        number = messages[index].number
        if messages[index].role != "user" or number is None:
            continue
        if number in wanted:
            ends[number] = next_user
        next_user = index
        if number <= lowest:
            break
    return ends


def target(messages: tuple[Message, ...], p: int) -> tuple[int, int]:
    """Returns where a note at position `p` goes: (index, 1) into message `index`, or
    (index, 0) into an assistant message of its own inserted before message `index`."""
    n = len(messages)
    p = max(0, min(p, n))
    if p > 0 and messages[p - 1].role == "assistant":
        return (p - 1, 1)
    if p < n and messages[p].role == "assistant":
        return (p, 1)
    if 0 < p < n or n == 0:
        return (p, 0)
    return (n - 1, 1) if p == n else (0, 1)


def place(
    messages: tuple[Message, ...], notes: Sequence[Note], older: bool
) -> tuple[tuple[Message, ...], tuple[str, ...]]:
    """Returns the transcript with `notes` placed in it, and the notes' texts in the order they
    appear. With `older`, the first note appearing says that older notes exist."""
    ends = _positions(messages, notes)
    groups: dict[tuple[int, int], list[Note]] = {}
    for note in notes:
        p = note.at if note.anchor == "position" else ends.get(note.at, len(messages))
        groups.setdefault(target(messages, p), []).append(note)
    if not groups:
        return messages, ()
    texts: dict[tuple[int, int], list[str]] = {}
    segments: dict[tuple[int, int], list[str | None]] = {}
    appearing: list[str] = []
    for key in sorted(groups):
        ordered = sorted(groups[key], key=lambda n: n.order)
        bodies = [n.body for n in ordered]
        if older and not appearing:
            bodies[0] = f"{OLDER} {bodies[0]}"
        texts[key] = [labelled(body) for body in bodies]
        segments[key] = [n.segment for n in ordered]
        appearing.extend(texts[key])
    lowest = min(key[0] for key in texts)
    out = list(messages[:lowest])
    for index in range(lowest, len(messages) + 1):
        own = texts.get((index, 0))
        if own:
            out.append(Message(role="assistant", text=NOTE_SEPARATOR.join(own)))
        if index == len(messages):
            break
        message = messages[index]
        into = texts.get((index, 1))
        if not into:
            out.append(message)
        elif message.role == "assistant":
            out.append(Message(role="assistant", text=beside(message, into, segments[(index, 1)])))
        else:
            text = NOTE_SEPARATOR.join(into) + TEXT_SEPARATOR + message.text
            out.append(Message(role="user", text=text, number=message.number))
    return tuple(out), tuple(appearing)


def beside(message: Message, notes: Sequence[str], segments: Sequence[str | None]) -> str:
    """Returns an assistant message's text with `notes` (labelled, in order) placed in it: each
    note of a segment whose answer joined this message right after that answer, every other
    note where it falls in time between them; `segments` names each note's segment or None."""
    parts = _parts(message)
    where = {segment: i for i, segment in enumerate(message.segments)}
    chunks: list[tuple[str, str]] = [("text", parts[0])]  # every note follows some answer
    done = 1
    for note, segment in zip(notes, segments, strict=True):
        i = where.get(segment) if segment is not None else None
        if i is not None and i >= done:
            chunks.extend(("text", part) for part in parts[done : i + 1])
            done = i + 1
        chunks.append(("note", note))
    chunks.extend(("text", part) for part in parts[done:])
    text = chunks[0][1]
    for (before, _), (kind, chunk) in zip(chunks, chunks[1:]):
        text += (NOTE_SEPARATOR if before == kind == "note" else TEXT_SEPARATOR) + chunk
    return text


def _parts(message: Message) -> list[str]:
    """Returns the answers joined in an assistant message, or its whole text as one part."""
    if not message.ends or message.ends[-1] != len(message.text):
        return [message.text]
    starts = (0, *(end + len(JOIN) for end in message.ends[:-1]))
    return [message.text[start:end] for start, end in zip(starts, message.ends, strict=True)]
