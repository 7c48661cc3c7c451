"""The append as one statement: the PL/pgSQL append functions and the document they take. `AppendDocument`
stands in for the append's cursor and gathers its writes as data: the assumption check, the history index
rows, the view rows, the events and their chain rows. They go as one JSON document to `APPEND_FUNCTION`,
or a generation's own (`generation_function_name`). `Unfit` says a document cannot carry the append; it
is then sent as statements."""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources
from typing import Any
from uuid import UUID

import orjson
import psycopg
import psycopg.errors
from psycopg.rows import tuple_row
from psycopg.sql import Composable
from psycopg.types.json import Jsonb

from adapters.backends.postgres.prepared import run_prepared
from adapters.backends.sql.views_statements import json_insert
from adapters.backends.sql.views_tables import (
    LISTING,
    MESSAGE_COLUMNS,
    ROW_TABLES,
    USAGE,
    listing_name,
    table_names,
    usage_name,
)

APPEND_FUNCTION = "chatrecord_append_v10"
"""The store's own database function that writes a whole append from one JSON document
(`AppendDocument`) that holds no view rows: versioned by name, so a later layout gets a
function of its own. An append with view rows goes to its generation's function
(`generation_function_name`), the same body with the view rows written into that
generation's tables. (A generation's function is v12: it also writes the document's `usage`
rows, one per segment, into the generation's usage table, `views_g<N>_usage`; v11 wrote the
document's `listing` row into the generation's list table, `views_g<N>_listing`; the store's own stays v10. v10: the function sends the library's NOTIFY on the events table's
channel, on which the library's `subscribe` waits, and checks that each first link of the
document (`starts`: a conversation's event at version 0 or 1 linked to GENESIS) starts the
chain, raising `CHAIN_START` where it does not; v9: an assumed index's check also counts the
live segments from a message and the live messages after a number that the writer answered from what it knows, so an edit
and a replaced transcript decide without reading the index, and a generation's function takes
an edit's cuts of card outcomes and view context; v8: a generation's function also deletes the stored transcript
messages from the document's `cut` on, before it writes the section's messages, so a replaced
transcript's writes are one statement; v7: the known segment records and live messages an assumption took
are checked, and a generation's function sets entries aside for the latest turn; v6: a failed
assumption raises `ASSUMPTION_FAILED`; v5 raised division_by_zero, 22012.)"""

ASSUMPTION_FAILED = "RC001"
"""The SQLSTATE with which the store's SQL raises a failed assumption (`AssumptionFailed`):
class RC is chatrecord's own. SQL leaves the classes beginning with 5 to 9 or I to Z to the
implementation, and PostgreSQL uses none beginning with R, so no statement of the server
raises it; `EventRecorder` decodes it by this code alone."""
CHAIN_START = "RC002"
"""The SQLSTATE with which the append function refuses a document whose first link does not
start its conversation's chain (`ChainedRecorder._chain_start`): the append is then sent as
statements, which link it or refuse it."""
ASSUMPTION_MESSAGE = "chatrecord: the index is not as the command assumed"
"""The MESSAGE raised with `ASSUMPTION_FAILED`."""
ASSUMPTION_FUNCTION = "chatrecord_assumption_failed_v1"
"""The store's database function that raises `ASSUMPTION_FAILED` (`assumption_function_statement`),
for the check of an assumed index sent as a statement (`PostgresHistoryTables._append_write`):
plain SQL cannot raise an error of its own."""


def _template(name: str) -> str:
    """Returns the SQL template `name` of this package (its leading `--` comment lines left out)."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "".join(lines)


_APPEND_FUNCTION_SQL = _template("append_function.sql")
"""The append function's CREATE statement (`append_function.sql`): {schema}, {name}, {events}, {views}."""
_NO_VIEWS_SQL = _template("append_no_views.sql")
"""Its {views} part where no views' generation is written (`append_no_views.sql`)."""
_VIEWS_SQL = _template("append_views.sql")
"""Its {views} part for one generation (`append_views.sql`): {generation} and the generation's table names."""
_ASSUMPTION_SQL = _template("assumption_failed.sql")
"""`ASSUMPTION_FUNCTION`'s CREATE statement (`assumption_failed.sql`): {schema}, {name}."""


def _channel(events_table: str) -> str:
    """Returns, quoted, the NOTIFY/LISTEN channel of `events_table`'s library recorder: the table's name
    with dots as underscores."""
    return '"' + events_table.replace(".", "_").replace('"', '""') + '"'


def generation_function_name(generation: int) -> str:
    """Returns the name of generation `generation`'s append function (`generation_function_statement`)."""
    return f"chatrecord_append_g{generation}_v12"


OLD_GENERATION_FUNCTIONS = (
    "chatrecord_append_g{generation}_v11",
    "chatrecord_append_g{generation}_v10",
    "chatrecord_append_g{generation}_v9",
    "chatrecord_append_g{generation}_v8",
    "chatrecord_append_g{generation}_v7",
    "chatrecord_append_g{generation}_v6",
    "chatrecord_append_g{generation}_v5",
)
"""The names of a generation's append function of the versions before (jsonb); dropped with its
generation's tables."""
OLD_VIEWS_FUNCTION = "chatrecord_views_g{generation}_v3"
"""The name of a generation's views function of an earlier version (text, jsonb), which the
append function called; dropped with its generation's tables."""


def view_inserts(t: dict[str, str]) -> dict[str, str]:
    """Returns the append function's inserts of view rows (`append_views.sql`'s {insert_…}), built with
    `json_insert` as the Python writes are. `ended`: transcript messages with their block end.
    `aside_rows`: entries set aside under `k || ':turn'`, not upserted."""
    names = {table: ROW_TABLES[table].names for table in ROW_TABLES}

    def rows(table: str, section: str, columns: tuple[str, ...], cid: str = "k", upsert: bool = True) -> str:
        return json_insert(table, t[table], columns, cid, f"v->'{section}'", upsert)

    return {
        "insert_aside_rows": rows("entries", "aside_rows", names["entries"], "k || ':turn'", upsert=False),
        "insert_entries": rows("entries", "entries", names["entries"]),
        "insert_outcomes": rows("outcomes", "outcomes", names["outcomes"]),
        "insert_messages": rows("messages", "messages", MESSAGE_COLUMNS),
        "insert_ended": rows("messages", "ended", names["messages"]),
        "insert_pages": rows("pages", "pages", names["pages"]),
        "insert_turns": rows("turns", "turns", names["turns"]),
        "insert_listing": json_insert(LISTING.name, t[LISTING.name], LISTING.names, "k", "v->'listing'"),
        "insert_usage": json_insert(USAGE.name, t[USAGE.name], USAGE.names, "k", "v->'usage'"),
    }


def generation_function_statement(schema: str, events_table: str, generation: int) -> str:
    """Returns the CREATE OR REPLACE FUNCTION statement of `generation`'s append function. It is
    `APPEND_FUNCTION`'s body plus the views' shared lock and static writes of the `views` section, which
    must name `generation`. Each updated or deleted row is found by its whole key, so a kept plan never
    scans a transcript (figure: docs/benchmarks.md, "Figures moved from docstrings"). Made at the
    generation's first append; dropped with its tables."""
    t = {
        **table_names(generation, schema),
        LISTING.name: listing_name(generation, schema),
        USAGE.name: usage_name(generation, schema),
    }
    views = _VIEWS_SQL.format(generation=int(generation), **t, **view_inserts(t))
    return _APPEND_FUNCTION_SQL.format(
        schema=f'"{schema}"',
        name=generation_function_name(generation),
        events=f'"{schema}"."{events_table}"',
        channel=_channel(events_table),
        views=views,
    )


def append_function_statement(schema: str, events_table: str) -> str:
    """Returns the CREATE OR REPLACE FUNCTION statement of `APPEND_FUNCTION` in `schema`.

    The function takes `AppendDocument`'s jsonb and runs in the caller's transaction, sequential scans
    off. It checks an assumed index, raising `ASSUMPTION_FAILED` with `ASSUMPTION_MESSAGE`. It writes the
    index rows, takes the events table's write lock and sends the library's NOTIFY. It inserts the
    events, returning their notification ids in order, and their chain rows. An empty list costs no
    statement. A document with view rows goes to its generation's function instead."""
    return _APPEND_FUNCTION_SQL.format(
        schema=f'"{schema}"',
        name=APPEND_FUNCTION,
        events=f'"{schema}"."{events_table}"',
        channel=_channel(events_table),
        views=_NO_VIEWS_SQL,
    )


def assumption_function_statement(schema: str) -> str:
    """Returns the CREATE OR REPLACE FUNCTION statement of `ASSUMPTION_FUNCTION` in `schema`. It takes no
    arguments, returns an integer and always raises `ASSUMPTION_FAILED` with `ASSUMPTION_MESSAGE`. It is
    VOLATILE, so the planner never calls it ahead of its CASE branch."""
    return _ASSUMPTION_SQL.format(schema=f'"{schema}"', name=ASSUMPTION_FUNCTION)


class Unfit(Exception):  # not an error: the append is sent another way
    """Raised when an append holds a statement `AppendDocument` cannot carry: an unknown write, or a read of
    a table the append writes."""


_WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE|LOCK|CREATE|DROP|ALTER|TRUNCATE)\b", re.IGNORECASE)


class AppendDocument:
    """Stands in for an append's cursor and gathers its writes as data.

    It holds the assumed index, the index rows, the view rows (`PostgresBufferedRows`), the events and
    their chain rows. `call(function)` sends them as one JSON document in one statement, its own
    transaction. A read runs at once where it reads no table the document writes; the events' version
    catches any writer in between. Any other statement raises Unfit; the append then goes as statements
    (`_append_synced`)."""

    def __init__(self, conn: psycopg.Connection[Any], cid: str, lock: int) -> None:
        self._conn = conn
        self._lock = lock
        self.doc: dict[str, Any] = {"cid": cid}
        self.conversation: UUID | None = None
        """The conversation whose part of a batch this document carries (`inline(cursor)`
        writes only its rows here), None for the append of one conversation."""
        self._pending: tuple[Any, Any] | None = None
        self._written: set[str] = set()

    def put(self, section: str, value: Any, tables: Iterable[str] = ()) -> None:
        """Sets the document's `section` (`assumed`, `index`, `views`, `events`, `chain`) to
        `value`, noting the `tables` it writes."""
        self.doc[section] = value
        self._written.update(tables)

    def views(self, generation: int) -> dict[str, Any]:
        """Returns the document's views section for `generation`, made on the first call.

        It holds rows per kind (`usage`: the segments' usage rows), the summary (key `head`) and the lock key. Deleted before the section's
        rows are written (None: nothing):
        - `cut`: stored messages from this transcript index on;
        - `drop_outcomes` ({"cards": [...], "after": n}): those cards' outcomes and card-less ones at or
          after index n;
        - `drop_pages`: page changes after this message number."""
        views = self.doc.get("views")
        if views is None:
            views = self.doc["views"] = {
                "g": generation,
                "lock": self._lock,
                "drop_aside": False,
                "aside": [],
                "aside_rows": [],
                "delete_entries": [],
                "entries": [],
                "cut": None,
                "drop_outcomes": None,
                "drop_pages": None,
                "outcomes": [],
                "messages": [],
                "ended": [],
                "ends": [],
                "pages": [],
                "turns": [],
                "usage": [],
                "head": None,
            }
            self._written.add(f"views_g{generation}_")
        elif views["g"] != generation:
            raise Unfit("two generations' views in one append")
        return views

    def execute(self, query: Any, params: Any = None, **_: Any) -> AppendDocument:
        if self._pending is not None:
            raise Unfit("a statement that is not a read")
        self._pending = (query, params)
        return self

    def executemany(self, query: Any, params_seq: Any, **_: Any) -> None:
        raise Unfit("executemany")

    def _read(self) -> list[Any]:
        if self._pending is None:
            raise Unfit("a fetch without a statement")
        (query, params), self._pending = self._pending, None
        text = query.as_string(self._conn) if isinstance(query, Composable) else str(query)
        if (
            not text.lstrip().upper().startswith(("SELECT", "WITH"))
            or _WRITES.search(text)
            or any(table in text for table in self._written)
        ):
            raise Unfit("a read that is no plain read, or of a table the append writes")
        with self._conn.cursor() as curs:  # autocommit: before the append's own transaction
            curs.execute(query, params)
            return curs.fetchall()

    def fetchone(self) -> Any:
        rows = self._read()
        return rows[0] if rows else None

    def fetchall(self) -> list[Any]:
        return self._read()

    def call(self, function: str) -> list[int]:
        """Sends the document to `function` (schema-qualified); returns its events' notification ids. Raises
        Unfit when a statement was left unread. Raises psycopg's errors as the server raised them;
        nothing is stored then."""
        if self._pending is not None:
            raise Unfit("a statement that is not a read")
        with self._conn.cursor(row_factory=tuple_row) as curs:  # prepared: parsed and planned once per connection
            # sent as orjson's UTF-8 bytes (psycopg's Jsonb takes them as they are): not decoded into
            # a str here for psycopg to encode back
            run_prepared(curs, f"SELECT n FROM {function}(%s::jsonb) AS n", (Jsonb(self.doc, orjson.dumps),))
            return [row[0] for row in curs.fetchall()]
