"""The view rows are described once (`adapters.backends.sql.views_tables.ROW_TABLES`): the CREATE
statements, the Python writes of both databases, PostgreSQL's JSON-array writes and the PL/pgSQL
append function all write every column of every row table. A column added to the description
but left out of one of them, or one of them naming a column the description lacks, fails here."""

from __future__ import annotations

import re

import pytest

from adapters.backends.postgres.append import generation_function_statement
from adapters.backends.postgres.buffered_rows import _json_insert
from adapters.backends.sql.views_statements import RowStatements
from adapters.backends.sql.views_tables import (
    ALL_ROW_TABLES,
    LISTING,
    MESSAGE_COLUMNS,
    ROW_TABLES,
    USAGE,
    create_statements,
    listing_name,
    table_names,
    usage_name,
)
from adapters.views.row_tables import TABLES

INSERT = re.compile(r"INSERT INTO (\S+) \(([^)]*)\)")
TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\S+) \((.*)\)")


def inserted(sql: str) -> dict[str, set[str]]:
    """Returns, per row table, the columns the inserts of `sql` write into it (every insert's)."""
    names = {name: table for table, name in table_names(3, "s").items()}
    names[listing_name(3, "s")] = LISTING.name
    names[usage_name(3, "s")] = USAGE.name
    found: dict[str, set[str]] = {}
    for name, columns in INSERT.findall(sql):
        if name in names:
            found.setdefault(names[name], set()).update(c.strip() for c in columns.split(","))
    return found


def every_column() -> dict[str, set[str]]:
    """Every column of every row table, of the list table (`LISTING`) and of the usage table (`USAGE`), by table."""
    return {table: {"cid", *row.names} for table, row in ALL_ROW_TABLES.items()}


def test_the_description_names_every_row_table() -> None:
    assert tuple(ROW_TABLES) == TABLES


def test_the_create_statements_make_every_described_column() -> None:
    names = {name: table for table, name in table_names(3, "s").items()}
    names[listing_name(3, "s")] = LISTING.name
    names[usage_name(3, "s")] = USAGE.name
    made = {}
    for statement in create_statements(3, "s"):
        match = TABLE.match(statement)
        if match and match.group(1) in names:
            body = re.sub(r", PRIMARY KEY \([^)]*\)", "", match.group(2))
            made[names[match.group(1)]] = {part.split()[0] for part in body.split(", ")}
    assert made == every_column()


def test_the_append_function_writes_every_described_column() -> None:
    assert inserted(generation_function_statement("s", "events", 3)) == every_column()


@pytest.mark.parametrize("p", ["?", "%s"])
def test_the_python_writes_write_every_described_column(p: str) -> None:
    statements = RowStatements(table_names(3, "s"), p, listing_name(3, "s"), usage_name(3, "s"))
    sql = " ; ".join(statements.insert(table) for table in ALL_ROW_TABLES)
    assert inserted(sql) == every_column()
    assert "block_end" not in inserted(statements.insert("messages", MESSAGE_COLUMNS))["messages"]  # a new message's end: NULL


def test_the_json_array_writes_write_every_described_column() -> None:
    t = {**table_names(3, "s"), LISTING.name: listing_name(3, "s"), USAGE.name: usage_name(3, "s")}
    sql = " ; ".join(_json_insert(table, t[table], row.names) for table, row in ALL_ROW_TABLES.items())
    assert inserted(sql) == every_column()
