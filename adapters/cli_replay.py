"""Replay for the command line: the turns of a file read in memory, or of one stored
conversation, each as that turn saw it (time travel over the log, see `projections.turn`).

Nothing here reads steps or decides outcomes; it groups events by conversation, picks turns
and builds the page check from the pages the user may not see.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from uuid import UUID

from adapters.application import ConversationStore
from adapters.ingest import read_events
from adapters.ingest_names import lookup_key, show
from domain.errors import ChatrecordError, UnknownConversation
from domain.events import ConversationEvent, ConversationStarted
from projections.page_line import PageCheck
from projections.turn import TurnInput

Conversations = list[tuple[str, list[ConversationEvent]]]


class NoSuchTurn(ChatrecordError):
    """Raised when `--at N` names a user message that started no turn."""


class NoConversation(ChatrecordError):
    """Raised when a file given to replay holds no conversation (it has no lines)."""


class UnreadableFile(ChatrecordError):
    """Raised when a FILE argument names no file that can be read."""


def readable_file(path: Path) -> Path:
    """Returns `path` when it names a file that can be read. Raises UnreadableFile, naming the
    path as given and why (`nofile.jsonl: no such file`), when it does not."""
    try:
        with path.open("rb"):
            return path
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "is a folder, not a file"
    except PermissionError:
        reason = "not readable (permission denied)"
    except OSError as error:
        reason = f"cannot be read ({error.strerror or error})"
    raise UnreadableFile(f"{path}: {reason}")


def page_check(denied: Collection[int]) -> PageCheck:
    """Returns the page check of a user who may see every page except `denied`."""
    hidden = frozenset(denied)
    return lambda page_id: page_id not in hidden


def file_conversations(path: Path) -> Conversations:
    """Returns each conversation of the JSON Lines file `path` with its events, folded in
    memory (nothing is stored), in the order the conversations start.

    Raises InvalidInput or the domain's ChatrecordError at the first bad line, UnreadableFile
    when the file cannot be read.
    """
    names: dict[UUID, str] = {}
    logs: dict[UUID, list[ConversationEvent]] = {}
    try:
        for event in read_events(path):
            if isinstance(event, ConversationStarted):
                names[event.originator_id] = event.conversation
            logs.setdefault(event.originator_id, []).append(event)
    except OSError as error:
        raise UnreadableFile(f"{path}: cannot be read ({error.strerror or error})") from None
    return [(names[uuid], events) for uuid, events in logs.items()]


def stored_conversation(store: ConversationStore, conversation: str, backend: str) -> list[ConversationEvent]:
    """Returns the full event log of `conversation`, looked up as the ingester stored it
    (`lookup_key`). Raises UnknownConversation when the store (described by `backend`) has none
    of that id."""
    events = store.events(lookup_key(conversation))
    if not events:
        known = store.conversation_ids()
        hint = f"stored: {', '.join(known[:5])}{', …' if len(known) > 5 else ''}" if known else "the store is empty"
        named = repr(conversation) if len(conversation) <= 40 and conversation.isprintable() else show(conversation)
        raise UnknownConversation(f"no conversation {named} in {backend} ({hint})")
    return events


def turns_at(turns: Sequence[TurnInput], message: int | None) -> list[TurnInput]:
    """Returns the turns of user message `message` (every turn when None): the model call it
    started, and any retry or edit of it, each as it was then."""
    return list(turns) if message is None else [t for t in turns if t.message == message]


def no_turn(message: int, conversations: Sequence[tuple[str, Sequence[TurnInput]]]) -> NoSuchTurn:
    """Returns the error for `--at message` when no conversation has a turn of it."""
    numbers = sorted({t.message for _, turns in conversations for t in turns})
    shown = ", ".join(map(str, numbers)) or "none"
    return NoSuchTurn(f"--at {message}: no turn starts at user message {message}; turns start at messages {shown}")
