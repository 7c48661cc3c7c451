"""The overview read model's rows in SQL (`projections.overview`). `overview`: per conversation, its folded
version and the overview as JSON. `overview_marks`: per segment and user message point, key, version,
kind, tone; an edit's cut looks them up. Appends do not write them; a read folds the events since and
writes back (`read_overview`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from projections.overview import Mark, Marks, Overview

CHUNK = 500
"""How many marks one look-up names at most (SQLite's limit on a statement's parameters)."""


@dataclass(frozen=True)
class OverviewStatements:
    """The overview's statements of one generation in one dialect. `p`: its placeholder. `lock_row`: the row
    lock of the SELECT, PostgreSQL's FOR UPDATE."""

    overview: str
    marks: str
    p: str
    lock_row: str = ""

    @functools.cached_property
    def select(self) -> str:
        return f"SELECT version, body FROM {self.overview} WHERE cid = {self.p}"

    @functools.cached_property
    def select_locked(self) -> str:
        return self.select + self.lock_row

    @functools.cached_property
    def insert_empty(self) -> str:
        return f"INSERT INTO {self.overview} (cid, version, body) VALUES ({self.p}, 0, '') ON CONFLICT (cid) DO NOTHING"

    @functools.cached_property
    def update(self) -> str:
        p = self.p
        return f"UPDATE {self.overview} SET version = {p}, body = {p} WHERE cid = {p}"

    @functools.cached_property
    def delete_marks(self) -> str:
        return f"DELETE FROM {self.marks} WHERE cid = {self.p}"

    @functools.cached_property
    def upsert_mark(self) -> str:
        p = self.p
        return (
            f"INSERT INTO {self.marks} (cid, mark, version, kind, tone) VALUES ({p}, {p}, {p}, {p}, {p}) "
            "ON CONFLICT (cid, mark, version) DO UPDATE SET tone = excluded.tone"
        )

    def find_marks(self, count: int) -> str:
        """The look-up of `count` marks by key."""
        marks = ", ".join([self.p] * count)
        return f"SELECT mark, version, kind, tone FROM {self.marks} WHERE cid = {self.p} AND mark IN ({marks})"


class SQLMarks:
    """`projections.overview.Marks` in a generation's `overview_marks`, read through `curs`. Marks put are
    held until `flush`."""

    def __init__(self, curs: Any, statements: OverviewStatements, cid: str) -> None:
        self.curs, self.s, self.cid = curs, statements, cid
        self.held: dict[tuple[str, int], Mark] = {}

    def find(self, keys: Sequence[str]) -> list[Mark]:
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, int], Mark] = {}
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            self.curs.execute(self.s.find_marks(len(chunk)), (self.cid, *chunk))
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
            self.curs.executemany(self.s.upsert_mark, [(self.cid, m.key, m.version, m.kind, m.tone) for m in self.held.values()])
        self.held = {}


def read_overview(
    storage: Any,
    statements: OverviewStatements,
    key: str,
    logged: int,
    fold: Callable[[Overview, Marks], Overview],
    keep: bool = True,
) -> Overview | None:
    """Returns the overview of `key` as `ViewStorage.overview` says, through `storage`. At `logged`, one row
    read. Else, without `keep`, None (nothing written); with it, one write transaction under the views'
    shared lock, the row locked where possible: the row is made if missing, folded by `fold` (from empty
    when past `logged`) and written back."""
    s = statements
    with storage.transaction(write=False) as curs:
        curs.execute(s.select, (key,))
        row = curs.fetchone()
    if row is not None and row["body"] and int(row["version"]) == logged:
        return Overview.from_json(orjson.loads(row["body"]))
    if not keep:  # a store opened read-only: the caller folds the log in memory
        return None
    with storage.transaction(write=True) as curs:
        storage.lock(curs, exclusive=False)
        curs.execute(s.insert_empty, (key,))
        curs.execute(s.select_locked, (key,))
        row = curs.fetchone()
        state = Overview.from_json(orjson.loads(row["body"])) if row["body"] else Overview()
        if state.version > logged:  # folded past the log: a database restored or failed over to a shorter one
            curs.execute(s.delete_marks, (key,))
            state = Overview()
        marks = SQLMarks(curs, s, key)
        folded = fold(state, marks)
        if folded is state:
            return state
        marks.flush()
        curs.execute(s.update, (folded.version, orjson.dumps(folded.to_json()).decode(), key))
    return folded
