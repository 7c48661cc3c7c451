"""Where the row read models live, per backend: transactions, the generation pointer, locks,
and the log's version of a conversation.

The pointer table `chatrecord_views` (one row: the live generation, its rule set, the next
generation number) says which generation's tables are live. Writers apply their events under a
shared lock and a rebuild switches generations under the exclusive one (PostgreSQL advisory
locks; SQLite's writer lock; a thread lock in memory), so no write lands in a generation after
it was switched away from.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.postgres import PostgresDatastore
from psycopg import pq
from eventsourcing.sqlite import SQLiteDatastore

from adapters.views.rows import (
    TABLES,
    BufferedRows,
    MemoryConversation,
    MemoryRows,
    SQLRows,
    create_statements,
    table_names,
)

POINTER = "chatrecord_views"
OLD_POINTER = "chatrecord_projection"
log = logging.getLogger("chatrecord")
LOCK_KEY = 0x63687276  # "chrv": the advisory lock of the views' generations


@dataclass(frozen=True)
class TurnRows:
    """What `PostgresBackend.turn_rows` read: the live pointer, the head row's body (None
    before the first event), the log's version, the entries' bodies joined by the record
    separator U+001E (which JSON never holds unescaped) and the newest outcomes' bodies joined
    by commas, oldest first; `matches` is False when the guessed generation was not the
    live one (then only `live` is read)."""

    live: Pointer
    head: str | None
    logged: int
    entries: str
    outcomes: str
    matches: bool = True


@dataclass(frozen=True)
class Pointer:
    """The live generation, its rule set, and the next generation number to hand out."""

    generation: int
    rules: str
    next: int


class Backend:
    """What the read models need of a database."""

    def transaction(self, write: bool) -> Any:
        """A context manager yielding a cursor of one transaction (committed if `write`)."""
        raise NotImplementedError

    def rows(self, curs: Any, generation: int, cid: UUID, buffered: bool = False) -> Any:
        """Returns the rows of conversation `cid` in `generation`, through `curs`; `buffered`
        rows hold their writes until `flush()` (a rebuild's page)."""
        raise NotImplementedError

    def pointer(self, curs: Any) -> Pointer | None:
        raise NotImplementedError

    def set_pointer(self, curs: Any, pointer: Pointer) -> None:
        raise NotImplementedError

    def create(self, curs: Any, generation: int) -> None:
        raise NotImplementedError

    def drop(self, curs: Any, generation: int) -> None:
        raise NotImplementedError

    def generations(self, curs: Any) -> set[int]:
        """Returns the generations whose tables exist."""
        raise NotImplementedError

    def lock(self, curs: Any, exclusive: bool) -> None:
        """Takes the generations' lock until the transaction ends."""

    def pointer_and_head(self, curs: Any, cid: UUID, generation: int) -> tuple[Pointer | None, str | None]:
        """Returns the live pointer and, where the backend reads both at once, the head row's
        body of `cid` in generation `generation` (None: read the head through `rows`)."""
        return self.pointer(curs), None

    def turn_rows(self, curs: Any, cid: UUID, generation: int, newest: int) -> TurnRows | None:
        """Where the backend reads a turn's rows in one statement: see `PostgresBackend`."""
        return None

    @contextmanager
    def savepoint(self, curs: Any, on_failure: Callable[[Exception], object] | None = None) -> Iterator[Any]:
        """Yields `curs` inside a savepoint of its transaction: an error inside rolls back to it,
        is logged, is handed to `on_failure`, and does not end the transaction."""
        name = "chatrecord_views"
        curs.execute(f"SAVEPOINT {name}")
        try:
            yield curs
        except Exception as error:  # noqa: BLE001 - the events stand; a later read catches up
            if on_failure is not None:
                on_failure(error)
            curs.execute(f"ROLLBACK TO SAVEPOINT {name}")
            log.warning("chatrecord: the read models were not updated with this write (%s); "
                        "the next read catches up", error)
        curs.execute(f"RELEASE SAVEPOINT {name}")

    def log_version(self, curs: Any, cid: UUID) -> int:
        """Returns the version of the conversation's newest stored event, 0 if none."""
        raise NotImplementedError

    def old_tables(self, curs: Any) -> tuple[str | None, list[str]]:
        """Returns the rule set of the previous version's views and their tables, if any."""
        return None, []


class SQLBackend(Backend):
    p = "?"
    schema = ""

    def __init__(self, datastore: Any, events_table: str) -> None:
        self.datastore, self.events_table = datastore, events_table
        self._has_pointer = False

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Any]:
        with self.datastore.transaction(commit=write) as curs:
            yield curs

    def rows(self, curs: Any, generation: int, cid: UUID, buffered: bool = False) -> SQLRows:
        kind = BufferedRows if buffered else SQLRows
        return kind(curs, table_names(generation, self.schema), str(cid), self.p)

    def _t(self, name: str) -> str:
        return f'"{self.schema}".{name}' if self.schema else name

    def _x(self, curs: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
        curs.execute(sql.replace("?", self.p), params)
        return curs

    def pointer(self, curs: Any) -> Pointer | None:
        if not self._has_pointer and not self._exists(curs, POINTER):
            return None
        row = self._x(curs, f"SELECT generation, rules, next FROM {self._t(POINTER)} WHERE id = 1").fetchone()
        if row is None:
            return None
        self._has_pointer = True  # the pointer table is never dropped: no need to ask again
        return Pointer(int(row["generation"]), row["rules"], int(row["next"]))

    def pointer_and_head(self, curs: Any, cid: UUID, generation: int) -> tuple[Pointer | None, str | None]:
        """Returns the live pointer and, when its generation is `generation` (the caller's
        guess), the head row's body of conversation `cid` in it, in one statement; the body is
        None when the guess was wrong (or the conversation has no head yet)."""
        if not self._has_pointer:
            return self.pointer(curs), None
        heads = table_names(generation, self.schema)["heads"]
        row = self._x(curs, f"SELECT p.generation, p.rules, p.next, h.body FROM {self._t(POINTER)} p "
                            f"LEFT JOIN {heads} h ON h.cid = ? WHERE p.id = 1", (str(cid),)).fetchone()
        if row is None:
            return None, None
        live = Pointer(int(row["generation"]), row["rules"], int(row["next"]))
        return live, (row["body"] if live.generation == generation else None)

    def set_pointer(self, curs: Any, pointer: Pointer) -> None:
        self._x(curs, f"CREATE TABLE IF NOT EXISTS {self._t(POINTER)} "
                      "(id INTEGER PRIMARY KEY, generation BIGINT NOT NULL, rules TEXT NOT NULL, next BIGINT NOT NULL)")
        self._x(curs, f"INSERT INTO {self._t(POINTER)} (id, generation, rules, next) VALUES (1, ?, ?, ?) "
                      "ON CONFLICT (id) DO UPDATE SET generation = excluded.generation, rules = excluded.rules, "
                      "next = excluded.next", (pointer.generation, pointer.rules, pointer.next))

    def create(self, curs: Any, generation: int) -> None:
        for statement in create_statements(generation, self.schema):
            self._x(curs, statement)

    def drop(self, curs: Any, generation: int) -> None:
        for table in table_names(generation, self.schema).values():
            self._x(curs, f"DROP TABLE IF EXISTS {table}")

    def generations(self, curs: Any) -> set[int]:
        found = set()
        for name in self._tables(curs):
            if name.startswith("views_g") and name.endswith("_heads"):
                found.add(int(name[len("views_g"):-len("_heads")]))
        return found

    def log_version(self, curs: Any, cid: UUID) -> int:
        row = self._x(curs, f"SELECT originator_version AS v FROM {self._t(self.events_table)} "
                            "WHERE originator_id = ? ORDER BY originator_version DESC LIMIT 1", (self._id(cid),)).fetchone()
        return int(row["v"]) if row else 0

    def old_tables(self, curs: Any) -> tuple[str | None, list[str]]:
        names = [n for n in self._tables(curs) if n.startswith("readmodels_g")]
        rules = None
        if self._exists(curs, OLD_POINTER):
            row = self._x(curs, f"SELECT * FROM {self._t(OLD_POINTER)}").fetchone()
            rules = row["rules"] if row else None
            names.append(OLD_POINTER)
        return rules, names

    def drop_table(self, curs: Any, name: str) -> None:
        self._x(curs, f"DROP TABLE IF EXISTS {self._t(name)}")

    def _id(self, cid: UUID) -> Any:
        return str(cid)

    def _tables(self, curs: Any) -> list[str]:
        raise NotImplementedError

    def _exists(self, curs: Any, name: str) -> bool:
        return name in self._tables(curs)


class SQLiteBackend(SQLBackend):
    def _id(self, cid: UUID) -> Any:
        return cid.hex  # the library stores a UUID's hex

    def _tables(self, curs: Any) -> list[str]:
        return [r["name"] for r in self._x(curs, "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]


class PostgresBackend(SQLBackend):
    p = "%s"

    def turn_rows(self, curs: Any, cid: UUID, generation: int, newest: int) -> TurnRows | None:
        """Reads, in one statement, what a turn read needs besides transcript messages: the
        live pointer, the head row of `cid` in generation `generation` (the caller's guess),
        the log's version, the kept run record entries and the `newest` card outcomes.
        Returns None when the pointer table is not known yet or the guess was wrong (the
        caller reads row by row, and guesses the live generation next time)."""
        if not self._has_pointer:
            return None
        t = table_names(generation, self.schema)
        row = self._x(curs, (
            "SELECT p.generation, p.rules, p.next, "
            f"(SELECT body FROM {t['heads']} WHERE cid = %(cid)s) AS head, "
            f"(SELECT max(originator_version) FROM {self._t(self.events_table)} WHERE originator_id = %(key)s) AS logged, "
            f"(SELECT string_agg(body, chr(30) ORDER BY seq) FROM {t['entries']} WHERE cid = %(cid)s) AS entries, "
            "(SELECT string_agg(body, ',' ORDER BY v, sub) FROM (SELECT v, sub, body FROM "
            f"{t['outcomes']} WHERE cid = %(cid)s ORDER BY v DESC, sub DESC LIMIT %(newest)s) o) AS outcomes "
            f"FROM {self._t(POINTER)} p WHERE p.id = 1"), {"cid": str(cid), "key": cid, "newest": newest}).fetchone()
        if row is None:
            return None
        live = Pointer(int(row["generation"]), row["rules"], int(row["next"]))
        if live.generation != generation:
            return TurnRows(live, None, 0, "", "", matches=False)
        return TurnRows(live, row["head"], int(row["logged"] or 0), row["entries"] or "", row["outcomes"] or "")

    @contextmanager
    def savepoint(self, curs: Any, on_failure: Callable[[Exception], object] | None = None) -> Iterator[Any]:
        """As `Backend.savepoint`, through psycopg's nested transaction. In pipeline mode (a
        small append, `adapters.store.postgres.EventRecorder`) the savepoint's statements are
        synced before it is released, so a failing view statement rolls back to it here
        rather than failing the events' transaction at its end."""
        conn = curs.connection
        piped = conn.pgconn.pipeline_status != pq.PipelineStatus.OFF
        try:
            with conn.transaction(savepoint_name="chatrecord_views"):
                if piped:
                    with conn.pipeline():  # leaving a nested pipeline block syncs
                        yield curs
                else:
                    yield curs
        except Exception as error:  # noqa: BLE001 - the events stand; a later read catches up
            if on_failure is not None:
                on_failure(error)
            log.warning("chatrecord: the read models were not updated with this write (%s); "
                        "the next read catches up", error)

    def __init__(self, datastore: PostgresDatastore, events_table: str) -> None:
        super().__init__(datastore, events_table)
        self.schema = datastore.schema

    def _tables(self, curs: Any) -> list[str]:
        rows = self._x(curs, "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                       (self.schema,)).fetchall()
        return [r["table_name"] for r in rows]

    def _exists(self, curs: Any, name: str) -> bool:
        row = self._x(curs, "SELECT to_regclass(?) AS t", (f'"{self.schema}".{name}',)).fetchone()
        return row["t"] is not None

    def lock(self, curs: Any, exclusive: bool) -> None:
        fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
        self._x(curs, f"SELECT {fn}(?)", (LOCK_KEY,))

    def _id(self, cid: UUID) -> Any:
        return cid


class MemoryBackend(Backend):
    """The in-memory store's views: dicts per generation, under one lock."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.lock_ = threading.RLock()
        self.tables: dict[int, dict[UUID, MemoryConversation]] = {}
        self.ptr: Pointer | None = None

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Any]:
        with self.lock_:
            yield None

    @contextmanager
    def savepoint(self, curs: Any, on_failure: Callable[[Exception], object] | None = None) -> Iterator[Any]:
        try:
            with self.lock_:
                yield None
        except Exception as error:  # noqa: BLE001 - rows in memory cannot roll back; reads catch up
            if on_failure is not None:
                on_failure(error)
            log.warning("chatrecord: the read models were not updated with this write (%s)", error)

    def rows(self, curs: Any, generation: int, cid: UUID, buffered: bool = False) -> MemoryRows:
        return MemoryRows(self.tables[generation].setdefault(cid, MemoryConversation()))

    def pointer(self, curs: Any) -> Pointer | None:
        return self.ptr

    def set_pointer(self, curs: Any, pointer: Pointer) -> None:
        self.ptr = pointer

    def create(self, curs: Any, generation: int) -> None:
        self.tables.setdefault(generation, {})

    def drop(self, curs: Any, generation: int) -> None:
        self.tables.pop(generation, None)

    def generations(self, curs: Any) -> set[int]:
        return set(self.tables)

    def log_version(self, curs: Any, cid: UUID) -> int:
        found = self.recorder.select_events(cid, desc=True, limit=1)
        return found[0].originator_version if found else 0


def backend_for(store: Any) -> Backend:
    """Returns the backend of a ConversationStore's database."""
    recorder = store.recorder
    datastore = getattr(recorder, "datastore", None)
    if isinstance(datastore, PostgresDatastore):
        return PostgresBackend(datastore, recorder.events_table_name)
    if isinstance(datastore, SQLiteDatastore):
        return SQLiteBackend(datastore, recorder.events_table_name)
    backend = getattr(store, "_memory_views", None)
    if backend is None:
        backend = store._memory_views = MemoryBackend(recorder)
    return backend


__all__ = ["TABLES", "Backend", "Pointer", "backend_for"]
