"""The overview read model's rows (`projections.overview`), in a generation's tables.

A generation `g` made by this version has two more tables: `views_g<g>_overview` (one row per
conversation: the version its overview is folded to, its tracking position, and the overview
as JSON, at most `projections.overview.BUCKETS` buckets) and `views_g<g>_overview_marks` (one
row per segment and user message point: its key, version, kind and tone, which an edit's cut
looks up). The overview has its own tracking position: appends do not write it (a page's
first open after new events folds those events, and writes them); so the first open of the
page after a server start reads one row, plus the events appended since the last open, never
the whole log. `read_overview` returns None where the live generation has no such tables (an
earlier version made it: `chatrecord rebuild` makes a generation with them) or the backend
keeps no SQL tables (the in-memory store): the caller folds the log then, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import orjson

from adapters.store.application import ConversationStore
from adapters.views.row_tables import overview_table_names
from adapters.views.storage import SQLViewStorage, ViewStorage
from projections.overview import Mark, Overview, fold


class SQLMarks:
    """`projections.overview.Marks` in a generation's `overview_marks` table, read through
    `curs` (a write transaction's cursor); the marks put are held (and found) until `flush`."""

    def __init__(self, curs: Any, table: str, cid: str, p: str) -> None:
        self.curs, self.table, self.cid, self.p = curs, table, cid, p
        self.held: dict[tuple[str, int], Mark] = {}

    def find(self, keys: Sequence[str]) -> list[Mark]:
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, int], Mark] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join([self.p] * len(chunk))
            self.curs.execute(
                f"SELECT mark, version, kind, tone FROM {self.table} WHERE cid = {self.p} AND mark IN ({marks})",
                (self.cid, *chunk),
            )
            for row in self.curs.fetchall():
                found[(row["mark"], int(row["version"]))] = Mark(row["mark"], int(row["version"]), row["kind"], row["tone"])
        chosen = set(wanted)
        found.update({k: m for k, m in self.held.items() if m.key in chosen})
        return list(found.values())

    def put(self, marks: Sequence[Mark]) -> None:
        for mark in marks:
            self.held[(mark.key, mark.version)] = mark

    def flush(self) -> None:
        """Writes the held marks (inserted, or their tone replaced)."""
        if self.held:
            p = self.p
            self.curs.executemany(
                f"INSERT INTO {self.table} (cid, mark, version, kind, tone) VALUES ({p}, {p}, {p}, {p}, {p}) "
                "ON CONFLICT (cid, mark, version) DO UPDATE SET tone = excluded.tone",
                [(self.cid, m.key, m.version, m.kind, m.tone) for m in self.held.values()],
            )
        self.held = {}


class OverviewRows:
    """Reads a conversation's overview read model, caught up with its log first."""

    def __init__(self, backend: ViewStorage, store: ConversationStore) -> None:
        self.backend, self.store = backend, store
        self._has_tables: dict[int, bool] = {}

    def _tables(self, curs: Any, generation: int) -> dict[str, str] | None:
        assert isinstance(self.backend, SQLViewStorage)
        known = self._has_tables.get(generation)
        if known is None:
            bare = overview_table_names(generation)["overview"]
            known = self._has_tables[generation] = self.backend._exists(curs, bare)
        return overview_table_names(generation, self.backend.schema) if known else None

    def read(self, cid: UUID, generation: int, rules: str, logged: int) -> Overview | None:
        """Returns the overview of conversation `cid` (its stored key's UUID) in `generation`
        (under its rule set `rules`), folded up to at least version `logged` (the log's now):
        one row read when it is; else the events after its version folded and written back,
        in one transaction under the views' shared lock (the row locked on PostgreSQL, so two
        processes never fold the same events into it). A row folded past `logged` (the database
        was restored, or failed over, to a shorter log) is folded anew from the log's start. None
        where the generation has no overview tables, or the backend no SQL tables."""
        if not isinstance(self.backend, SQLViewStorage):
            return None
        backend, p, key = self.backend, self.backend.p, str(cid)
        with backend.transaction(write=False) as curs:
            names = self._tables(curs, generation)
            if names is None:
                return None
            curs.execute(f"SELECT version, body FROM {names['overview']} WHERE cid = {p}", (key,))
            row = curs.fetchone()
        if row is not None and row["body"] and int(row["version"]) == logged:
            return Overview.from_json(orjson.loads(row["body"]))
        with backend.transaction(write=True) as curs:
            backend.lock(curs, exclusive=False)
            curs.execute(
                f"INSERT INTO {names['overview']} (cid, version, body) VALUES ({p}, 0, '') ON CONFLICT (cid) DO NOTHING", (key,)
            )
            locking = " FOR UPDATE" if p == "%s" else ""  # PostgreSQL; SQLite's write transaction holds the file
            curs.execute(f"SELECT version, body FROM {names['overview']} WHERE cid = {p}{locking}", (key,))
            row = curs.fetchone()
            state = Overview.from_json(orjson.loads(row["body"])) if row["body"] else Overview()
            if state.version > logged:  # folded past the log: a database restored or failed over to a shorter one
                curs.execute(f"DELETE FROM {names['overview_marks']} WHERE cid = {p}", (key,))
                state = Overview()
            events = list(self.store.events.get(cid, gt=state.version or None))
            if not events:
                return state
            marks = SQLMarks(curs, names["overview_marks"], key, p)
            state = fold(state, events, rules, marks)
            marks.flush()
            curs.execute(
                f"UPDATE {names['overview']} SET version = {p}, body = {p} WHERE cid = {p}",
                (state.version, orjson.dumps(state.to_json()).decode(), key),
            )
        return state
