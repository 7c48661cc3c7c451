"""The view rows an append or a rebuild's page writes on PostgreSQL (`PostgresBufferedRows`): each
table's rows as one statement over one JSON array, or into the append's document (`AppendDocument`)."""

from __future__ import annotations

from typing import Any

import orjson

from adapters.backends.postgres.append import (
    AppendDocument,
)
from adapters.views.conversation_rows import BufferedRows

COLUMN_TYPES = {
    "seq": "bigint",
    "segment": "text",
    "body": "text",
    "v": "bigint",
    "sub": "bigint",
    "card": "text",
    "after": "bigint",
    "idx": "bigint",
    "block_end": "bigint",
    "role": "text",
    "number": "bigint",
    "message": "bigint",
    "page": "bigint",
    "version": "bigint",
    "at": "text",
}
"""The PostgreSQL types of the view tables' columns (`adapters.views.conversation_rows.create_statements`)."""


class PostgresBufferedRows(BufferedRows):
    """`BufferedRows` whose flush sends each table's held rows as one statement over one JSON
    array of rows (`jsonb_array_elements`: parsed once, each field then found at once), not one
    statement per row: in pipeline mode nothing is synced, and the server runs one statement
    per table however many rows a rebuild's page holds. In an append gathered for one call
    (`AppendDocument`) the rows go into its document instead."""

    _views: dict[str, Any] | None = None

    def _document(self) -> dict[str, Any] | None:
        """The views section of the append's document, when the rows are written into one
        (found once per rows object: its cursor is one append's)."""
        views = self._views
        if views is None and isinstance(self.curs, AppendDocument):
            generation = int(self.t["heads"].rsplit("views_g", 1)[1].split("_", 1)[0])
            views = self._views = self.curs.views(generation)
        return views

    def _kind(self, table: str, columns: tuple[str, ...]) -> str:
        kind = next(k for k, name in self.t.items() if name == table)
        return "ended" if kind == "messages" and "block_end" in columns else kind

    def _write_head(self, head: Any) -> None:
        views = self._document()
        if views is None:
            super()._write_head(head)
        else:
            views["head"] = [head.version, head.model_dump_json()]

    def _insert_many(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], tail: str) -> None:
        if not rows:
            return
        views = self._document()
        if views is not None:
            views[self._kind(table, columns)].extend(list(row) for row in rows)
            return
        # the rows as one JSON array of arrays (orjson, in C): psycopg's array dumpers work per
        # element in Python, holding the GIL a rebuild's fold needs; the server takes them apart
        values = ", ".join(f"(e->>{i})::{COLUMN_TYPES[c]}" for i, c in enumerate(columns))
        self.curs.execute(
            f"INSERT INTO {table} (cid, {', '.join(columns)}) SELECT %s, {values} "
            f"FROM jsonb_array_elements(%s::jsonb) AS e {tail}",
            (self.cid, orjson.dumps(rows).decode()),
        )

    def _set_aside_rows(self) -> None:
        views = self._document()
        if views is None:  # one statement per kind, the rows as one JSON array (as `_insert_many`)
            entries, aside = self.t["entries"], self.aside_cid
            if self._drop_aside:
                self.curs.execute(f"DELETE FROM {entries} WHERE cid = %s", (aside,))
            if self._moves:
                self.curs.execute(
                    f"UPDATE {entries} SET cid = %s WHERE cid = %s "
                    "AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)::bigint))",
                    (aside, self.cid, orjson.dumps(self._moves).decode()),
                )
            if self._aside:
                self.curs.execute(
                    f"INSERT INTO {entries} (cid, seq, segment, body) SELECT %s, (e->>0)::bigint, "
                    "e->>1, e->>2 FROM jsonb_array_elements(%s::jsonb) AS e",
                    (aside, orjson.dumps(self._aside).decode()),
                )
            return
        if self._drop_aside:  # what an earlier flush into this document set aside goes too
            views["delete_entries"].extend(views["aside"])
            views["aside"], views["aside_rows"], views["drop_aside"] = [], [], True
        views["aside"].extend(self._moves)
        views["aside_rows"].extend(list(row) for row in self._aside)

    def _delete_entries(self, seqs: list[int]) -> None:
        views = self._document() if seqs else None
        if views is not None:
            views["delete_entries"].extend(seqs)
        elif seqs:
            self.curs.execute(
                f"DELETE FROM {self.t['entries']} WHERE cid = %s "
                "AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)::bigint))",
                (self.cid, orjson.dumps(seqs).decode()),
            )

    def _cut_stored_messages(self, keep: int) -> None:
        views = self._document()
        if views is None:
            super()._cut_stored_messages(keep)
            return
        # the function deletes before it writes the section's messages: what an earlier flush
        # into this document held from `keep` on is left out of it, as the cut would delete it
        views["cut"] = keep if views["cut"] is None else min(views["cut"], keep)
        for kind in ("messages", "ended", "ends"):
            views[kind] = [row for row in views[kind] if row[0] < keep]

    def _end_blocks(self, ends: list[tuple[int, int | None]]) -> None:
        views = self._document() if ends else None
        if views is not None:
            views["ends"].extend([index, end] for index, end in ends)
        elif ends:
            self.curs.execute(
                f"UPDATE {self.t['messages']} m SET block_end = (u.e->>1)::bigint "
                "FROM jsonb_array_elements(%s::jsonb) AS u(e) WHERE m.cid = %s AND m.idx = (u.e->>0)::bigint",
                (orjson.dumps(ends).decode(), self.cid),
            )
