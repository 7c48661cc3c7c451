"""`chatrecord usage`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from adapters.api import BY, USAGE_LIMIT_MAX, BadUsageCursor, By, Usage, decode_usage_cursor, iso, parse_at
from adapters.cli.app import JsonOption, app, opened, print_json, say
from adapters.cli.render import visible
from adapters.cli.stdio import require_store


def _grouping(value: Any) -> str:
    """Returns the grouping `--by` names (`BY`); any other value is wrong usage (exit 2)."""
    if value not in BY:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, BY))}.")
    return str(value)


COLUMNS = ("segments", "time", "model calls", "tokens in", "tokens out", "cost", "tool calls", "failed", "refused")


def _at(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_at(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def _count(value: int | None, unknown: int) -> str:
    """A sum as the table shows it: `unknown` where no call stated it, `+N?` where N calls did not."""
    if value is None:
        return "unknown" if unknown else "-"
    return f"{value:,}" + (f" +{unknown}?" if unknown else "")


def _cost(value: float | None, unknown: int) -> str:
    if value is None:
        return "unknown" if unknown else "-"
    return f"{value:.6g}" + (f" +{unknown}?" if unknown else "")


def _row(label: str, u: Usage) -> tuple[str, ...]:
    return (
        label,
        f"{u.segments:,}",
        f"{u.duration_ms / 1000:,.1f} s",
        f"{u.model_calls:,}",
        _count(u.input_tokens, u.calls_without_usage),
        _count(u.output_tokens, u.calls_without_usage),
        _cost(u.cost, u.calls_without_cost),
        f"{u.tool_calls:,}",
        f"{u.failed_calls:,}",
        f"{u.refused_calls:,}",
    )


@app.command()
def usage(
    by: Annotated[
        str,
        typer.Option(
            "--by", help="Sum per conversation, per owner or per day (UTC).", parser=_grouping, metavar="[conversation|owner|day]"
        ),
    ] = "conversation",
    since: Annotated[
        str | None, typer.Option("--since", help="Only segments at or after this time (ISO-8601, the chat's time).")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only segments before this time (ISO-8601).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=USAGE_LIMIT_MAX, help="At most this many groups a page.")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The next page: the cursor the page before printed (it keeps its --by).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Sums what the segments used: tokens in and out, estimated cost, model calls, tool calls,
    failed and refused calls (held, declined, no longer permitted) and time, per conversation,
    per owner or per day, a page of groups at a time, with the total of the range first.

    It reads the flat usage rows kept with each segment as it was stored, never a conversation's
    log. Segments an edit cut are counted: they ran. A sum no model call stated reads unknown; a
    sum some calls did not state ends in +N? (N calls without it). Conversations are listed by
    id, owners by id (unknown first), days newest first. The last line gives the cursor of the
    next page (--cursor, which carries its --by, with the same --since and --until); --json prints one object
    {"by", "since", "until", "total": {"key": null, ...}, "groups": [{"key", ...}], "next_cursor"}.

    Example:

        chatrecord usage --by day --since 2026-10-01T00:00:00Z
    """
    grouping: By = by  # type: ignore[assignment]  # `_grouping` checked it
    at, before = _at(since), _at(until)
    if at is not None and before is not None and before <= at:
        raise typer.BadParameter(f"--until ({until}) must be after --since ({since})")
    if cursor is not None:
        try:
            grouping = decode_usage_cursor(cursor)[0]  # a cursor carries its grouping
        except BadUsageCursor as error:
            raise typer.BadParameter(str(error), param_hint="'--cursor'") from None
    require_store()
    with opened(reading=True) as chatrecord:
        page = chatrecord.usage(grouping, at, before, limit, cursor)
    if as_json:
        print_json(page.to_json())
        return
    if not page.total.segments:
        say("no segments" + (" since " + iso(at) if at else "") + (" before " + iso(before) if before else ""))
        return
    rows = [(grouping, *COLUMNS), _row("total", page.total)]
    for group in page.groups:
        label = "unknown" if group.key is None else str(group.key)
        rows.append(_row(label, group))
    widths = [max(len(visible(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:  # plain columns; the key first, as the next command takes it
        cells = [visible(v).ljust(w) if i == 0 else visible(v).rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True))]
        say("  ".join(cells).rstrip())
    if page.cursor:
        again = [
            *([f"--by {grouping}"] if grouping != "conversation" else []),
            *([f"--limit {limit}"] if limit != 50 else []),
            *([f"--since {since}"] if since else []),
            *([f"--until {until}"] if until else []),
        ]
        say(f"more: chatrecord usage --cursor {page.cursor}" + "".join(" " + a for a in again))
