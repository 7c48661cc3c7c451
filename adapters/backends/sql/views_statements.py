"""The statements of one generation's row tables in one dialect (`RowStatements`), built once from
`ROW_TABLES`. Also PostgreSQL's insert of a JSON array of rows (`json_insert`), shared by the Python
writes and the PL/pgSQL append."""

from __future__ import annotations

import functools

from adapters.backends.sql.views_tables import ALL_ROW_TABLES, LISTING, USAGE, listing_name, table_names, usage_name

PG_TYPES = {"BIGINT": "bigint", "TEXT": "text"}


def json_insert(table: str, name: str, columns: tuple[str, ...], cid: str, array: str, upsert: bool = True) -> str:
    """Returns PostgreSQL's insert into `name` (row table `table`) of the JSON array `array`'s rows. Each
    row is an array of `columns`' values after `cid`, cast to their types. With `upsert`, the table's ON
    CONFLICT clause. `PostgresBufferedRows` and `append_views.sql` both use it."""
    row = ALL_ROW_TABLES[table]
    types = {c.name: c.type for c in row.columns}
    values = ", ".join(f"(e->>{i})::{PG_TYPES[types[c]]}" for i, c in enumerate(columns))
    tail = f" {row.conflict(columns)}" if upsert and row.replaces is not None else ""
    return f"INSERT INTO {name} (cid, {', '.join(columns)}) SELECT {cid}, {values} FROM jsonb_array_elements({array}) AS e{tail}"


class RowStatements:
    """The statements of `SQLRows` and `BufferedRows` on one generation's tables, with placeholder `p` (`?`
    or `%s`). Each is built at first use and kept."""

    def __init__(self, tables: dict[str, str], p: str, listing: str | None = None, usage: str | None = None) -> None:
        self.t, self.p = tables, p
        self.listing = listing
        """The name of the generation's list table (`LISTING`), None where it has none (an earlier
        version made it): a summary's write then writes no list row."""
        self.usage = usage
        """The name of the generation's usage table (`USAGE`), None where it has none (an earlier
        version made it): a segment then writes no usage row."""
        self._in: dict[tuple[str, int], str] = {}
        self._inserts: dict[tuple[str, tuple[str, ...] | None, bool], str] = {}
        self._placements: dict[str, str] = {}

    @classmethod
    def of(cls, generation: int, schema: str, p: str, listing: bool = True, usage: bool = True) -> RowStatements:
        """The statements of `generation`'s tables in `schema` ("": none); `listing`, `usage`:
        whether it has a list table, a usage table."""
        return cls(
            table_names(generation, schema),
            p,
            listing_name(generation, schema) if listing else None,
            usage_name(generation, schema) if usage else None,
        )

    def name(self, table: str) -> str:
        """The name of row table `table` (of `ALL_ROW_TABLES`) in this generation."""
        if table == LISTING.name:
            assert self.listing is not None
            return self.listing
        if table == USAGE.name:
            assert self.usage is not None
            return self.usage
        return self.t[table]

    def _marks(self, count: int) -> str:
        return ", ".join([self.p] * count)

    def insert(self, table: str, columns: tuple[str, ...] | None = None, upsert: bool = True) -> str:
        """The insert of one row of `columns` (default: all) into `table`, with its ON CONFLICT clause
        unless not `upsert`."""
        key = (table, columns, upsert)
        found = self._inserts.get(key)
        if found is None:
            row = ALL_ROW_TABLES[table]
            named = row.names if columns is None else columns
            tail = f" {row.conflict(named)}" if upsert and row.replaces is not None else ""
            found = self._inserts[key] = (
                f"INSERT INTO {self.name(table)} (cid, {', '.join(named)}) VALUES ({self._marks(len(named) + 1)}){tail}"
            )
        return found

    def _where(self, table: str, columns: str, condition: str = "", order: str = "") -> str:
        return f"SELECT {columns} FROM {self.t[table]} WHERE cid = {self.p}{condition}{order}"

    @functools.cached_property
    def clear(self) -> tuple[str, ...]:
        names = (*self.t.values(), *(name for name in (self.listing, self.usage) if name))
        return tuple(f"DELETE FROM {name} WHERE cid = {self.p}" for name in names)

    @functools.cached_property
    def summary(self) -> str:
        return self._where("heads", "body")

    @functools.cached_property
    def entry(self) -> str:
        return self._where("entries", "body", f" AND segment = {self.p}")

    @functools.cached_property
    def entry_seq(self) -> str:
        return self._where("entries", "seq", f" AND segment = {self.p}")

    @functools.cached_property
    def delete_entry(self) -> str:
        return f"DELETE FROM {self.t['entries']} WHERE cid = {self.p} AND seq = {self.p}"

    @functools.cached_property
    def delete_entries(self) -> str:
        """Every entry of a `cid` (the entries set aside, under their own cid)."""
        return f"DELETE FROM {self.t['entries']} WHERE cid = {self.p}"

    @functools.cached_property
    def set_aside(self) -> str:
        p = self.p
        return f"UPDATE {self.t['entries']} SET cid = {p} WHERE cid = {p} AND seq = {p}"

    @functools.cached_property
    def turn_rows(self) -> str:
        t, p = self.t, self.p
        return (
            f"SELECT 0 AS k, idx AS n, 0 AS sub, body FROM {t['messages']} WHERE cid = {p} AND idx < {p} UNION ALL "
            f"SELECT 1, seq, 0, body FROM {t['entries']} WHERE cid = {p} AND seq <= {p} UNION ALL "
            f"SELECT 1, seq, 0, body FROM {t['entries']} WHERE cid = {p} UNION ALL "
            f"SELECT 2, v, sub, body FROM {t['outcomes']} WHERE cid = {p} AND v <= {p} ORDER BY k, n, sub"
        )

    @functools.cached_property
    def entries(self) -> str:
        return self._where("entries", "body", order=" ORDER BY seq")

    @functools.cached_property
    def newest_entries(self) -> str:
        return self._where("entries", "seq, body", order=f" ORDER BY seq DESC LIMIT {self.p}")

    @functools.cached_property
    def older_entries(self) -> str:
        return self._where("entries", "body", f" AND seq < {self.p}", " ORDER BY seq")

    @functools.cached_property
    def cut_card(self) -> str:
        return f"DELETE FROM {self.t['outcomes']} WHERE cid = {self.p} AND card = {self.p} RETURNING v"

    @functools.cached_property
    def cut_loose(self) -> str:
        return f"DELETE FROM {self.t['outcomes']} WHERE cid = {self.p} AND card IS NULL AND after >= {self.p} RETURNING v"

    @functools.cached_property
    def outcomes(self) -> str:
        return self._where("outcomes", "body", order=" ORDER BY v, sub")

    @functools.cached_property
    def newest_outcomes(self) -> str:
        return self._where("outcomes", "body", order=f" ORDER BY v DESC, sub DESC LIMIT {self.p}")

    @functools.cached_property
    def message(self) -> str:
        return self._where("messages", "body", f" AND idx = {self.p}")

    @functools.cached_property
    def user_index(self) -> str:  # MAX, not ORDER BY: the (cid, number) index, not a walk of the transcript
        return self._where("messages", "MAX(idx) AS idx", f" AND number = {self.p}")

    def bodies_at(self, count: int) -> str:
        """The bodies of `count` transcript messages by index."""
        return self._listed("bodies", count, "idx, body", "idx")

    def blocks(self, count: int) -> str:
        """`(idx, number, block_end)` of the messages of `count` user message numbers (an `IN` list)."""
        return self._listed("blocks", count, "idx, number, block_end", "number")

    def _listed(self, kind: str, count: int, columns: str, column: str) -> str:
        found = self._in.get((kind, count))
        if found is None:
            found = self._in[(kind, count)] = self._where("messages", columns, f" AND {column} IN ({self._marks(count)})")
        return found

    def placement(self, blocks: str) -> str:
        """The read of `blocks`' block ends and the message bodies on both sides of each. Each position is
        its own primary-key lookup, a correlated subquery. A join on `idx IN (…)` let the planner scan
        the whole transcript."""
        found = self._placements.get(blocks)
        if found is None:
            p, m = self.p, self.t["messages"]
            found = self._placements[blocks] = (
                f"WITH b AS ({blocks}), "
                f"p AS (SELECT COALESCE(block_end, {p}) - 1 AS i FROM b UNION SELECT COALESCE(block_end, {p}) FROM b) "
                "SELECT 0 AS k, idx, number, block_end, NULL AS body FROM b UNION ALL "
                f"SELECT 1, i, NULL, NULL, (SELECT body FROM {m} WHERE cid = {p} AND idx = p.i) FROM p"
            )
        return found

    @functools.cached_property
    def end_block(self) -> str:
        p = self.p
        return f"UPDATE {self.t['messages']} SET block_end = {p} WHERE cid = {p} AND idx = {p}"

    @functools.cached_property
    def cut_messages(self) -> str:
        return f"DELETE FROM {self.t['messages']} WHERE cid = {self.p} AND idx >= {self.p}"

    @functools.cached_property
    def messages(self) -> str:
        return self._where("messages", "body", order=" ORDER BY idx")

    @functools.cached_property
    def cut_pages(self) -> str:
        return f"DELETE FROM {self.t['pages']} WHERE cid = {self.p} AND message > {self.p}"

    @functools.cached_property
    def newest_page(self) -> str:
        return self._where("pages", "page", order=" ORDER BY message DESC LIMIT 1")

    @functools.cached_property
    def shown_page(self) -> str:
        return self._where("pages", "page", " AND page <> 0", " ORDER BY message DESC LIMIT 1")

    @functools.cached_property
    def turn_versions(self) -> str:
        return self._where("turns", "version", f" AND message = {self.p}", " ORDER BY version")

    @functools.cached_property
    def turn_messages(self) -> str:
        return self._where("turns", "DISTINCT message", order=" ORDER BY message")
