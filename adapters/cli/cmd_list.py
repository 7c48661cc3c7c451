"""`chatrecord list`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from adapters.api import LIST_LIMIT_MAX, BadCursor, decode_cursor, iso, parse_at
from adapters.cli.app import JsonOption, app, opened, print_json, say
from adapters.cli.render import visible
from adapters.cli.stdio import require_store

COLUMNS = ("conversation", "kind", "messages", "segments", "events", "first activity", "last activity", "erased")


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_at(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def _cursor(value: str | None) -> str | None:
    """Checks `--cursor` as `--since` is checked: a value that is no cursor is wrong usage (exit 2)."""
    if value is not None:
        try:
            decode_cursor(value)
        except BadCursor as error:
            raise typer.BadParameter(str(error)) from None
    return value


@app.command(name="list")
def list_(
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only conversations active at or after this time (ISO-8601, e.g. 2026-10-28T09:00:00Z)."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=LIST_LIMIT_MAX, help="At most this many a page.")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The next page: the cursor the page before printed.", callback=_cursor)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Lists the store's conversations, newest activity first, a page at a time.

    Each with the id every command accepts (as the store keeps it), its kind, how many user
    messages it has (an edit's cut ones not counted), segments, events, first and last activity (UTC) and whether its texts were erased. The
    last line gives the cursor of the next page (--cursor); --json prints one object
    {"conversations": [...], "next_cursor": ...}.

    Example:

        chatrecord list --limit 20 --since 2026-10-01T00:00:00Z
    """
    at = _since(since)
    require_store()
    with opened(reading=True) as chatrecord:
        page = chatrecord.conversations(limit, cursor, at)
    if as_json:
        print_json(page.to_json())
        return
    if not page.conversations:
        say("no conversations" + (" since " + iso(at) if at else "") + (" after this cursor" if cursor else ""))
    else:
        rows = [COLUMNS] + [
            (
                c.conversation,
                c.kind,
                str(c.messages),
                str(c.segments),
                str(c.events),
                iso(c.first_at.replace(microsecond=0)),  # whole seconds, as the chat's times (an erasure's has more)
                iso(c.last_at.replace(microsecond=0)),
                "erased" if c.erased else "",
            )
            for c in page.conversations
        ]
        widths = [max(len(visible(row[i])) for row in rows) for i in range(len(COLUMNS))]
        for row in rows:  # plain columns, never cut: the id is what the next command takes
            cells = [
                visible(v).rjust(w) if i in (2, 3, 4) else visible(v).ljust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ]
            say("  ".join(cells).rstrip())
    if page.cursor:
        say(
            f"more: chatrecord list --cursor {page.cursor}"
            + (f" --limit {limit}" if limit != 50 else "")
            + (f" --since {since}" if since else "")
        )
