"""`chatrecord erase` (registered by `adapters.cli` after the other commands, where `--help` lists it)."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.app import opened, say
from adapters.cli.habits import require_store


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
    with opened() as chatrecord:
        done = chatrecord.erase(conversation)
    when = done.at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if done.unreadable is not None:
        say(f"{conversation}: texts erased at {when}: its data key is deleted and its read models dropped, but "
            f"no erasure event is recorded, since its log cannot be read back ({done.unreadable})")
    elif done.recorded:
        say(f"{conversation}: texts erased at {when} (event version {done.version}); the facts stay")
    else:
        say(f"{conversation}: erased already at {when}; every step of it is done")
