"""The view rows an append or a rebuild's page writes on PostgreSQL (`PostgresBufferedRows`). Each table's
rows go as one statement over a JSON array, or into the append's document."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from adapters.backends.postgres.append import AppendDocument, Unfit
from adapters.backends.sql.views_buffered import BufferedRows
from adapters.backends.sql.views_rows import SQLRows
from adapters.backends.sql.views_statements import json_insert
from adapters.backends.sql.views_tables import ROW_TABLES
from adapters.views.listing import listing_values
from domain.events import MessageEdited, TurnsTruncated
from projections.transcript import Message


@functools.cache
def _json_insert(table: str, name: str, columns: tuple[str, ...], upsert: bool = True) -> str:
    """The insert of a JSON array of rows into `name` (`json_insert`), built once per table and columns."""
    return json_insert(table, name, columns, "%s", "%s::jsonb", upsert)


_STATEMENTS = {
    "drop_aside": "DELETE FROM {entries} WHERE cid = %s",
    "set_aside": "UPDATE {entries} SET cid = %s WHERE cid = %s "
    "AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)::bigint))",
    "delete_entries": "DELETE FROM {entries} WHERE cid = %s "
    "AND seq = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb)::bigint))",
    "end_blocks": "UPDATE {messages} m SET block_end = (u.e->>1)::bigint "
    "FROM jsonb_array_elements(%s::jsonb) AS u(e) WHERE m.cid = %s AND m.idx = (u.e->>0)::bigint",
    "edit": (
        "SELECT u.idx, (SELECT body FROM {messages} WHERE cid = %(cid)s AND idx = u.idx) AS body, "
        "(SELECT COALESCE(json_agg(json_build_array(s.segment, x.seq)), '[]'::json) FROM unnest(%(segments)s::text[]) "
        "AS s(segment) CROSS JOIN LATERAL (SELECT seq FROM {entries} WHERE cid = %(cid)s AND segment = s.segment LIMIT 1) x) "
        "AS entries, (SELECT COALESCE(sum((SELECT count(*) FROM {outcomes} WHERE cid = %(cid)s AND card = c.card)), 0) "
        "FROM unnest(%(cards)s::text[]) AS c(card)) AS carded, "
        "(SELECT count(*) FROM {outcomes} WHERE cid = %(cid)s AND card IS NULL AND after >= u.idx + 1) AS loose, "
        "(SELECT page FROM {pages} WHERE cid = %(cid)s AND message <= %(number)s ORDER BY message DESC LIMIT 1) AS newest, "
        "(SELECT page FROM {pages} WHERE cid = %(cid)s AND message <= %(number)s AND page <> 0 "
        "ORDER BY message DESC LIMIT 1) AS shown "
        "FROM (SELECT MAX(idx) AS idx FROM {messages} WHERE cid = %(cid)s AND number = %(number)s) u"
    ),
}
"""The statements of the JSON-array writes and of an edit's read (`PostgresBufferedRows.prefetch`),
each with the generation's table names to fill in."""


@functools.cache
def _statement(kind: str, tables: tuple[tuple[str, str], ...]) -> str:
    """Statement `kind` of `_STATEMENTS` on the tables `tables` (built once per generation)."""
    return _STATEMENTS[kind].format(**dict(tables))


@dataclass
class EditRows:
    """What an edit's fold asks of the stored view rows, read in one statement or known
    (`PostgresBufferedRows.prefetch`).

    The newest index of user message `number` (None: none) and its `body`, or its `message` without text.
    The cut segments' entry versions (missing: no entry). `carded`: the cut `cards`' outcome count;
    `loose`: card-less ones at or after the next index. The newest page and newest non-zero page at or
    before `number`. `cut_outcomes`, `cut_pages`: whether the fold took each cut."""

    number: int
    index: int | None
    body: str | None
    entries: dict[str, int]
    cards: frozenset[str]
    carded: int
    loose: int | None
    newest: int | None
    shown: int | None
    cut_outcomes: bool = False
    cut_pages: bool = False
    message: Message | None = None


READ_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
"""How a read of several statements begins (`PostgresBackend.reading`): all see one snapshot."""


class PostgresBufferedRows(BufferedRows):
    """`BufferedRows` whose flush sends each table's rows as one statement over a JSON array
    (`jsonb_array_elements`). The server runs one statement per table however many rows. In an
    `AppendDocument` the rows go into the document."""

    _edit: EditRows | None = None

    def prefetch(self, events: Sequence[Any]) -> None:
        """Reads in one statement what an edit's fold asks of the stored rows (`EditRows`). Only in an
        `AppendDocument` whose events cut the transcript after an edit. The fold then asks the database
        nothing; its cuts go into the document (`drop_outcomes`, `drop_pages`). An edit whose rows the
        process knows (`EditWindow`) reads nothing. Anything else is read as the fold asks."""
        if not isinstance(self.curs, AppendDocument) or self._views is not None:
            return
        cuts = [e for e in events if isinstance(e, TurnsTruncated)]
        if len(cuts) != 1 or any(isinstance(e, MessageEdited) and e.message != cuts[0].after_message for e in events):
            return
        cut = cuts[0]
        t, number = self.t, cut.after_message
        segments, cards = sorted(set(cut.cut_segments)), sorted(set(cut.cut_cards) | set(cut.cut_segments))
        if [type(e) for e in events] == [MessageEdited, TurnsTruncated]:
            self._edit = self._known_edit(number, segments, set(cards))
            if self._edit is not None:
                return
        row = self.curs.execute(
            _statement("edit", tuple(t.items())),
            {"cid": self.cid, "number": number, "segments": segments, "cards": cards},
        ).fetchone()
        index = None if row["idx"] is None else int(row["idx"])
        self._edit = EditRows(
            number=number,
            index=index,
            body=row["body"],
            entries={segment: int(seq) for segment, seq in row["entries"]},
            cards=frozenset(cards),
            carded=int(row["carded"]),
            loose=None if index is None else int(row["loose"]),
            newest=None if row["newest"] is None else int(row["newest"]),
            shown=None if row["shown"] is None else int(row["shown"]),
        )

    def _known_edit(self, number: int, segments: list[str], cards: set[str]) -> EditRows | None:
        """The `EditRows` of an edit of user message `number` cutting `segments` and `cards`, from the
        process's `EditWindow`. None when it does not hold all of them."""
        window, summary = self._window, self._start
        index = window.user_index(number) if window is not None and summary is not None else None
        if window is None or summary is None or index is None:
            return None
        entries: dict[str, int] = {}
        for segment in segments:
            known, seq = window.entry_seq(segment, summary.seqs)
            if not known:
                return None
            if seq is not None:
                entries[segment] = seq
        carded, pages = window.cut_count(cards, index + 1), window.pages_at(number)
        if carded is None or pages is None:
            return None
        message = window.users[index]
        return EditRows(number, index, None, entries, frozenset(cards), carded, 0, pages[0], pages[1], message=message)

    def _stored_entry_seq(self, segment: str) -> int | None:
        edit = self._edit
        if edit is None or segment not in edit.entries and segment not in edit.cards:
            return super()._stored_entry_seq(segment)
        return edit.entries.get(segment)

    def _stored_message(self, index: int) -> Message | None:
        edit = self._edit
        if edit is None or edit.index != index or edit.body is None and edit.message is None:
            return super()._stored_message(index)
        return edit.message if edit.message is not None else self._decode_messages([edit.body or ""])[0]

    def user_index(self, number: int) -> int | None:
        """As `BufferedRows.user_index`. In a prefetched edit's append, answered from the rows read and the
        held messages, without a flush."""
        edit = self._edit
        if edit is None or number != edit.number:
            return super().user_index(number)
        held = [i for i, m in self._messages.items() if (m.number if isinstance(m, Message) else m[1]) == number]
        stored = edit.index
        if stored is not None and self._cut is not None and stored >= self._cut:
            raise Unfit("the stored message of an edit is cut in the same append")
        return max([*held, *([stored] if stored is not None else [])], default=None)

    def cut_outcomes(self, cards: set[str], length: int) -> int:
        """As `BufferedRows.cut_outcomes`. In a prefetched edit's append, counted from the rows read; the
        append function deletes them (`drop_outcomes`)."""
        edit = self._edit
        if edit is None:
            return super().cut_outcomes(cards, length)
        if self._outcomes or edit.cut_outcomes or cards != edit.cards or edit.index is None or length != edit.index + 1:
            raise Unfit("card outcomes cut other than the edit's rows read")
        edit.cut_outcomes = True
        self._document_views()["drop_outcomes"] = {"cards": sorted(cards), "after": length}
        if self._window is not None:
            self._window.cut_outcomes(cards, length)
        assert edit.loose is not None
        return edit.carded + edit.loose

    def cut_pages(self, after: int) -> tuple[int | None, int]:
        """As `BufferedRows.cut_pages`. In a prefetched edit's append, from the rows read; the append
        function deletes them (`drop_pages`)."""
        edit = self._edit
        if edit is None:
            return super().cut_pages(after)
        if self._pages or edit.cut_pages or after != edit.number:
            raise Unfit("pages cut other than the edit's rows read")
        edit.cut_pages = True
        self._document_views()["drop_pages"] = after
        if self._window is not None:
            self._window.cut_pages(after, edit.newest, edit.shown or 0)
        return edit.newest, edit.shown or 0

    def _document_views(self) -> dict[str, Any]:
        views = self._document()
        assert views is not None  # `prefetch` reads only for an append gathered into a document
        return views

    def _document(self) -> dict[str, Any] | None:
        """The views section of the append's document, when the rows go into one; found once per rows
        object."""
        views = self._views
        if views is None and isinstance(self.curs, AppendDocument):
            generation = int(self.t["heads"].rsplit("views_g", 1)[1].split("_", 1)[0])
            views = self._views = self.curs.views(generation)
        return views

    def _kind(self, table: str, columns: tuple[str, ...]) -> str:
        """The document's section of `table`'s rows of `columns` (a message with its block end: `ended`)."""
        return "ended" if table == "messages" and "block_end" in columns else table

    def _write_summary(self, summary: Any) -> None:
        views = self._document()
        if views is None:
            SQLRows.put_summary(self, summary)
        else:
            self.summary_json = (
                summary.model_dump_json()
            )  # a turn read of this summary takes it as written (`SummaryCache.written`)
            views["head"] = [summary.version, self.summary_json]
            if self.s.listing is not None:  # the list's row, where the generation has the table
                views["listing"] = [list(listing_values(summary))]

    def _insert_many(self, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        views = self._document()
        if views is not None:
            views[self._kind(table, columns)].extend(list(row) for row in rows)
            return
        # the rows as one JSON array of arrays (orjson, in C): psycopg's array dumpers work per
        # element in Python, holding the GIL a rebuild's fold needs; the server takes them apart
        self.curs.execute(_json_insert(table, self.s.name(table), columns), (self.cid, orjson.dumps(rows).decode()))

    def _set_aside_rows(self) -> None:
        views = self._document()
        if views is None:  # one statement per kind, the rows as one JSON array (as `_insert_many`)
            entries, aside = self.t["entries"], self.aside_cid
            if self._drop_aside:
                self.curs.execute(_statement("drop_aside", tuple(self.t.items())), (aside,))
            if self._moves:
                self.curs.execute(
                    _statement("set_aside", tuple(self.t.items())),
                    (aside, self.cid, orjson.dumps(self._moves).decode()),
                )
            if self._aside:
                self.curs.execute(
                    _json_insert("entries", entries, ROW_TABLES["entries"].names, upsert=False),
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
                _statement("delete_entries", tuple(self.t.items())),
                (self.cid, orjson.dumps(seqs).decode()),
            )

    def _cut_stored_messages(self, keep: int) -> None:
        views = self._document()
        if views is None:
            SQLRows.cut_messages(self, keep)
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
                _statement("end_blocks", tuple(self.t.items())),
                (orjson.dumps(ends).decode(), self.cid),
            )
