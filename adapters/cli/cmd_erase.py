"""`chatrecord erase` (registered by `adapters.cli` after the other commands, where `--help` lists it)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from adapters.cli.app import opened, say
from adapters.cli.stdio import require_store
from domain.errors import ChatrecordError


class NotConfirmed(ChatrecordError):
    """Raised when the user answers no to erase's question: nothing is erased."""


class ConfirmationNeeded(typer.BadParameter):
    """A usage error (exit status 2): erase without --yes where no terminal can confirm it."""

    def format_message(self) -> str:
        return self.message


def confirmed(conversation: str, yes: bool) -> None:
    """Returns when the erasure may go ahead: --yes was given, or the user confirmed. Raises
    ConfirmationNeeded without --yes when standard input is no terminal. Raises NotConfirmed when the
    user answers no."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfirmationNeeded(
            "erase cannot be undone; give --yes to erase without a terminal to confirm on "
            f"(chatrecord erase {conversation} --yes)"
        )
    if not typer.confirm(f"Erase the texts of {conversation}? This cannot be undone", default=False):
        raise NotConfirmed(f"{conversation}: nothing erased (not confirmed)")


def erase(
    conversation: Annotated[str, typer.Argument(metavar="CONVERSATION", help="The conversation id, as the chat names it.")],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Erase without asking; needed where standard input is not a terminal.")
    ] = False,
) -> None:
    """Erases a conversation's texts: its data key is deleted, its facts stay.

    Every free text of it (user messages, answers, transcript texts, appended answer labels)
    was stored encrypted with the conversation's own key; without the key they read as
    [erased] in replay, the read models and every view, while what ran, what was written and
    the decisions stay, and verify still passes. The erasure is recorded as an event with its
    time. Erasing again changes nothing; a run cut short is finished by running it again.
    It cannot be undone: on a terminal erase asks first; elsewhere it needs --yes.

    Example:

        chatrecord erase conv-demo-seo --yes
    """
    require_store()
    confirmed(conversation, yes)
    with opened() as chatrecord:
        done = chatrecord.erase(conversation)
    when = done.at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if done.unreadable is not None:
        say(
            f"{done.conversation}: texts erased at {when}: its data key is deleted and its read models dropped, but "
            f"no erasure event is recorded, since its log cannot be read back ({done.unreadable})"
        )
    elif done.recorded:
        say(f"{done.conversation}: texts erased at {when} (event version {done.version}); the facts stay")
    elif done.finished:
        say(
            f"{done.conversation}: erased at {when} by an earlier run that stopped before its last steps; this run "
            "finished them: its data key is deleted and its read models are folded again"
        )
    else:
        say(
            f"{done.conversation}: erased already at {when}; this run did each later step again (its data key is "
            "gone, its read models are folded again, the files scrubbed), so none keeps a text"
        )
