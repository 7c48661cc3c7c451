"""`chatrecord ingest`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapters.cli.app import app, opened, print_json, say, warn
from adapters.cli.args import UnreadableFile, readable_file
from adapters.cli.habits import (
    STDIN_NAME,
    ingest_json,
    is_stdin,
    stdin_lines,
)
from adapters.service.results import EmptyInput


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(metavar="FILE...", help="JSON Lines files the chat wrote; - reads standard input.")],
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Reject bad lines and go on.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object per file.")] = False,
) -> None:
    """Ingests the chat's JSON Lines files into the configured store.

    A line recorded before is not stored again, so ingesting a file twice changes nothing. The
    first bad line stops the ingestion with its file, line and field (the lines before it stay
    stored); with --skip-bad each bad line is rejected, named on stderr, and the rest is stored.
    FILE - reads standard input. --json prints, per file, {"source", "appended", "repeated",
    "rejected", "stopped_at", "error"} on one line.

    Example:

        chatrecord ingest tests/data/demo_seo_tour.jsonl
    """
    for path in files:
        if not is_stdin(path):
            readable_file(path)
    with opened() as chatrecord:
        for path in files:
            try:
                if is_stdin(path):
                    report = chatrecord.ingest(stdin_lines(), STDIN_NAME, skip_bad)
                else:
                    with path.open("rb") as stream:
                        report = chatrecord.ingest(stream, path.name, skip_bad)
            except OSError as error:
                raise UnreadableFile(f"{path}: cannot be read ({error.strerror or error})") from None
            if as_json:
                print_json(ingest_json(report))
            else:
                say(report.summary())
            for rejected in report.rejected:
                warn(f"rejected: {rejected}")
            if report.stopped is not None:
                raise report.stopped
            if not (report.appended or report.repeated or report.rejected):
                raise EmptyInput(f"{report.source} holds no line; ingest a JSON Lines file the chat wrote")
