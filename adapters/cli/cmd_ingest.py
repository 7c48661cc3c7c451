"""`chatrecord ingest`."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Annotated

import typer

from adapters.api import BATCH_LINES, EmptyInput
from adapters.cli.app import app, err, opened, print_json, say, warn
from adapters.cli.args import UnreadableFile, readable_file
from adapters.cli.interrupts import INTERRUPTED, IngestProgress, Interrupts, interrupted_line
from adapters.cli.stdio import (
    STDIN_NAME,
    ingest_json,
    is_stdin,
    stdin_lines,
)


@app.command()
def ingest(
    files: Annotated[
        list[Path], typer.Argument(metavar="FILE...", help="JSON Lines files the chat wrote; - reads standard input.")
    ],
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Reject bad lines and go on.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object per file.")] = False,
    batch_lines: Annotated[
        int, typer.Option("--batch-lines", min=1, max=100_000, help="Lines stored per transaction.")
    ] = BATCH_LINES,
) -> None:
    """Ingests the chat's JSON Lines files into the configured store.

    A line recorded before is not stored again, so ingesting a file twice changes nothing. The
    first bad line stops the ingestion with its file, line and field (the lines before it stay
    stored); with --skip-bad each bad line is rejected, named on stderr, and the rest is stored.
    Lines are stored in batches of --batch-lines (500), each in one transaction. Progress goes
    to stderr: a bar on a terminal, else a line every 5 seconds. Ctrl-C (or SIGTERM) stops
    after the batch being stored, says up to which line the file is stored and exits with 130;
    running the same command again resumes. FILE - reads standard input. --json prints, per
    file, {"source", "appended", "repeated", "rejected", "stopped_at", "error", "last_line",
    "interrupted"} on one line.

    Example:

        chatrecord ingest tests/data/demo_seo_tour.jsonl
    """
    if sum(1 for path in files if is_stdin(path)) > 1:
        raise typer.BadParameter("- (standard input) can be read once; give it once", param_hint="'FILE...'")
    for path in files:
        if not is_stdin(path):
            readable_file(path)
    names = source_names(files)
    with opened() as chatrecord, Interrupts() as interrupts:
        for path, name in zip(files, names, strict=True):
            try:
                if is_stdin(path):
                    with IngestProgress(err, STDIN_NAME, None) as progress:
                        report = chatrecord.ingest(stdin_lines(), STDIN_NAME, skip_bad, batch_lines, progress, interrupts.held)
                else:
                    with path.open("rb") as stream, IngestProgress(err, name, _size(stream.fileno())) as progress:
                        report = chatrecord.ingest(stream, name, skip_bad, batch_lines, progress, interrupts.held)
            except OSError as error:
                raise UnreadableFile(f"{path}: cannot be read ({error.strerror or error})") from None
            if as_json:
                print_json(ingest_json(report))
            else:
                say(report.summary())
            for rejected in report.rejected:
                warn(f"rejected: {rejected}")
            if report.interrupted:
                warn(interrupted_line(report))
                raise typer.Exit(INTERRUPTED)
            if report.stopped is not None:
                raise report.stopped
            if not (report.appended or report.repeated or report.rejected):
                raise EmptyInput(f"{report.source} holds no line; ingest a JSON Lines file the chat wrote")


def source_names(files: list[Path]) -> list[str]:
    """Returns the name each file is reported by: its file name, or the path as given where the
    file name alone would not tell it apart (two files of one name in other folders) or says
    nothing (`<(zcat …)`, a descriptor such as /dev/fd/63; a device or a pipe such as /dev/null)."""
    counts: dict[str, int] = {}
    for path in files:
        counts[path.name] = counts.get(path.name, 0) + (0 if is_stdin(path) else 1)
    return [
        STDIN_NAME
        if is_stdin(path)
        else str(path)
        if counts[path.name] > 1
        or (path.name.isdigit() and str(path.parent) in ("/dev/fd", "/proc/self/fd"))
        or not _regular(path)
        else path.name
        for path in files
    ]


def _regular(path: Path) -> bool:
    """Says whether `path` (its links followed) is a regular file; True where it cannot be looked at (the
    open names the error)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


def _size(descriptor: int) -> int | None:
    """Returns the size in bytes of the regular file open as `descriptor`; None for a pipe or stream."""
    found = os.fstat(descriptor)
    return found.st_size if stat.S_ISREG(found.st_mode) else None
