"""Results of the service layer's reads, and the reads that need no store: `Replay` (the turns
of one conversation; `replay_file` reads a JSON Lines file in memory), `Demo`, `demo_lines`,
and `apply_notes`, the reference of what the chat does with `Chatrecord.turn_notes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.api_lines import IngestReport
from adapters.cli_replay import NoConversation, file_conversations, no_turn, turns_at
from projections.page_line import PageCheck, every_page
from projections.placement import NOTE_SEPARATOR, TEXT_SEPARATOR
from projections.rules import DEFAULT_RULE_SET, resolve
from projections.transcript import Message
from projections.turn import TurnInput, replay_json, replay_turns

if TYPE_CHECKING:
    from adapters.api import PlacedNote

DEMO_FILE = "demo_seo_tour.jsonl"
DEMO_CONVERSATION = "conv-demo-seo"


@dataclass(frozen=True)
class Replay:
    """Every turn of one conversation, each as it saw it, under `rules`. `differs`: the
    materialised projections' latest turn is not the log's (the log's is in `turns`)."""

    conversation: str
    rules: str
    turns: tuple[TurnInput, ...]
    differs: bool = False

    def to_json(self) -> dict[str, Any]:
        """Returns DESIGN.md's `replay --json` object."""
        return replay_json(self.conversation, self.rules, self.turns)


@dataclass(frozen=True)
class Demo:
    """What `demo` did: the ingestion report, the store, the live rule set and its turn, and
    the same turn under another rule set when one was asked for."""

    report: IngestReport
    backend: str
    rules: str
    turn: TurnInput
    other: tuple[str, TurnInput] | None = None


def replay_file(path: Path, rules: str = DEFAULT_RULE_SET, at: int | None = None,
                can_see_page: PageCheck = every_page) -> list[Replay]:
    """Returns the replay of each conversation of the JSON Lines file `path`, read in memory
    (nothing is stored); with `at`, only conversations with a turn of user message `at`.
    Raises NoConversation for a file without lines, NoSuchTurn, InvalidInput or a refusal."""
    rule_set = resolve(rules).id
    conversations = file_conversations(path)
    if not conversations:
        raise NoConversation(f"{path} holds no conversation; replay a JSON Lines file the chat wrote")
    replays = [Replay(name, rule_set, tuple(replay_turns(events, rule_set, can_see_page)))
               for name, events in conversations]
    if at is None:
        return replays
    picked = [Replay(r.conversation, rule_set, tuple(turns_at(r.turns, at))) for r in replays]
    if not any(r.turns for r in picked):
        raise no_turn(at, [(r.conversation, r.turns) for r in replays])
    return [r for r in picked if r.turns]


def demo_lines() -> list[bytes]:
    """Returns the lines of the demo SEO tour shipped as package data (`adapters/data`)."""
    return resources.files("adapters").joinpath("data", DEMO_FILE).read_bytes().splitlines(keepends=True)


def offsets(message: Message, segments: list[str | None]) -> list[int]:
    """Returns where each note goes in an assistant message (`placement.beside`'s rule): right
    after its own segment's answer, else where it falls in time; as character offsets."""
    split = bool(message.ends) and message.ends[-1] == len(message.text)
    where = {segment: i for i, segment in enumerate(message.segments)} if split else {}
    done, out = 1, []
    for segment in segments:
        i = where.get(segment) if segment is not None else None
        if i is not None and i >= done:
            done = i + 1
        out.append(message.ends[done - 1] if split else len(message.text))
    return out


def apply_notes(messages: Iterable[Message], notes: Iterable[PlacedNote]) -> tuple[Message, ...]:
    """Returns the transcript with the notes put in, as the chat does with `turn_notes`: notes
    in one place are joined by a line break; a `new` assistant message holds only its notes; a
    user message gets its notes, a blank line, then its text; an assistant message gets a blank
    line and its notes at offset `at`. Gives exactly `turn_input(...).messages`."""
    messages = tuple(messages)
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
