"""The row tables of one generation of the read models: their names and CREATE statements.

A generation `g` owns six tables named `views_g<g>_<table>`: `heads` (one row per
conversation: its `projections.row_head.Head` as JSON and its version), `entries` (run record
entries kept, by version), `outcomes` (card outcomes, by the version and place of the event
that recorded them), `messages` (the transcript, by index, with the user message number and
where its block ends), `pages` (page changes) and `turns`; and the overview read model's two.
Bodies are pydantic JSON; keys are plain columns with indexes, so every read the fold or a
turn makes is an index lookup.
"""

from __future__ import annotations

TABLES = ("heads", "entries", "outcomes", "messages", "pages", "turns")


def aside_cid(cid: str) -> str:
    """Returns the `cid` column's value of a conversation's entries set aside for its latest
    turn (`SQLRows.set_aside`)."""
    return f"{cid}:turn"


def table_names(generation: int, schema: str = "") -> dict[str, str]:
    """Returns the table names of `generation`: {"heads": "views_g<N>_heads", …}, qualified
    with `schema` (a PostgreSQL schema name) when given."""
    prefix = f'"{schema}".' if schema else ""
    return {t: f"{prefix}views_g{generation}_{t}" for t in TABLES}


OVERVIEW_TABLES = ("overview", "overview_marks")
"""The overview read model's tables of a generation (`adapters.views.overview_rows`): not rows
the view fold writes, nor cleared with them; made with a generation's tables since the
overview read model came (an earlier generation has none)."""


def overview_table_names(generation: int, schema: str = "") -> dict[str, str]:
    """Returns {"overview": "views_g<N>_overview", "overview_marks": …}, qualified with
    `schema` (a PostgreSQL schema name) when given."""
    prefix = f'"{schema}".' if schema else ""
    return {t: f"{prefix}views_g{generation}_{t}" for t in OVERVIEW_TABLES}


def overview_statements(generation: int, schema: str = "") -> list[str]:
    """Returns the CREATE statements of a generation's overview tables: `overview` (one row
    per conversation: its version and the overview as JSON) and `overview_marks` (a row per
    segment's and user message's point: key, version, kind, tone)."""
    n = overview_table_names(generation, schema)
    return [
        f"CREATE TABLE IF NOT EXISTS {n['overview']} (cid TEXT PRIMARY KEY, version BIGINT NOT NULL, body TEXT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {n['overview_marks']} (cid TEXT NOT NULL, mark TEXT NOT NULL, version BIGINT NOT NULL, "
        "kind TEXT NOT NULL, tone TEXT NOT NULL, PRIMARY KEY (cid, mark, version))",
    ]


def activity_index(generation: int) -> str:
    """Returns the name of the index of a generation's heads by last activity (unqualified)."""
    return f"views_g{generation}_heads_activity"


def activity_statement(generation: int, schema: str, activity: str) -> str:
    """Returns the CREATE INDEX statement of the heads by last activity: `activity`, the
    backend's expression of a head body's `last_at` (`SQLViewStorage.activity`), then `cid`."""
    return (
        f"CREATE INDEX IF NOT EXISTS {activity_index(generation)} ON {table_names(generation, schema)['heads']} ({activity}, cid)"
    )


def create_statements(generation: int, schema: str = "", heads_storage: str = "", activity: str = "") -> list[str]:
    """Returns the CREATE statements of a generation's tables; `heads_storage` follows the
    heads table's columns (PostgreSQL's `WITH (fillfactor = …)`, `SQLViewStorage.heads_storage`);
    with `activity` (an expression of a head body's `last_at`), the heads' index by it."""
    n, big = table_names(generation, schema), "BIGINT"
    bare = table_names(generation)
    return [
        f"CREATE TABLE IF NOT EXISTS {n['heads']} (cid TEXT PRIMARY KEY, version {big} NOT NULL, body TEXT NOT NULL)"
        f"{heads_storage}",
        *([activity_statement(generation, schema, activity)] if activity else []),
        f"CREATE TABLE IF NOT EXISTS {n['entries']} (cid TEXT NOT NULL, seq {big} NOT NULL, segment TEXT NOT NULL, "
        f"body TEXT NOT NULL, PRIMARY KEY (cid, seq))",
        f"CREATE INDEX IF NOT EXISTS {bare['entries']}_segment ON {n['entries']} (cid, segment)",
        f"CREATE TABLE IF NOT EXISTS {n['outcomes']} (cid TEXT NOT NULL, v {big} NOT NULL, sub {big} NOT NULL, "
        f"card TEXT, after {big} NOT NULL, body TEXT NOT NULL, PRIMARY KEY (cid, v, sub))",
        f"CREATE TABLE IF NOT EXISTS {n['messages']} (cid TEXT NOT NULL, idx {big} NOT NULL, role TEXT NOT NULL, "
        f"number {big}, block_end {big}, body TEXT NOT NULL, PRIMARY KEY (cid, idx))",
        f"CREATE INDEX IF NOT EXISTS {bare['messages']}_number_idx ON {n['messages']} (cid, number, idx)",
        f"CREATE TABLE IF NOT EXISTS {n['pages']} (cid TEXT NOT NULL, message {big} NOT NULL, page {big} NOT NULL, "
        f"PRIMARY KEY (cid, message))",
        f"CREATE TABLE IF NOT EXISTS {n['turns']} (cid TEXT NOT NULL, version {big} NOT NULL, message {big} NOT NULL, "
        f"at TEXT NOT NULL, PRIMARY KEY (cid, version))",
        *overview_statements(generation, schema),
    ]
