"""`chatrecord verify` and `chatrecord erase`, and the chain line `audit` prints.

The command functions are registered by `adapters.cli` (`app.command()(verify)`), which also
turns a ChatrecordError into one line `error: …` and exit status 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from adapters.cli.habits import require_store
from adapters.cli.render import visible
from adapters.ingest.names import lookup_key
from adapters.store.application import ConversationStore
from adapters.store.erasure import erase as erase_conversation
from adapters.store.settings import describe_backend, open_store
from adapters.store.verify import Verdict, head_line, verdicts
from domain.errors import UnknownConversation, shown_id


def _say(line: str, *, error: bool = False) -> None:
    stream = sys.stderr if error else sys.stdout
    stream.write(visible(line) + "\n")
    stream.flush()


def _json(value: Any) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(orjson.dumps(value) + b"\n")
    sys.stdout.buffer.flush()


def chain_line(verdict: Verdict | None) -> str:
    """Returns the line `audit` prints about the conversation's hash chain."""
    if verdict is None:
        return "chain: not kept by this store"
    if verdict.ok:
        events = f"{verdict.events} event{'s' if verdict.events != 1 else ''}"
        return f"chain: verified, {events}, head {verdict.hash.hex()[:16] if verdict.hash else '-'}…"
    return f"chain: BROKEN at version {verdict.version} ({verdict.problem}): {verdict.detail}"


def verify(
    conversation: Annotated[str | None, typer.Argument(help="Only this conversation (default: every one).")] = None,
    heads: Annotated[bool, typer.Option("--heads", help="Print each head as NAME VERSION HASH, to keep elsewhere.")] = False,
    against: Annotated[Path | None, typer.Option(
        "--against", metavar="FILE", help="Also compare with heads kept earlier (verify --heads or --json output).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per conversation, one per line.")] = False,
) -> None:
    """Recomputes each conversation's hash chain and reports ok or the first broken link.

    A broken link names the conversation, the version and what happened: an event changed,
    deleted, inserted or reordered, or a hash changed. Exit status 1 on any break. --heads
    prints each conversation's head (last version and its hash) for an operator to keep
    elsewhere; --against FILE compares with such kept heads, which also finds the newest
    events cut off or the whole log rewritten. Reads in pages: memory stays flat. The
    conversations are listed in the order of their ids.

    Example:

        chatrecord verify --heads > heads.txt && chatrecord verify --against heads.txt
    """
    require_store()
    broken = total = 0
    with _store() as store:
        for verdict in verdicts(store, lookup_key(conversation) if conversation is not None else None, against):
            total += 1
            broken += not verdict.ok
            if as_json:
                _json(verdict.to_json())
            elif heads:
                _say(head_line(verdict)) if verdict.ok else _say(verdict.line(), error=True)
            else:
                _say(verdict.line())
        if conversation is not None and total == 0:
            raise UnknownConversation("no conversation " + shown_id(conversation, "'") + f" in {describe_backend(store)}")
    if not as_json and not heads:
        plural = "" if total == 1 else "s"
        _say(f"{total} conversation{plural} verified: {total - broken} ok, {broken} broken")
    if broken:
        raise typer.Exit(1)


def erase(
    conversation: Annotated[str, typer.Argument(help="The conversation id, as the chat names it.")],
) -> None:
    """Erases a conversation's texts: its data key is deleted, its facts stay.

    Every free text of it (user messages, answers, transcript texts, appended answer labels)
    was stored encrypted with the conversation's own key; without the key they read as
    [erased] in replay, the read models and every view, while what ran, what was written and
    the decisions stay, and verify still passes. The erasure is recorded as an event with its
    time. Erasing again changes nothing; a run cut short is finished by running it again.

    Example:

        chatrecord erase conv-demo-seo
    """
    require_store()
    with _store() as store:
        done = erase_conversation(store, lookup_key(conversation))
    when = done.at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if done.recorded:
        _say(f"{conversation}: texts erased at {when} (event version {done.version}); the facts stay")
    else:
        _say(f"{conversation}: erased already at {when}; every step of it is done")


class _store:
    """The configured store, closed afterwards."""

    def __enter__(self) -> ConversationStore:
        self.store = open_store()
        return self.store

    def __exit__(self, *_: object) -> None:
        self.store.close()
