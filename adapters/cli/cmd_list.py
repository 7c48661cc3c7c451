"""`chatrecord list`."""

from __future__ import annotations

import shlex
from datetime import datetime
from typing import Annotated

import typer

from adapters.api import LIST_LIMIT_MAX, STATUSES, BadCursor, decode_cursor, iso, parse_at
from adapters.cli.app import JsonOption, app, opened, print_json, say
from adapters.cli.render import visible
from adapters.cli.stdio import require_store
from domain.limits import INT_MAX

COLUMNS = (
    "conversation",
    "kind",
    "owner",
    "messages",
    "segments",
    "events",
    "first activity",
    "last activity",
    "erased",
    "status",
)
NUMBERS = (2, 3, 4, 5)
"""The columns aligned right."""


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_at(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def _statuses(values: list[str] | None) -> list[str] | None:
    """Checks each `--status` (comma-separated lists too) against STATUSES; a wrong one is wrong usage (exit 2)."""
    found = [part.strip() for value in values or [] for part in value.split(",") if part.strip()]
    wrong = [s for s in found if s not in STATUSES]
    if wrong:
        raise typer.BadParameter(f"{wrong[0]!r} is none of {', '.join(STATUSES)}")
    return found


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
    until: Annotated[
        str | None,
        typer.Option("--until", help="Only conversations last active before this time (ISO-8601)."),
    ] = None,
    owner: Annotated[
        int | None, typer.Option("--owner", min=0, max=INT_MAX, help="Only the conversations of this owner (user id).")
    ] = None,
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            help=f"Only conversations with this status; repeat it (or separate by commas) for any of several: {', '.join(STATUSES)}.",
            callback=_statuses,
        ),
    ] = None,
    search: Annotated[
        str | None, typer.Option("--search", help="Only conversations whose id contains this text (letters in either case).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=LIST_LIMIT_MAX, help="At most this many a page.")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The next page: the cursor the page before printed.", callback=_cursor)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Lists the store's conversations, newest activity first (the chat's time), a page at a time.

    Each with the id every command accepts (as the store keeps it), its kind, owner, how many
    user messages it has (an edit's cut ones not counted), segments, events, first and last
    activity (UTC), whether its texts were erased, and its status: failed (a segment recorded
    failed), waiting (a card or question waits), undecided (one was left undecided), erased (its
    erasure recorded), broken (a break of its chain is stored). --owner, --since, --until,
    --search (a part of the id) and --status filter the list (--status: any of those given;
    verified and unchecked name a chain with a stored verified position, or none). The last
    line gives the cursor of the next page (--cursor, with the same filters); --json prints one
    object {"conversations": [...], "next_cursor": ...}.

    Example:

        chatrecord list --search demo --status failed
    """
    at, before = _since(since), _since(until)
    if at is not None and before is not None and before <= at:
        raise typer.BadParameter(f"--until ({until}) must be after --since ({since})")
    statuses = tuple(status or ())
    require_store()
    with opened(reading=True) as chatrecord:
        page = chatrecord.conversations(limit, cursor, at, until=before, owner=owner, search=search, status=statuses)
    if as_json:
        print_json(page.to_json())
        return
    filtered = before is not None or owner is not None or bool(search) or bool(statuses)  # --since is said apart
    if not page.conversations:
        say(
            ("no conversations" + (" that match" if filtered else ""))
            + (" since " + iso(at) if at else "")
            + (" after this cursor" if cursor else "")
        )
    else:
        rows = [COLUMNS] + [
            (
                c.conversation,
                c.kind,
                "" if c.owner is None else str(c.owner),
                str(c.messages),
                str(c.segments),
                str(c.events),
                iso(c.first_at.replace(microsecond=0)),  # whole seconds, as the chat's times (an erasure's has more)
                iso(c.last_at.replace(microsecond=0)),
                "erased" if c.erased else "",
                ",".join(c.status),
            )
            for c in page.conversations
        ]
        widths = [max(len(visible(row[i])) for row in rows) for i in range(len(COLUMNS))]
        for row in rows:  # plain columns, never cut: the id is what the next command takes
            cells = [
                visible(v).rjust(w) if i in NUMBERS else visible(v).ljust(w)
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ]
            say("  ".join(cells).rstrip())
    if page.cursor:
        again = [
            *([f"--limit {limit}"] if limit != 50 else []),
            *([f"--since {since}"] if since else []),
            *([f"--until {until}"] if until else []),
            *([f"--owner {owner}"] if owner is not None else []),
            *([f"--search {shlex.quote(search)}"] if search else []),
            *([f"--status {','.join(statuses)}"] if statuses else []),
        ]
        say(f"more: chatrecord list --cursor {page.cursor}" + "".join(" " + a for a in again))
