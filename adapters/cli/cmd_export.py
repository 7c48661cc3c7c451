"""`chatrecord export`."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from adapters.cli.app import app, opened, warn
from adapters.cli.output_file import check_output, output_path, write_output
from adapters.cli.stdio import json_bytes, require_store


class ExportFormat(StrEnum):
    """What `export` writes: the chat's JSON Lines, or the conversation's trace as OTLP/JSON."""

    jsonl = "jsonl"
    otlp = "otlp"


@app.command()
def export(
    conversation: Annotated[
        str, typer.Argument(metavar="CONVERSATION", help="The conversation id, as the chat names it or as list prints it.")
    ],
    upto: Annotated[int | None, typer.Option("--upto", min=1, help="Stop after user message N and what belongs to it.")] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", parser=output_path, help="Write to this file (default, or -: standard output)."),
    ] = None,
    export_format: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            metavar="[jsonl|otlp]",
            help="jsonl: the chat's lines; otlp: the trace as OTLP/JSON, as `traces show` writes it.",
        ),
    ] = ExportFormat.jsonl,
    with_reproductions: Annotated[
        bool,
        typer.Option("--with-reproductions", help="Write the kept reproductions after the lines, as records ingest reads back."),
    ] = False,
) -> None:
    """Writes a stored conversation as the chat's JSON Lines, the lines ingest reads.

    One JSON object a line, each with its `type` (conversation_started, user_message,
    segment_returned, card_decided, …), as the chat writes them. The lines are made from the
    store's events, in its order, with only what it keeps (no tool arguments or results, no
    model text: they were never stored). `chatrecord ingest` of them
    into an empty store gives the same turns, audit rows and chain; `chatrecord replay FILE`
    the same turns. --upto N cuts the export after user message N, for a minimal reproduction
    (an error naming the conversation's user messages when it has no message N).
    An erased conversation exports its facts with its texts as `[erased]`, and says so on stderr.
    A conversation whose hash chain does not verify is exported as the store holds it, with a
    warning naming the break on stderr and exit status 1.
    --format otlp writes the conversation's GenAI trace as OTLP/JSON instead (see `traces show`;
    --upto does not apply to it).
    --with-reproductions writes, after the lines (which stay as they are without it), one
    reproduction record a line per kept reproduction of the conversation (`chatrecord
    reproduce`; with --upto, those of its turns up to message N): what was sent, to which model,
    the answers with their texts and verdicts. `chatrecord ingest` of the file keeps them as
    reproductions of the store it reads into; an erased conversation's answers read [erased].

    Example:

        chatrecord export conv-demo-seo --upto 2 -o bug.jsonl
    """
    if with_reproductions and export_format is not ExportFormat.jsonl:
        raise typer.BadParameter("writes JSON Lines; leave out --format otlp", param_hint="--with-reproductions")
    require_store()
    check_output(output)
    with opened(reading=True) as chatrecord:
        if export_format is ExportFormat.otlp:
            from adapters.cli.cmd_traces import chain_warning

            trace = (chatrecord.trace_json(conversation) + "\n").encode()  # OpenTelemetry loads only for this format
            broken = chain_warning(chatrecord, conversation)
            write_output(trace, output, f"trace of {conversation} as OTLP/JSON")
            if broken is not None:
                warn(broken)
                raise typer.Exit(1)
            return
        done = chatrecord.export(conversation, upto, with_reproductions=with_reproductions)
    data = b"".join(json_bytes(line) + b"\n" for line in done.records())
    written = f"{len(done.lines):,} lines" + (f" and {len(done.reproductions):,} reproductions" if with_reproductions else "")
    write_output(data, output, f"{written} of {done.conversation}")
    if done.erased:
        warn(
            f"note: conversation {done.conversation} was erased; its texts are exported as [erased]; the file carries no erasure: an ingest of it stores [erased] as the texts of a conversation not erased"
        )
    if done.broken is not None:
        warn(
            f"warning: the hash chain of conversation {done.conversation} does not verify, broken at {done.broken}; "
            "the export holds the events as the store holds them now, the changed one among them, and a store it "
            "is ingested into chains them anew (chatrecord verify names the break)"
        )
        raise typer.Exit(1)
