"""`chatrecord`: the three jobs of the store on the command line (typer, rich).

Each command parses its arguments, opens the store `adapters.store.settings` configures, calls the
library and prints text or `--json` (text without control characters from the data and
without spaces at the ends of lines). Exit status: 0 success; 1 bad input, a missing file, an
unknown conversation or a setting the store cannot use (one line `error: …` on stderr, no
traceback); 2 wrong usage. Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer
from eventsourcing.persistence import PersistenceError
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from adapters.api import DEMO_CONVERSATION, Chatrecord, replay_file
from adapters.service.results import replay_conversations
from adapters.store.verify import chain_verdict
from adapters.cli.habits import (
    STDIN_NAME,
    diff_json,
    ingest_json,
    is_stdin,
    json_bytes,
    rebuild_json,
    require_store,
    stdin_conversations,
    stdin_lines,
    version,
)
from adapters.cli.render import audit_table, comparison, diff_view, turn_view, visible
from adapters.cli.replay import UnreadableFile, page_check, readable_file
from adapters.cli.verify import chain_line, erase, verify
from adapters.ingest.names import lookup_key
from adapters.store.settings import SQLITE_MODULES, describe_backend, open_store, store_env, store_problem
from domain.errors import ChatrecordError
from projections.rules import DEFAULT_RULE_SET, RULE_SET_IDS

app = typer.Typer(
    help="An event-sourced conversation store: what an AI agent's runs did, and the notes a later turn reads.",
    no_args_is_help=True,
    add_completion=False,
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


def show(renderable: RenderableType) -> None:
    """Writes what `renderable` renders to stdout, without spaces at the ends of its lines."""
    with out.capture() as captured:
        out.print(renderable)
    sys.stdout.write("\n".join(line.rstrip(" ") for line in captured.get().split("\n")))
    sys.stdout.flush()


Rules = Enum("Rules", {rule_set: rule_set for rule_set in RULE_SET_IDS}, type=str)  # type: ignore[misc]
RulesOption = Annotated[Rules | None, typer.Option(
    "--rules", help="Rule set (default: the store's; 2026-11-02 for a FILE).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


@contextmanager
def opened() -> Iterator[Chatrecord]:
    """Yields the service layer on the configured store and closes the store afterwards."""
    chatrecord = Chatrecord(open_store())
    try:
        yield chatrecord
    finally:
        chatrecord.close()


def print_json(value: Any) -> None:
    """Writes `value` as one line of JSON (UTF-8) to stdout, invisible characters escaped
    (`adapters.cli.habits.json_bytes`)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(json_bytes(value) + b"\n")
    sys.stdout.buffer.flush()


def show_version(value: bool) -> None:
    if value:
        say(f"chatrecord {version()}")
        raise typer.Exit()


@app.callback()
def main_options(
    _version: Annotated[bool, typer.Option("--version", callback=show_version, is_eager=True,
                                           help="Print the version and exit.")] = False,
) -> None:
    """An event-sourced conversation store: what an AI agent's runs did, and the notes a later turn reads."""


@app.command()
def demo(rules: Annotated[Rules | None, typer.Option(
    "--rules", help="Print the same turn under this rule set too, after the store's, and compare.")] = None) -> None:
    """Replays the demo SEO tour and prints what the model is sent three days later.

    The question is "was ist hier passiert?"; the chat record's notes are boxed. The tour (six approved cards on page 42) ships with the package. It is ingested into the
    configured store; ingesting it again changes nothing. The turn is read from the store's
    materialised projections, under the store's rule set. With --rules transcript-only the
    turn is printed again as it was before the chat record existed (no notes: the model
    answered that nothing had been saved), followed by a comparison.

    Example:

        chatrecord demo --rules transcript-only
    """
    with opened() as chatrecord:
        done = chatrecord.demo(rules.value if rules else None)
    say(f"{done.report.summary()} ({done.backend})")
    show(turn_view(DEMO_CONVERSATION, done.turn, done.rules))
    if done.other is not None:
        show("")
        show(turn_view(DEMO_CONVERSATION, done.other[1], done.other[0]))
        show(comparison([(done.rules, done.turn), done.other]))


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(metavar="FILE", help="JSON Lines files the chat wrote; - reads standard input.")],
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


@app.command()
def replay(
    file: Annotated[Path | None, typer.Argument(metavar="FILE", help="Replay this JSON Lines file in memory; - reads standard input.")] = None,
    conversation: Annotated[str | None, typer.Option("--conversation", "-c",
                                                     help="Replay this stored conversation.")] = None,
    rules: RulesOption = None,
    at: Annotated[int | None, typer.Option("--at", min=1, help="Only the turn of user message N, as it was then.")] = None,
    deny_page: Annotated[list[int] | None, typer.Option("--deny-page", min=1,
                                                        help="A page the user may not see (repeatable).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Prints every turn's model input, each exactly as the model saw it then.

    Give a FILE (read in memory, nothing stored; - reads standard input) or --conversation ID
    (the configured store, which must exist). --at N travels back to the turn of user message
    N; --deny-page hides a page from the user, so no prompt names it. --json prints one object
    per conversation, one per line (the contract in docs/spec-map.md, D15).

    Example:

        chatrecord replay tests/data/demo_seo_tour.jsonl --at 1 --json
    """
    if (file is None) == (conversation is None):
        raise typer.BadParameter("give a FILE or --conversation ID, not both or neither", param_hint="FILE")
    can_see = page_check(deny_page or ())
    if file is not None:
        rule_set = rules.value if rules else DEFAULT_RULE_SET
        if is_stdin(file):
            replays = replay_conversations(stdin_conversations(), STDIN_NAME, rule_set, at, can_see)
        else:
            replays = replay_file(readable_file(file), rule_set, at, can_see)
    else:
        require_store()
        with opened() as chatrecord:
            replays = [chatrecord.replay(conversation, rules.value if rules else None, at, can_see)]
        if replays[0].differs:
            warn("warning: the materialised projections differ from the log for the latest turn; "
                 "the log's is shown. Run: chatrecord rebuild")
    for done in replays:
        if as_json:
            print_json(done.to_json())
            continue
        for turn in done.turns:
            show(turn_view(done.conversation, turn, done.rules))


@app.command()
def audit(
    conversation: Annotated[str, typer.Argument(help="The conversation id, as the chat names it.")],
    rules: RulesOption = None,
    as_json: JsonOption = False,
) -> None:
    """Prints a conversation's whole history, in order, with times.

    Every segment with its trigger, outcome and tool calls (ran, failed, held, declined, not
    permitted), the records written and how complete, every decision, card outcome, card left
    undecided, edit and what it cut. Facts only: no tool arguments or results, no model or user text. --json prints the rows
    as one JSON list. The last line says whether the conversation's hash chain verified (see
    verify); in --json each row's "verified" says whether its event lies before any broken link.

    Example:

        chatrecord audit conv-demo-seo --json
    """
    require_store()
    with opened() as chatrecord:
        rule_set, rows = chatrecord.audit(conversation, rules.value if rules else None)
        verdict = chain_verdict(chatrecord.store, lookup_key(conversation))
    if as_json:
        intact = None if verdict is None else (verdict.version + 1 if verdict.ok else verdict.version)
        print_json([{**row.to_json(), "verified": intact is not None and row.version < intact} for row in rows])
    else:
        show(audit_table(conversation, rows, rule_set))
        say(chain_line(verdict))


@app.command()
def rebuild(
    rules: Annotated[Rules, typer.Option("--rules", help="The rule set to rebuild under.")] = Rules(DEFAULT_RULE_SET),
    diff: Annotated[bool, typer.Option("--diff", help="Only show what would change; switch nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report (or the diff) as one JSON object.")] = False,
) -> None:
    """Rebuilds the materialised projections under a rule set and reports what changed.

    Every conversation's log is read again under the rule set into new tables, which then
    replace the old ones. --diff prints, per conversation, which run record entries and notes
    would change, without switching. --json prints the report or the diff as one JSON object.

    Example:

        chatrecord rebuild --rules 2026-11-01 --diff
    """
    if diff:
        require_store()
    with opened() as chatrecord:
        if diff:
            changed = chatrecord.diff(rules.value)
            if as_json:
                print_json(diff_json(chatrecord.active_rules(), rules.value, changed))
                return
            say(f"{chatrecord.active_rules()} → {rules.value}: {len(changed)} "
                f"conversation{'' if len(changed) == 1 else 's'} would change (nothing switched)")
            for conversation_diff in changed:
                show(diff_view(conversation_diff))
            return
        with Progress(TextColumn("rebuilding"), BarColumn(), MofNCompleteColumn(), TextColumn("events"),
                      TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("rebuild", total=None)
            report = chatrecord.rebuild(rules.value, lambda done, total: progress.update(task, completed=done, total=total))
    if as_json:
        print_json(rebuild_json(report))
        return
    say(f"rebuilt under {report.rules} (was {report.old_rules}): {report.conversations} "
        f"conversation{'' if report.conversations == 1 else 's'}, {report.events} event{'' if report.events == 1 else 's'}")


app.command()(verify)
app.command()(erase)


@app.command()
def init() -> None:
    """Creates the configured store's tables, if they are missing, and exits.

    Every command creates the tables it needs when they are missing (one process at a time,
    under a lock), so this is optional: it lets a deployment create them up front, with a role
    allowed to, before the chat's processes (or a read-only replica) use the store. Running it
    again changes nothing.

    Example:

        chatrecord init
    """
    backend = store_env()
    fresh = backend.get("PERSISTENCE_MODULE") in SQLITE_MODULES and not Path(backend["SQLITE_DBNAME"]).exists()
    with opened() as chatrecord:
        chatrecord.read_models  # noqa: B018 - the views' pointer and first generation
        fresh = fresh or bool(getattr(chatrecord.store.factory, "created", None))
        say(f"{'created the store' if fresh else 'the store exists already'}: {describe_backend(chatrecord.store)}")


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8765,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Server processes.")] = 1,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="No bearer token (loopback hosts only).")] = False,
    access_log: Annotated[bool, typer.Option("--access-log/--no-access-log", help="Log each request.")] = True,
) -> None:
    """Serves the HTTP API the chat calls (/v1/lines, /v1/conversations/ID/turn, …).

    Requires the bearer token in CHATRECORD_API_TOKEN unless --no-auth is given on a loopback
    host. Bodies over CHATRECORD_MAX_BODY_BYTES (default 8 MiB) are refused. The OpenAPI
    document is served at /openapi.json.

    Example:

        chatrecord serve --port 8765
    """
    from adapters.http.server import run, start

    backend = start(host, no_auth)
    say(f"chatrecord serve: {backend} on http://{host}:{port} "
        f"({'no authentication' if no_auth else 'bearer token required'})")
    run(host, port, workers, access_log)


def main() -> None:
    """Runs the command line; a user's mistake ends as one line `error: …` and exit status 1.

    So does a database error that a setting or another process caused (`store_problem`); any
    other database error is a bug and keeps its traceback.
    """
    try:
        app()
    except ChatrecordError as error:
        warn(f"error: {error}")
        sys.exit(1)
    except (PersistenceError, sqlite3.Error, psycopg.Error) as error:
        problem = store_problem(error)
        if problem is None:
            raise
        warn(f"error: {problem}")
        sys.exit(1)


if __name__ == "__main__":
    main()
