"""`chatrecord timeline`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from adapters.cli.app import app, opened, warn
from adapters.cli.output_file import check_output, write_output
from adapters.cli.render import broken_chain_warning
from adapters.cli.stdio import require_store


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
    check_output(output)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    from adapters.pages import export_page

    with opened(reading=True) as chatrecord:
        chain = chatrecord.chain(conversation, full=True, by="chatrecord timeline")  # the file's verdict: every hash, now
        html = export_page(chatrecord, conversation, generated=stamp, inputs=inputs, chain=chain)
    write_output(html.encode(), output, f"timeline of {conversation}")  # `-`: standard output, the page alone
    broken = broken_chain_warning(chain, "the page shows the events as the store holds them now")
    if broken is not None:  # as export and audit: the page written, exit 1
        warn(broken)
        raise typer.Exit(1)
