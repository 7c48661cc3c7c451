"""`chatrecord timeline`."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from adapters.cli.app import app, opened, warn
from adapters.cli.output_file import check_output, is_stdout, output_path, write_output
from adapters.cli.render import broken_chain_warning
from adapters.cli.stdio import require_store


@app.command()
def timeline(
    conversation: Annotated[str, typer.Argument(metavar="CONVERSATION", help="The conversation id, as the chat names it.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", parser=output_path, help="The HTML file to write (-: standard output).")
    ],
    inputs: Annotated[
        int, typer.Option("--inputs", min=0, max=100_000, help="Hold the model input of this many turns, the newest.")
    ] = 20,
    pages: Annotated[
        int,
        typer.Option(
            "--pages", min=1, max=100_000, help="Write this many pages of 20 turns, newest first: FILE, then FILE-2.html, …"
        ),
    ] = 1,
) -> None:
    """Writes a conversation's timeline page as one self-contained HTML file.

    The page `chatrecord serve` shows at /ui/conversations/ID, in one file that makes no network
    request (open it offline, attach it to a ticket): the newest 20 turns with what ran, was
    written, decided, left undecided or cut; an overview picture; the hash chain's state; and
    for the newest --inputs turns (default 20, the first page's) what the model was sent, under each rule set,
    the differences marked (the latest turn's whole, its earlier messages folded; the others'
    last messages; an older turn's: replay --at N). --pages N writes the older turns too, 20 a
    page, each page a file of its own linked to its neighbours: FILE, then FILE-2.html, …
    On a terminal, the steps of a long file are shown on standard error.

    Example:

        chatrecord timeline conv-demo-seo -o page.html
    """
    require_store()
    check_output(output)
    if pages > 1 and is_stdout(output):
        raise typer.BadParameter("standard output holds one page: give a FILE to write --pages", param_hint="--pages")
    names = [output.name] + [f"{output.stem}-{n}{output.suffix or '.html'}" for n in range(2, pages + 1)]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    from adapters.pages import export_pages

    progress = steps if sys.stderr.isatty() else None
    more = f"chatrecord timeline {conversation} -o {output.name} --pages {pages + 1}"
    with opened(reading=True) as chatrecord:
        chain = chatrecord.chain(conversation, full=True, by="chatrecord timeline")  # the file's verdict: every hash, now
        files = export_pages(chatrecord, conversation, names, stamp, inputs, chain, more, progress)
    if progress is not None:
        sys.stderr.write("\r\x1b[K")  # the steps' line cleared for what was written
    for index, html in enumerate(files):
        target = output if index == 0 else output.with_name(names[index])
        write_output(html.encode(), target, f"timeline of {conversation}" + (f", page {index + 1}" if index else ""))
    broken = broken_chain_warning(chain, "the page shows the events as the store holds them now")
    if broken is not None:  # as export and audit: the page written, exit 1
        warn(broken)
        raise typer.Exit(1)


def steps(what: str) -> None:
    """Shows the step a long file is at on the terminal (standard error), each over the last."""
    sys.stderr.write(f"\r\x1b[K{what}…")
    sys.stderr.flush()
