"""The command line's shared parts: the typer app, output helpers, options, the store opener. Each command
is a module of this package, registered by `adapters.cli`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType

from adapters import version
from adapters.api import Chatrecord
from adapters.cli import helptypes
from adapters.cli.render import visible
from adapters.cli.stdio import json_bytes
from projections.rules import RULE_SET_IDS, Rules

helptypes.install()

app = typer.Typer(
    help="An event-sourced conversation store: what an AI agent's runs did, and the notes a later turn reads.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
out = Console(highlight=False, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, markup=False, emoji=False)


def say(line: str) -> None:
    """Writes one line to stdout, unwrapped, its control characters made visible."""
    out.print(visible(line), soft_wrap=True)


def warn(line: str) -> None:
    """Writes one line to stderr, unwrapped, its control characters made visible."""
    print(visible(line), file=sys.stderr, flush=True)


def emit(renderable: RenderableType) -> None:
    """Writes what `renderable` renders to stdout, without spaces at the ends of its lines."""
    with out.capture() as captured:
        out.print(renderable)
    sys.stdout.write("\n".join(line.rstrip(" ") for line in captured.get().split("\n")))
    sys.stdout.flush()


RULES_METAVAR = "[" + "|".join(RULE_SET_IDS) + "]"


def rule_set_option(value: Any) -> Any:
    """Returns the rule set an option names as a `Rules`. Raises typer.BadParameter (exit status 2) for any
    other value, in click's words."""
    if isinstance(value, Rules):
        return value
    try:
        return Rules(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, RULE_SET_IDS))}.") from None


def rules_option(help: str) -> Any:
    """Returns the `--rules` option with `help`: one of RULE_SET_IDS, else a usage error."""
    return typer.Option("--rules", help=help, parser=rule_set_option, metavar=RULES_METAVAR)


RulesOption = Annotated[Rules | None, rules_option("Rule set (default: the store's; 2026-11-02 for a FILE).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


@contextmanager
def opened(reading: bool = False) -> Iterator[Chatrecord]:
    """Yields the service layer on the configured store and closes the store after. `reading`: a SQLite file
    it cannot write is opened read-only."""
    chatrecord = Chatrecord(reading=reading)
    try:
        yield chatrecord
    finally:
        chatrecord.close()


def print_json(value: Any) -> None:
    """Writes `value` as one line of JSON (UTF-8) to stdout, invisible characters escaped
    (`adapters.cli.stdio.json_bytes`)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(json_bytes(value) + b"\n")
    sys.stdout.buffer.flush()


def show_version(value: bool) -> None:
    if value:
        say(f"chatrecord {version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    _version: Annotated[
        bool, typer.Option("--version", callback=show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """An event-sourced conversation store: what an AI agent's runs did, and the notes a later turn reads."""
