"""`chatrecord timeline`."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from adapters.cli.app import app, opened, say, warn
from adapters.cli.stdio import require_store
from domain.errors import ChatrecordError


class UnwritableFile(ChatrecordError):
    """Raised when the page cannot be written to the file `-o` names."""


@app.command()
def timeline(
    conversation: Annotated[str, typer.Argument(metavar="CONVERSATION", help="The conversation id, as the chat names it.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write (-: standard output).")],
    inputs: Annotated[
        int, typer.Option("--inputs", min=0, max=100_000, help="Hold the model input of this many turns, the newest.")
    ] = 50,
) -> None:
    """Writes a conversation's timeline page as one self-contained HTML file.

    The page `chatrecord serve` shows at /ui/conversations/ID, in one file that makes no network
    request (open it offline, attach it to a ticket): every turn newest first with what ran,
    was written, decided, left undecided or cut; an overview picture; the hash chain's state;
    and for the newest --inputs turns (default 50) what the model was sent, under each rule
    set, the differences marked (an older turn's: replay --at N).

    Example:

        chatrecord timeline conv-demo-seo -o page.html
    """
    require_store()
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    from adapters.pages import export_page

    with opened() as chatrecord:
        chain = chatrecord.chain(conversation, full=True, by="chatrecord timeline")  # the file's verdict: every hash, now
        html = export_page(chatrecord, conversation, generated=stamp, inputs=inputs, chain=chain)
    if str(output) == "-":  # standard output, as `-` is standard input to ingest: the page alone
        sys.stdout.write(html)
        sys.stdout.flush()
    else:
        try:
            output.write_text(html, encoding="utf-8")
        except OSError as error:
            raise UnwritableFile(f"{output}: cannot be written ({error.strerror or error})") from None
        say(f"{output}: timeline of {conversation}, {len(html.encode()):,} bytes")
    if chain is not None and not chain.ok and chain.problem != "unchained":  # as export and audit: the page written, exit 1
        warn(
            f"warning: the hash chain of conversation {conversation} does not verify, broken at version "
            f"{chain.version} ({chain.problem}): {chain.detail}; the page shows the events as the store holds them now "
            "(chatrecord verify names the break)"
        )
        raise typer.Exit(1)
