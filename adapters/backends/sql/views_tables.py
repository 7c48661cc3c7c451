"""The row tables of one generation, described once (`ROW_TABLES`): names, columns, keys and upsert columns.

The CREATE statements and the Python and JSON-array writes are built from it. The PL/pgSQL append is
tested against it (`tests/unit/test_view_columns.py`). A generation `g` owns `views_g<g>_*`: `heads`
(summaries as JSON with their version; the stored name), `entries`, `outcomes`, `messages` (by index,
with number and block end), `pages`, `turns`, the list (`LISTING`), the usage audit's (`USAGE`) and the overview's two. Bodies are
pydantic JSON; keys are indexed columns. A new row column is added here and in its fold."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from adapters.views.row_tables import OVERVIEW_TABLES, TABLES


@dataclass(frozen=True)
class Column:
    """A column of a row table: its name, its type (`BIGINT` or `TEXT`) and whether it may be NULL."""

    name: str
    type: str
    null: bool = False


@dataclass(frozen=True)
class RowTable:
    """One row table: its columns and key after `cid`, and the columns an upsert replaces. `()`: a second
    row of a key is ignored; None: insert only."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    replaces: tuple[str, ...] | None

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """The column names after `cid` (made once: every append's flush asks for them)."""
        return tuple(c.name for c in self.columns)

    def conflict(self, columns: tuple[str, ...] | None = None) -> str:
        """The ON CONFLICT clause of an insert of `columns` (default: all), replacing those of `replaces` it
        names."""
        if self.replaces is None:
            return ""
        keys = ", ".join(("cid", *self.key))
        named = self.names if columns is None else columns
        replaced = [c for c in self.replaces if c in named]
        if not replaced:
            return f"ON CONFLICT ({keys}) DO NOTHING"
        return f"ON CONFLICT ({keys}) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in replaced)


BIG, TEXT = "BIGINT", "TEXT"

ROW_TABLES = {
    t.name: t
    for t in (
        RowTable("heads", (Column("version", BIG), Column("body", TEXT)), (), ("version", "body")),
        RowTable("entries", (Column("seq", BIG), Column("segment", TEXT), Column("body", TEXT)), ("seq",), ("body",)),
        RowTable(
            "outcomes",
            (Column("v", BIG), Column("sub", BIG), Column("card", TEXT, True), Column("after", BIG), Column("body", TEXT)),
            ("v", "sub"),
            None,
        ),
        RowTable(
            "messages",
            (
                Column("idx", BIG),
                Column("role", TEXT),
                Column("number", BIG, True),
                Column("block_end", BIG, True),
                Column("body", TEXT),
            ),
            ("idx",),
            ("role", "number", "block_end", "body"),
        ),
        RowTable("pages", (Column("message", BIG), Column("page", BIG)), ("message",), ("page",)),
        RowTable("turns", (Column("version", BIG), Column("message", BIG), Column("at", TEXT)), ("version",), ()),
    )
}
"""Every row table of a generation, by name (the order of `TABLES`)."""

assert tuple(ROW_TABLES) == TABLES

LISTING = RowTable(
    "listing",
    (
        Column("at", BIG, True),
        Column("conversation", TEXT),
        Column("owner", BIG, True),
        Column("users", BIG, True),
        Column("failed", BIG, True),
        Column("waiting", BIG),
        Column("undecided", BIG, True),
        Column("erased", BIG),
    ),
    (),
    ("at", "conversation", "owner", "users", "failed", "waiting", "undecided", "erased"),
)
"""The list's table of a generation (`views_g<N>_listing`): one narrow row per conversation
with what `chatrecord list` orders, filters and shows it by, written from its summary whenever the
summary is (`adapters.views.listing.listing_values`): `at` the chat's time of its last activity
(`Summary.last_at`, microseconds), `conversation` its stored id, `owner`, `users` (live user
messages), `failed` (segments recorded failed), `waiting` (cards and questions waiting),
`undecided` (left undecided), `erased` (1 once its erasure was recorded). Indexed by
`(at, cid)` and `(owner, at, cid)`. Kept apart from the summaries so that a summary's update (every
append) changes no indexed column and stays a HOT update on PostgreSQL. Not in `ROW_TABLES`:
a generation an earlier version made has none (`SQLViewStorage.has_activity`), and its rows
are written only where the table exists."""

USAGE_IDENTITY = ("seq", "at", "day", "conversation", "owner")
"""The usage table's columns that say which segment a row is; every other column is a count summed."""
_USAGE_COLUMNS = (
    Column("seq", BIG),
    Column("at", BIG),
    Column("day", TEXT),
    Column("conversation", TEXT),
    Column("owner", BIG, True),
    Column("duration_us", BIG),
    Column("model_calls", BIG),
    Column("calls_without_usage", BIG),
    Column("calls_without_cost", BIG),
    Column("input_tokens", BIG, True),
    Column("output_tokens", BIG, True),
    Column("total_tokens", BIG, True),
    Column("cost", BIG, True),
    Column("tool_calls", BIG),
    Column("failed_calls", BIG),
    Column("refused_calls", BIG),
)
USAGE = RowTable("usage", _USAGE_COLUMNS, ("seq",), tuple(c.name for c in _USAGE_COLUMNS if c.name != "seq"))
"""The usage audit's table of a generation (`views_g<N>_usage`): one flat row per segment,
written by the row fold with the segment's entry (`projections.usage.UsageRow`,
`adapters.views.usage_rows.usage_values`): its version `seq`, the chat's time `at`
(microseconds) and its UTC `day` (`YYYY-MM-DD`), the conversation's stored id and owner, the
time in microseconds, the model calls (those that stated no token count, no cost), the tokens
and cost (1/`projections.usage.COST_UNIT`; NULL: no call stated any), the tool calls, failed and
refused. Indexed by `(at)`. Kept when an edit cuts the segment. Not in `ROW_TABLES`: a
generation an earlier version made has none (`SQLViewStorage.has_usage`), and its rows are
written only where the table exists."""

USAGE_SUMMED = tuple(c.name for c in USAGE.columns if c.name not in USAGE_IDENTITY)
"""The usage table's counts, which the usage audit sums (NULL where no row stated one, for the nullable)."""
ALL_ROW_TABLES = {**ROW_TABLES, LISTING.name: LISTING, USAGE.name: USAGE}
"""`ROW_TABLES`, the list's table and the usage table, by name."""

MESSAGE_COLUMNS = ("idx", "role", "number", "body")
"""The columns a new transcript message is written with: its block end is set apart (`end_block`)."""


def aside_cid(cid: str) -> str:
    """Returns the `cid` column's value of a conversation's entries set aside for its latest
    turn (`SQLRows.set_aside`)."""
    return f"{cid}:turn"


def table_names(generation: int, schema: str = "") -> dict[str, str]:
    """Returns the table names of `generation`: {"heads": "views_g<N>_heads", …}, qualified
    with `schema` (a PostgreSQL schema name) when given."""
    prefix = f'"{schema}".' if schema else ""
    return {t: f"{prefix}views_g{generation}_{t}" for t in TABLES}


def overview_table_names(generation: int, schema: str = "") -> dict[str, str]:
    """Returns {"overview": "views_g<N>_overview", "overview_marks": …}, qualified with
    `schema` (a PostgreSQL schema name) when given."""
    prefix = f'"{schema}".' if schema else ""
    return {t: f"{prefix}views_g{generation}_{t}" for t in OVERVIEW_TABLES}


def overview_statements(generation: int, schema: str = "") -> list[str]:
    """Returns the CREATE statements of a generation's `overview` and `overview_marks` tables."""
    n = overview_table_names(generation, schema)
    return [
        f"CREATE TABLE IF NOT EXISTS {n['overview']} (cid TEXT PRIMARY KEY, version BIGINT NOT NULL, body TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {n['overview_marks']} (cid TEXT NOT NULL, mark TEXT NOT NULL, version BIGINT NOT NULL, "
        "kind TEXT NOT NULL, tone TEXT NOT NULL, PRIMARY KEY (cid, mark, version))",
    ]


def listing_name(generation: int, schema: str = "") -> str:
    """Returns the name of a generation's list table (`LISTING`), qualified with `schema` when given."""
    prefix = f'"{schema}".' if schema else ""
    return f"{prefix}views_g{generation}_listing"


def activity_index(generation: int) -> str:
    """Returns the name of the index of a generation's list table by last activity (unqualified)."""
    return f"views_g{generation}_listing_activity"


def listing_statements(generation: int, schema: str = "") -> list[str]:
    """Returns the CREATE statements of the list table (`LISTING`) and its indexes: (last activity, `cid`)
    and (owner, last activity, `cid`)."""
    name, bare = listing_name(generation, schema), listing_name(generation)
    return [
        create_table(LISTING, name),
        f"CREATE INDEX IF NOT EXISTS {activity_index(generation)} ON {name} (at, cid)",
        f"CREATE INDEX IF NOT EXISTS {bare}_owner ON {name} (owner, at, cid)",
    ]


def usage_name(generation: int, schema: str = "") -> str:
    """Returns the name of a generation's usage table (`USAGE`), qualified with `schema` when given."""
    prefix = f'"{schema}".' if schema else ""
    return f"{prefix}views_g{generation}_usage"


def usage_statements(generation: int, schema: str = "") -> list[str]:
    """Returns the CREATE statements of a generation's usage table (`USAGE`) and its index by time."""
    name, bare = usage_name(generation, schema), usage_name(generation)
    return [create_table(USAGE, name), f"CREATE INDEX IF NOT EXISTS {bare}_at ON {name} (at)"]


def create_table(table: RowTable, name: str, storage: str = "") -> str:
    """Returns the CREATE statement of `table` named `name`; `storage` follows its columns."""
    columns = ", ".join(f"{c.name} {c.type}{'' if c.null else ' NOT NULL'}" for c in table.columns)
    if table.key:
        return f"CREATE TABLE IF NOT EXISTS {name} (cid TEXT NOT NULL, {columns}, PRIMARY KEY ({', '.join(('cid', *table.key))})){storage}"
    return f"CREATE TABLE IF NOT EXISTS {name} (cid TEXT PRIMARY KEY, {columns}){storage}"


def create_statements(generation: int, schema: str = "", summaries_storage: str = "") -> list[str]:
    """Returns the CREATE statements of a generation's tables (`ROW_TABLES`, `LISTING`, `USAGE`, the overview's). `summaries_storage` follows the summaries
    table's columns (PostgreSQL's `WITH (fillfactor = …)`). Summaries are indexed by key only."""
    n, bare = table_names(generation, schema), table_names(generation)
    return [
        create_table(ROW_TABLES["heads"], n["heads"], summaries_storage),
        *listing_statements(generation, schema),
        create_table(ROW_TABLES["entries"], n["entries"]),
        f"CREATE INDEX IF NOT EXISTS {bare['entries']}_segment ON {n['entries']} (cid, segment)",
        create_table(ROW_TABLES["outcomes"], n["outcomes"]),
        create_table(ROW_TABLES["messages"], n["messages"]),
        f"CREATE INDEX IF NOT EXISTS {bare['messages']}_number_idx ON {n['messages']} (cid, number, idx)",
        create_table(ROW_TABLES["pages"], n["pages"]),
        create_table(ROW_TABLES["turns"], n["turns"]),
        *usage_statements(generation, schema),
        *overview_statements(generation, schema),
    ]
