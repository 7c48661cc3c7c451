"""`chatrecord reproduce`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from adapters.api import ModelSettings, Report
from adapters.cli.app import JsonOption, app, emit, opened, print_json, rule_set_option, say
from adapters.cli.render import stream_line
from adapters.cli.stdio import require_store
from projections.rules import RULE_SET_IDS, Rules


def report_table(report: Report) -> Table:
    """Returns the table of a run: per rule set, answers, denials, and answers naming the writes."""
    table = Table(
        title=Text(f"Answers to the turn of message {report.rows()[0]['message']} of {report.conversation}"), box=box.SIMPLE_HEAD
    )
    for column in ("rule set", "answers", "deny the saves", "name the writes", "cut off"):
        table.add_column(column, justify="left" if column == "rule set" else "right")
    for row in report.rows():
        table.add_row(row["rules"], str(row["answers"]), str(row["denials"]), str(row["naming_writes"]), str(row["cut_off"]))
    return table


@app.command()
def reproduce(
    conversation: Annotated[str, typer.Argument(metavar="CONVERSATION", help="The conversation id, as the chat names it.")],
    turn: Annotated[int | None, typer.Option("--turn", min=1, help="The turn of user message N (default: the latest).")] = None,
    rule_set: Annotated[
        list[Rules] | None,
        typer.Option(
            "--rule-set",
            parser=rule_set_option,
            metavar="[" + "|".join(RULE_SET_IDS) + "]",
            help="Send the turn as this rule set builds it (repeatable; default: transcript-only and the store's).",
        ),
    ] = None,
    n: Annotated[int, typer.Option("-n", min=1, max=100, help="Answers asked for under each rule set.")] = 5,
    model: Annotated[str | None, typer.Option("--model", help="The model (default: CHATRECORD_MODEL).")] = None,
    url: Annotated[str | None, typer.Option("--url", help="The endpoint (default: CHATRECORD_MODEL_URL).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=32, help="Requests at once.")] = 4,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds one request may take.")] = 120.0,
    retries: Annotated[
        int,
        typer.Option("--retries", min=0, max=10, help="Tries again on a 408, 409, 429, a 5xx, a timeout or a broken connection."),
    ] = 3,
    temperature: Annotated[
        float | None, typer.Option("--temperature", help="The sampling temperature (default: the server's).")
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model", help="A model on the same endpoint that judges each answer (default: the rule-based judge only)."
        ),
    ] = None,
    kept: Annotated[bool, typer.Option("--kept", help="Print the reproductions kept so far; ask the model nothing.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Sends a recorded turn to a model again under each rule set, keeps the answers, counts them.

    The model input is byte for byte what `replay --at N --json` shows for the turn, sent -n
    times under each rule set to the OpenAI-compatible chat-completions endpoint
    CHATRECORD_MODEL_URL (vLLM, llama.cpp's server, Ollama, a hosted API) for the model
    CHATRECORD_MODEL, with the key CHATRECORD_MODEL_KEY (or OPENAI_API_KEY). Each complete answer
    is kept in a reproduction stream of its own, never in the conversation's log, its text sealed
    with the conversation's data key (erase makes it unreadable). A rule-based judge says whether
    each answer denies the saves the run record shows and whether it names them; with
    --judge-model a model answers the same two questions under a fixed rubric, and its verdicts
    are counted (both are kept, with their rubric's version). Prints the table
    per rule set and the count in the spec's form; --json prints the report as one object. An
    endpoint that is down, refuses the key or does not know the model ends with one line and exit
    status 1; the answers completed before it are kept.

    Example:

        chatrecord reproduce conv-demo-seo -n 5
    """
    require_store()
    with opened(reading=kept) as chatrecord:
        if kept:
            found = chatrecord.reproductions(conversation)
            if as_json:
                print_json([done.to_json() for done in found])
            for done in found if not as_json else ():
                say(stream_line(done))
            if not found and not as_json:
                say(f"no reproduction of {conversation} is kept")
            return
        settings = ModelSettings.from_env(
            url=url,
            model=model,
            concurrency=concurrency,
            timeout=timeout,
            retries=retries,
            temperature=temperature,
            judge=judge_model,
        )
        rules = [r.value for r in rule_set] if rule_set else None
        report = chatrecord.reproduce(conversation, rules, turn, n, model=settings)  # ModelUnusable: one line, exit 1
    if as_json:
        print_json(report.to_json())
        return
    emit(report_table(report))
    say(report.sentence())
