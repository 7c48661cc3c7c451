"""`chatrecord rebuild`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from adapters.api import MOST_WORKERS, RebuildInterrupted
from adapters.cli.app import app, emit, err, opened, print_json, rules_option, say, warn
from adapters.cli.interrupts import INTERRUPTED, Interrupts, RebuildLines
from adapters.cli.render import diff_view
from adapters.cli.stdio import (
    diff_json,
    rebuild_json,
    require_store,
)
from projections.rules import DEFAULT_RULE_SET, Rules


@app.command()
def rebuild(
    rules: Annotated[Rules, rules_option("The rule set to rebuild under.")] = Rules(DEFAULT_RULE_SET),
    diff: Annotated[bool, typer.Option("--diff", help="Only show what would change; switch nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report (or the diff) as one JSON object.")] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=MOST_WORKERS,
            help="Processes that fold the log, each its own conversations (PostgreSQL only; "
            "default: one per CPU, up to 4, for a log of 10,000 events or more).",
        ),
    ] = None,
) -> None:
    """Rebuilds the read models under a rule set and reports what changed.

    Every conversation's log is read again under the rule set into new tables, which then
    replace the old ones. --diff prints, per conversation, which run record entries and notes
    would change, without switching. --json prints the report or the diff as one JSON object.
    On PostgreSQL a long log is folded in one process per CPU (--workers sets how many).
    A conversation whose log cannot be read or folded to the end is named with its error, the
    others are rebuilt, and the exit status is 1.
    Progress goes to stderr (a bar on a terminal, else a line every 5 seconds); Ctrl-C (or
    SIGTERM) drops the half-built tables, says so and exits with 130, the live read models
    as they were.

    Example:

        chatrecord rebuild --rules 2026-11-01 --diff
    """
    if diff:
        require_store()
    with opened(reading=diff) as chatrecord:
        if diff:
            changed = chatrecord.diff(rules.value)
            live = chatrecord.active_rules(after=chatrecord.position())  # where diff read: the primary
            if as_json:
                print_json(diff_json(live, rules.value, changed))
                return
            say(
                f"{live} → {rules.value}: {len(changed)} "
                f"conversation{'' if len(changed) == 1 else 's'} would change (nothing switched)"
            )
            for conversation_diff in changed:
                emit(diff_view(conversation_diff))
            return
        with (
            Progress(
                TextColumn("rebuilding"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("events"),
                TimeElapsedColumn(),
                console=err,
                transient=True,
                disable=not err.is_terminal,
            ) as progress,
            Interrupts() as interrupts,
        ):
            task = progress.add_task("rebuild", total=None)
            lines = RebuildLines()

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)
                if not err.is_terminal:
                    lines(done, total)

            try:
                report = chatrecord.rebuild(rules.value, advance, workers=workers, guard=interrupts.held)
            except RebuildInterrupted as stopped:
                warn(f"interrupted: {stopped}")
                raise typer.Exit(INTERRUPTED) from None
        unreadable = [chatrecord.conversation_id(key) for key in report.unreadable]  # as verify names them
    if as_json:
        print_json(rebuild_json(report, unreadable))
        if report.unreadable:
            raise typer.Exit(1)
        return
    say(
        f"rebuilt under {report.rules} (was {report.old_rules}): {report.conversations} "
        f"conversation{'' if report.conversations == 1 else 's'}, {report.events} event{'' if report.events == 1 else 's'}"
        + (f" (folded in {report.workers} processes)" if report.workers > 1 else "")
    )
    if report.unreadable:
        n = len(report.unreadable)
        warn(
            f"{n} conversation{'' if n == 1 else 's'} could not be read to the end, and {'its' if n == 1 else 'their'} "
            f"read models stop before the event that failed (every other conversation was rebuilt): "
            f"{', '.join(unreadable)}; run: chatrecord verify"
        )
        for name, reason in zip(unreadable, report.reasons or ("",) * n, strict=True):
            warn(f"{name}: {reason}" if reason else name)
        raise typer.Exit(1)
