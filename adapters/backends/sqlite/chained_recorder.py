"""The library's SQLite application recorder with the hash chain (`ChainedSQLiteRecorder`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder

from adapters.store.chain import CHAIN_KIND_TABLE, CHAIN_TABLE, CUTS, PAGE, ChainedRecorder, Link, Stored, run_inline, state_bytes
from adapters.store.chain_checks import BROKEN_TABLE, GUARD, GUARD_BY, GUARD_DETAIL, VERIFIED_TABLE, BrokenChain, VerifiedPosition

VERIFIED_STATEMENT = (
    f"CREATE TABLE IF NOT EXISTS {VERIFIED_TABLE} (originator_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "hash BLOB NOT NULL, verified_at TEXT NOT NULL, verified_by TEXT NOT NULL)"
)
"""The verified positions' table (`adapters.store.chain_checks.VERIFIED_TABLE`)."""
BROKEN_STATEMENT = (
    f"CREATE TABLE IF NOT EXISTS {BROKEN_TABLE} (originator_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "problem TEXT NOT NULL, detail TEXT NOT NULL, found_at TEXT NOT NULL, found_by TEXT NOT NULL)"
)
"""The stored breaks' table (`adapters.store.chain_checks.BROKEN_TABLE`)."""
KIND_STATEMENT = (
    f"CREATE TABLE IF NOT EXISTS {CHAIN_KIND_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), kind TEXT NOT NULL, "
    "mark TEXT NOT NULL)"
)
"""The chain kind's table (`adapters.store.chain.CHAIN_KIND_TABLE`), made where a kind is first recorded."""


class ChainedSQLiteRecorder(ChainedRecorder, SQLiteApplicationRecorder):
    """The library's SQLite application recorder with the hash chain. Originator ids are kept
    as in the events table (hex, or text with ORIGINATOR_ID_TYPE=text), so both sort alike."""

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} (originator_id TEXT NOT NULL, "
            "originator_version INTEGER NOT NULL, hash BLOB NOT NULL, "
            "PRIMARY KEY (originator_id, originator_version)) WITHOUT ROWID",
            VERIFIED_STATEMENT,
            BROKEN_STATEMENT,
            *self.guard_statements(),
        ]

    def _guards(self) -> list[tuple[str, str, str]]:
        """The triggers (name, table, verb) that delete a verified position when its events or chain
        rows change."""
        return [
            (f"{GUARD}_{table}_{verb.lower()}", table, verb)
            for table in (self.events_table_name, CHAIN_TABLE)
            for verb in ("UPDATE", "DELETE")
        ]

    def guard_statements(self) -> list[str]:
        """Makes the guard's triggers where they are missing."""
        return [
            f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {verb} ON {table} BEGIN "
            f"INSERT OR IGNORE INTO {BROKEN_TABLE} (originator_id, version, problem, detail, found_at, found_by) VALUES "
            f"(OLD.originator_id, OLD.originator_version, '{problem}', '{GUARD_DETAIL.format(problem)}', "
            f"strftime('%Y-%m-%dT%H:%M:%f', 'now') || '+00:00', '{GUARD_BY.replace(chr(39), chr(39) * 2)}'); "
            f"DELETE FROM {VERIFIED_TABLE} WHERE originator_id = OLD.originator_id; END"
            for name, table, verb in self._guards()
            for problem in ["changed" if verb == "UPDATE" else "deleted"]
        ]

    def verified_position(self, key: UUID) -> VerifiedPosition | None:
        with self.datastore.transaction(commit=False) as c:
            names = [name for name, _, _ in self._guards()]
            c.execute(  # the table, and the guard that keeps a position true (else none is trusted)
                "SELECT count(*) AS n FROM sqlite_master WHERE (type = 'table' AND name = ?) OR (type = 'trigger' AND name IN "
                f"({', '.join('?' * len(names))}))",
                (VERIFIED_TABLE, *names),
            )
            if c.fetchone()["n"] != 1 + len(names):
                return None
            c.execute(
                f"SELECT version, hash, verified_at, verified_by FROM {VERIFIED_TABLE} WHERE originator_id=?", (self._id(key),)
            )
            row = c.fetchone()
        if row is None:
            return None
        return VerifiedPosition(
            key, int(row["version"]), state_bytes(row["hash"]), datetime.fromisoformat(row["verified_at"]), row["verified_by"]
        )

    def broken_chain(self, key: UUID) -> BrokenChain | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (BROKEN_TABLE,))
            if c.fetchone() is None:
                return None
            c.execute(
                f"SELECT version, problem, detail, found_at, found_by FROM {BROKEN_TABLE} WHERE originator_id=?",
                (self._id(key),),
            )
            row = c.fetchone()
        if row is None:
            return None
        at = datetime.fromisoformat(row["found_at"])
        return BrokenChain(key, int(row["version"]), row["problem"], row["detail"], at, row["found_by"])

    def keep_verdicts(self, positions: Sequence[VerifiedPosition], broken: Sequence[BrokenChain]) -> None:
        if not positions and not broken:
            return
        with self.datastore.transaction(commit=True) as c:
            c.execute(VERIFIED_STATEMENT)
            c.execute(BROKEN_STATEMENT)
            for statement in self.guard_statements():
                c.execute(statement)
            c.executemany(
                f"INSERT INTO {VERIFIED_TABLE} (originator_id, version, hash, verified_at, verified_by) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (originator_id) DO UPDATE SET version = excluded.version, hash = excluded.hash, "
                "verified_at = excluded.verified_at, verified_by = excluded.verified_by",
                [(self._id(p.originator_id), p.version, p.hash, p.at.isoformat(), p.by) for p in positions],
            )
            c.executemany(
                f"DELETE FROM {BROKEN_TABLE} WHERE originator_id = ?", [(self._id(p.originator_id),) for p in positions]
            )
            c.executemany(
                f"INSERT INTO {BROKEN_TABLE} (originator_id, version, problem, detail, found_at, found_by) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (originator_id) DO UPDATE SET version = excluded.version, "
                "problem = excluded.problem, detail = excluded.detail, found_at = excluded.found_at, "
                "found_by = excluded.found_by",
                [(self._id(b.originator_id), b.version, b.problem, b.detail, b.at.isoformat(), b.by) for b in broken],
            )
            c.executemany(f"DELETE FROM {VERIFIED_TABLE} WHERE originator_id = ?", [(self._id(b.originator_id),) for b in broken])

    def _insert_events(self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        returning = super()._insert_events(c, stored_events, **kwargs)
        self._seal(c, stored_events)
        run_inline(kwargs, c)
        return returning

    def chain_mark(self) -> str | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CHAIN_KIND_TABLE,))
            if c.fetchone() is None:
                return None
            c.execute(f"SELECT mark FROM {CHAIN_KIND_TABLE} WHERE id = 1")
            row = c.fetchone()
        return None if row is None else str(row["mark"])

    def _chain_mark_put(self, cursor: Any, mark: str | None) -> None:
        cursor.execute(KIND_STATEMENT)
        if mark is None:
            cursor.execute(f"DELETE FROM {CHAIN_KIND_TABLE}")
        else:
            cursor.execute(
                f"INSERT INTO {CHAIN_KIND_TABLE} (id, kind, mark) VALUES (1, 'hmac-sha256', ?) "
                "ON CONFLICT (id) DO UPDATE SET mark = excluded.mark",
                (mark,),
            )

    def _chain_everything(self, cursor: Any) -> tuple[list[Stored], list[Link]]:
        cursor.execute(
            f"SELECT originator_id, originator_version, topic, state FROM {self.events_table_name} "
            "ORDER BY originator_id, originator_version"
        )
        events = [(self._uuid(r[0]), r[1], r[2], state_bytes(r[3])) for r in cursor.fetchall()]
        cursor.execute(f"SELECT originator_id, originator_version, hash FROM {CHAIN_TABLE}")
        return events, [(self._uuid(r[0]), r[1], state_bytes(r[2])) for r in cursor.fetchall()]

    def _chain_kept(self, cursor: Any, only: UUID | None) -> tuple[list[tuple[UUID, int, str]], list[Link]]:
        where, params = ("WHERE originator_id = ?", (self._id(only),)) if only is not None else ("", ())
        found: list[list[Any]] = []
        for table, column in ((BROKEN_TABLE, "problem"), (VERIFIED_TABLE, "hash")):
            cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
            if cursor.fetchone() is None:
                found.append([])
                continue
            cursor.execute(f"SELECT originator_id, version, {column} FROM {table} {where}", params)
            found.append([(self._uuid(r[0]), int(r[1]), r[2]) for r in cursor.fetchall()])
        return found[0], [(k, v, state_bytes(h)) for k, v, h in found[1]]

    def _chain_cut(self, cursor: Any, key: UUID) -> tuple[int, str] | None:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (BROKEN_TABLE,))
        if cursor.fetchone() is None:
            return None
        cursor.execute(
            f"SELECT version, problem FROM {BROKEN_TABLE} WHERE originator_id = ? AND problem IN ({', '.join('?' * len(CUTS))})",
            (self._id(key), *CUTS),
        )
        row = cursor.fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def _chained_earlier(self, cursor: Any, key: UUID, upto: int = 2**62) -> bool:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {self.events_table_name} e JOIN {CHAIN_TABLE} c ON c.originator_id = e.originator_id "
            "AND c.originator_version = e.originator_version WHERE e.originator_id != ? AND e.rowid < (SELECT max(rowid) "
            f"FROM {self.events_table_name} WHERE originator_id = ? AND originator_version <= ?)) AS found",
            (self._id(key), self._id(key), upto),
        )
        return bool(cursor.fetchone()[0])

    def _chain_replace(self, cursor: Any, rows: list[Link]) -> None:
        for name, table, _ in self._guards():  # the guard is for changes by hand: this one is chatrecord's
            if table == CHAIN_TABLE:
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        cursor.execute(f"DELETE FROM {CHAIN_TABLE}")
        self._chain_insert(cursor, rows)
        cursor.execute(BROKEN_STATEMENT)
        for statement in self.guard_statements():  # made again in the same transaction
            cursor.execute(statement)
        cursor.execute(VERIFIED_STATEMENT)
        cursor.execute(f"DELETE FROM {VERIFIED_TABLE}")  # their hashes were of the replaced links

    def _id(self, key: UUID) -> str:
        return key.hex if self.datastore.originator_id_type == "uuid" else str(key)

    @staticmethod
    @lru_cache(maxsize=1024)
    def _uuid(value: str) -> UUID:
        return UUID(value)

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        cursor.execute(f"SELECT hash FROM {CHAIN_TABLE} WHERE originator_id=? AND originator_version=?", (self._id(key), version))
        row = cursor.fetchone()
        return state_bytes(row["hash"]) if row else None

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        verb = "INSERT OR IGNORE" if missing_only else "INSERT"
        cursor.executemany(f"{verb} INTO {CHAIN_TABLE} VALUES (?, ?, ?)", [(self._id(k), v, h) for k, v, h in rows])

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        cursor.execute(
            f"SELECT originator_version, topic, state FROM {self.events_table_name} "
            "WHERE originator_id=? AND originator_version<=? ORDER BY originator_version",
            (self._id(key), upto),
        )
        return [(key, r["originator_version"], r["topic"], state_bytes(r["state"])) for r in cursor.fetchall()]

    def _page(self, table: str, columns: str, after: tuple[UUID, int] | None, only: UUID | None, limit: int = PAGE) -> list[Any]:
        where: list[str] = []
        params: list[str | int] = []
        if only is not None:
            where.append("originator_id=?")
            params.append(self._id(only))
        if after is not None and only is not None and after[0] == only:  # one conversation's: an index range
            where.append("originator_version > ?")
            params.append(after[1])
        elif after is not None:
            where.append("(originator_id, originator_version) > (?, ?)")
            params += [self._id(after[0]), after[1]]
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT originator_id, originator_version, {columns} FROM {table} {clause}"
                f"ORDER BY originator_id, originator_version LIMIT {int(limit)}",
                params,
            )
            rows: list[Any] = c.fetchall()
            return rows

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        rows = self._page(self.events_table_name, "topic, state", after, only)
        return [(self._uuid(r["originator_id"]), r["originator_version"], r["topic"], state_bytes(r["state"])) for r in rows]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None, limit: int = PAGE) -> list[Link]:
        rows = self._page(CHAIN_TABLE, "hash", after, only, limit)
        return [(self._uuid(r["originator_id"]), r["originator_version"], state_bytes(r["hash"])) for r in rows]
