"""Replay (`Replay`): one conversation's turns, each as it saw them. Read from the store, a JSON Lines file
(`replay_file`) or standard input (`replay_lines`). `turns_at` picks one user message's turns. Also
`Audit`, `Demo` and the demo tour's lines (`demo_lines`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from uuid import UUID

from adapters.ingest import read_lines
from adapters.service.conversations import stored_id
from adapters.service.line_commands import fold_events, read_events
from adapters.service.record_lines import IngestReport
from adapters.store.application import ConversationStore
from adapters.store.verify import Verdict
from domain.errors import ChatrecordError, UnknownConversation, shown_id
from domain.events import ConversationEvent, ConversationStarted
from projections.audit import AuditRow
from projections.page_line import PageCheck, every_page
from projections.rules import DEFAULT_RULE_SET, resolve
from projections.turn import TurnInput, replay_json, replay_turns

DEMO_FILE = "demo_seo_tour.jsonl"
DEMO_CONVERSATION = "conv-demo-seo"
Conversations = list[tuple[str, list[ConversationEvent]]]


class TurnNotFound(ChatrecordError):
    """Raised when `--at N` names a user message that started no turn."""


class EmptyInput(ChatrecordError):
    """Raised when a file given to replay holds no conversation (it has no lines)."""


class UnreadableFile(ChatrecordError):
    """Raised when a FILE argument names no file that can be read."""


def conversations_of(events: Iterable[ConversationEvent]) -> Conversations:
    """Returns each conversation of `events` with its events, in start order."""
    names: dict[UUID, str] = {}
    logs: dict[UUID, list[ConversationEvent]] = {}
    for event in events:
        if isinstance(event, ConversationStarted):
            names[event.originator_id] = event.conversation
        logs.setdefault(event.originator_id, []).append(event)
    return [(names[uuid], events) for uuid, events in logs.items()]


def file_conversations(path: Path) -> Conversations:
    """Returns each conversation of the JSON Lines file `path` with its events, folded in memory and in
    start order; nothing is stored. Raises InvalidInput or the domain's ChatrecordError at the first bad
    line. Raises UnreadableFile when the file cannot be read."""
    try:
        return conversations_of(read_events(path))
    except OSError as error:
        raise UnreadableFile(f"{path}: cannot be read ({error.strerror or error})") from None


def stored_conversation(store: ConversationStore, conversation: str, backend: str) -> list[ConversationEvent]:
    """Returns the full event log of `conversation`. Raises UnknownConversation when the store
    (described by `backend`) has none of that id."""
    events = store.events(stored_id(store, conversation))
    if not events:
        raise unknown_conversation(store, conversation, backend)
    return events


def unknown_conversation(store: ConversationStore, conversation: str, backend: str) -> UnknownConversation:
    """Returns the error for `conversation`, which the store (`backend`) does not hold. It names the store
    and a few stored ids."""
    known = store.conversation_ids()
    hint = f"stored: {', '.join(known[:5])}{', …' if len(known) > 5 else ''}" if known else "the store is empty"
    return UnknownConversation(f"no conversation {shown_id(conversation, 'repr')} in {backend} ({hint})")


def turns_at(turns: Sequence[TurnInput], message: int | None) -> list[TurnInput]:
    """Returns the turns of user message `message` (every turn when None): its model call, and any retry or
    edit of it, each as it was then."""
    return list(turns) if message is None else [t for t in turns if t.message == message]


def no_turn(message: int, conversations: Sequence[tuple[str, Sequence[TurnInput]]]) -> TurnNotFound:
    """Returns the error for `--at message` when no conversation has a turn of it."""
    return no_turn_among(message, [t.message for _, turns in conversations for t in turns])


def no_turn_among(message: int, started: Iterable[int]) -> TurnNotFound:
    """Returns the error for `--at message` when none of the turns, which user messages
    `started`, is of it."""
    numbers = sorted(set(started))
    if not numbers:
        return TurnNotFound(f"--at {message}: no turn starts at user message {message}: there are no user messages yet")
    shown = ", ".join(map(str, numbers))
    return TurnNotFound(f"--at {message}: no turn starts at user message {message}; turns start at messages {shown}")


@dataclass(frozen=True)
class Replay:
    """Every turn of one conversation, each as it saw it, under `rules`. `differs`: the read models' latest
    turn is not the log's. `chain`: then the chain's verdict (None when they agree or without a chain)."""

    conversation: str
    rules: str
    turns: tuple[TurnInput, ...]
    differs: bool = False
    chain: Verdict | None = None

    @property
    def broken(self) -> bool:
        """True when the read models differ because the chain does not verify. Then `verify` is the next
        step, not a rebuild."""
        return self.differs and self.chain is not None and not self.chain.ok

    def to_json(self) -> dict[str, Any]:
        """Returns the `replay --json` object (docs/spec-map.md, D15)."""
        return replay_json(self.conversation, self.rules, self.turns)


@dataclass(frozen=True)
class Audit:
    """One conversation's audit: the rule set, its rows in order, and the chain's verdict if asked (`chain`;
    None when not asked or without a chain)."""

    conversation: str
    rules: str
    rows: list[AuditRow]
    chain: Verdict | None = None
    erasure_unfinished: bool = False
    """Whether its log records the erasure of its texts while its data key is not deleted yet
    (an `erase` killed after its event: its texts still read until `erase` runs again)."""

    def to_json(self) -> list[dict[str, Any]]:
        """Returns the rows of `audit --json`, each with `verified`: True when its event precedes any broken
        link (False throughout without a verdict)."""
        verdict = self.chain
        intact = None if verdict is None else (verdict.version + 1 if verdict.ok else verdict.version)
        return [{**row.to_json(), "verified": intact is not None and row.version < intact} for row in self.rows]


@dataclass(frozen=True)
class Demo:
    """What `demo` did: the ingest report, the store, the live rule set and its turn, and the same turn
    under another rule set if asked."""

    report: IngestReport
    backend: str
    rules: str
    turn: TurnInput
    other: tuple[str, TurnInput] | None = None
    broken: Verdict | None = None
    """The break of the demo's hash chain the store keeps, None where none is."""


def replay_file(
    path: Path, rules: str = DEFAULT_RULE_SET, at: int | None = None, can_see_page: PageCheck = every_page
) -> list[Replay]:
    """Returns the replay of each conversation of the JSON Lines file `path`, in memory; nothing is stored.
    With `at`, only conversations with a turn of user message `at`. Raises EmptyInput for a file without
    lines, TurnNotFound, InvalidInput or a refusal."""
    return replay_conversations(file_conversations(path), str(path), rules, at, can_see_page)


def replay_lines(
    lines: Iterable[str | bytes],
    source: str,
    rules: str = DEFAULT_RULE_SET,
    at: int | None = None,
    can_see_page: PageCheck = every_page,
) -> list[Replay]:
    """Returns the replay of each conversation of JSON Lines `lines` (named `source` in errors), as
    `replay_file` does."""
    return replay_conversations(conversations_of(fold_events(read_lines(lines, source))), source, rules, at, can_see_page)


def replay_conversations(
    conversations: Conversations,
    source: str,
    rules: str = DEFAULT_RULE_SET,
    at: int | None = None,
    can_see_page: PageCheck = every_page,
) -> list[Replay]:
    """Returns the replay of each conversation read in memory from `source` (a file, or
    standard input), as `replay_file`."""
    rule_set = resolve(rules).id
    if not conversations:
        raise EmptyInput(f"{source} holds no conversation; replay a JSON Lines file the chat wrote")
    replays = [Replay(name, rule_set, tuple(replay_turns(events, rule_set, can_see_page))) for name, events in conversations]
    if at is None:
        return replays
    picked = [Replay(r.conversation, rule_set, tuple(turns_at(r.turns, at))) for r in replays]
    if not any(r.turns for r in picked):
        raise no_turn(at, [(r.conversation, r.turns) for r in replays])
    return [r for r in picked if r.turns]


def demo_lines() -> list[bytes]:
    """Returns the lines of the demo SEO tour shipped as package data (`adapters/data`)."""
    return resources.files("adapters").joinpath("data", DEMO_FILE).read_bytes().splitlines(keepends=True)
