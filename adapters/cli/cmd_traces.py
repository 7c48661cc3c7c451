"""`chatrecord traces show` and `chatrecord traces push`: OpenTelemetry GenAI traces of what ran."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from adapters.cli.app import RulesOption, app, opened, say, warn
from adapters.cli.output_file import check_output, output_path, write_output
from adapters.cli.render import broken_chain_warning
from adapters.cli.stdio import require_store

if TYPE_CHECKING:
    from adapters.api import Chatrecord

traces = typer.Typer(
    help="OpenTelemetry GenAI traces of what ran (OTLP/JSON, OTLP/HTTP).\n\n"
    "Example:\n\n    chatrecord traces show conv-demo-seo -o demo-trace.json",
    no_args_is_help=True,
)
app.add_typer(traces, name="traces")

WithTextsOption = Annotated[
    bool, typer.Option("--with-texts", help="Add the user's and the model's message texts (never tool arguments or results).")
]


@traces.command()
def show(
    conversation: Annotated[str, typer.Argument(metavar="CONVERSATION", help="The conversation id, as the chat names it.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", parser=output_path, help="Write to FILE instead of stdout (-: stdout).")
    ] = None,
    rules: RulesOption = None,
    with_texts: WithTextsOption = False,
) -> None:
    """Writes a conversation's traces as OTLP/JSON, one trace per user turn: its root span,
    an invoke_agent span per segment with a chat span per model round and an execute_tool span
    per tool call, a span per card decision and answer. For archives: a receiver takes a push.

    Trace and span ids derive from the conversation and its events: the same every time.
    No tool arguments or results; message texts only with --with-texts.
    A conversation whose hash chain does not verify is written all the same, with a
    warning naming the break on stderr and exit status 1, as export does.

    Example:

        chatrecord traces show conv-demo-seo -o demo-trace.json
    """
    require_store()
    check_output(output)
    with opened(reading=True) as chatrecord:
        text = chatrecord.trace_json(conversation, rules.value if rules else None, with_texts)
        broken = chain_warning(chatrecord, conversation)
    write_output((text + "\n").encode(), output, f"trace of {conversation} as OTLP/JSON")
    if broken is not None:
        warn(broken)
        raise typer.Exit(1)


def chain_warning(chatrecord: Chatrecord, conversation: str) -> str | None:
    """Returns the warning that a trace of `conversation` came from a log whose chain does not verify. None
    when it verifies or there is no chain."""
    verdict = chatrecord.chain(conversation, full=True, by="chatrecord traces")
    return broken_chain_warning(verdict, "the trace holds the events as the store holds them now")


@traces.command()
def push(
    conversations: Annotated[
        list[str] | None,
        typer.Argument(metavar="[CONVERSATION]...", help="Conversation ids (default: every stored conversation)."),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            "--endpoint",
            help="OTLP/HTTP base URL, e.g. http://127.0.0.1:6006 (…/v1/traces is added); "
            "default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT.",
        ),
    ] = None,
    rules: RulesOption = None,
    with_texts: WithTextsOption = False,
) -> None:
    """Sends conversations' traces over OTLP/HTTP (the official OpenTelemetry exporter) to
    an OTLP endpoint such as Arize Phoenix, Langfuse or an OpenTelemetry Collector.

    The SDK reads the OpenTelemetry environment: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    (openinference.project.name=… picks a Phoenix project), OTEL_EXPORTER_OTLP_HEADERS, and
    the endpoint variables where no --endpoint is given. The spans keep the chat's own times.

    Pushing again sends the same trace and span ids, so a receiver that keys spans by id keeps
    one copy. No tool arguments or results; message texts only with --with-texts.

    Example:

        chatrecord traces push conv-demo-seo --endpoint http://127.0.0.1:6006
    """
    require_store()
    with opened(reading=True) as chatrecord:
        sent = chatrecord.push_traces(conversations or [], endpoint, rules.value if rules else None, with_texts)
    for done in sent:
        say(f"{done.conversation}: {done.spans} spans in {done.traces} traces sent to {endpoint or done.url}")
