"""Which generation of the read models is live: the `chatrecord_projection` pointer table.

One row: the live generation, its rule set, and the next generation number to hand out. A
rebuild takes a new number, folds into that generation's fresh tables, then `switch` moves the
pointer and drops every older generation (the one it replaces and any a crashed rebuild left)
in one transaction. In memory the same bookkeeping is a small object kept per store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from threading import RLock
from typing import Any
from weakref import WeakKeyDictionary

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore

from adapters.application import ConversationStore
from adapters.pg_store import create_once, lock_key, table_exists
from adapters.readmodels_views import (
    POPOReadModelsView,
    PostgresReadModelsView,
    ReadModelsView,
    SQLiteReadModelsView,
    generation_name,
)
from domain.errors import ChatrecordError

POINTER_TABLE = "chatrecord_projection"
_GENERATION = re.compile(r"^readmodels_g(\d+)(?:_conversations|_tracking)?$")


class RebuildSuperseded(ChatrecordError):
    """Raised when a rebuild finishes after a later rebuild has already switched over; the
    later one stays live and the superseded generation is dropped."""


@dataclass(frozen=True)
class Pointer:
    """The live generation and the rule set its rows were folded under."""

    generation: int
    rules: str

    @property
    def name(self) -> str:
        return generation_name(self.generation)


class Catalog:
    """The pointer and the generations of one database."""

    def pointer(self) -> Pointer | None:
        """Returns the live generation, None before the first one was made."""
        raise NotImplementedError

    def view(self, generation: int, *, create: bool = False) -> ReadModelsView:
        """Returns the view of `generation`, creating its tables first if `create`."""
        raise NotImplementedError

    def start(self, rules: str) -> Pointer:
        """Returns the live generation, making generation 1 under `rules` live if none is."""
        raise NotImplementedError

    def allocate(self) -> int:
        """Returns a generation number never handed out before."""
        raise NotImplementedError

    def switch(self, generation: int, rules: str) -> tuple[str, ...]:
        """Makes `generation` live under `rules` and drops every older generation, in one
        transaction; returns the dropped tables. Raises RebuildSuperseded when a newer
        generation is live already (then `generation` itself is dropped)."""
        raise NotImplementedError

    def generations(self) -> set[int]:
        """Returns the numbers of the generations that have tables."""
        raise NotImplementedError


class SQLCatalog(Catalog):
    """The pointer table in SQLite or PostgreSQL; subclasses quote, list and drop."""

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore
        self._create_pointer(self._q(
            "CREATE TABLE IF NOT EXISTS {pointer} (id INTEGER PRIMARY KEY CHECK (id = 1), "
            "generation INTEGER NOT NULL, rules TEXT NOT NULL, next_generation INTEGER NOT NULL)"
        ))

    def _create_pointer(self, statement: str) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(statement)

    def _q(self, text: str) -> str:
        raise NotImplementedError

    def _names(self, curs: Any) -> list[str]:
        raise NotImplementedError

    def _drop(self, curs: Any, view: ReadModelsView) -> None:
        for table in view.tables:
            curs.execute(self._q("DROP TABLE IF EXISTS {schema}") + table)

    def pointer(self) -> Pointer | None:
        with self.datastore.transaction(commit=False) as curs:
            return self._pointer(curs)

    def _pointer(self, curs: Any) -> Pointer | None:
        curs.execute(self._q("SELECT generation, rules FROM {pointer} WHERE id = 1"))
        found = curs.fetchone()
        return Pointer(found["generation"], found["rules"]) if found else None

    def start(self, rules: str) -> Pointer:
        found = self.pointer()
        if found:
            return found
        self.view(1, create=True)
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                self._q("INSERT INTO {pointer} VALUES (1, 1, %s, 2) ON CONFLICT (id) DO NOTHING"), (rules,)
            )
            found = self._pointer(curs)
        assert found is not None
        return found

    def allocate(self) -> int:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self._q(
                "UPDATE {pointer} SET next_generation = next_generation + 1 WHERE id = 1 "
                "RETURNING next_generation - 1 AS generation"
            ))
            return int(curs.fetchone()["generation"])

    def switch(self, generation: int, rules: str) -> tuple[str, ...]:
        with self.datastore.transaction(commit=True) as curs:
            live = self._pointer(curs)
            if live is not None and live.generation > generation:
                self._drop(curs, self.view(generation))
                superseded = RebuildSuperseded(
                    f"generation {generation} ({rules}) was superseded by generation {live.generation} "
                    f"({live.rules}), which stays live; run the rebuild again to switch to {rules}"
                )
            else:
                curs.execute(self._q("UPDATE {pointer} SET generation = %s, rules = %s WHERE id = 1"),
                             (generation, rules))
                dropped: list[str] = []
                for old in sorted(self._generations(curs)):
                    if old < generation:
                        view = self.view(old)
                        self._drop(curs, view)
                        dropped += view.tables
                return tuple(dropped)
        raise superseded

    def generations(self) -> set[int]:
        with self.datastore.transaction(commit=False) as curs:
            return self._generations(curs)

    def _generations(self, curs: Any) -> set[int]:
        return {int(m.group(1)) for m in map(_GENERATION.match, self._names(curs)) if m}


class SQLiteCatalog(SQLCatalog):
    """Generations in a SQLite file; their tracking rows share the file's `tracking` table."""

    datastore: SQLiteDatastore

    def _q(self, text: str) -> str:
        return text.replace("{pointer}", POINTER_TABLE).replace("{schema}", "").replace("%s", "?")

    def view(self, generation: int, *, create: bool = False) -> ReadModelsView:
        view = SQLiteReadModelsView(self.datastore, generation_name(generation))
        if create:
            view.create_table()
        return view

    def _names(self, curs: Any) -> list[str]:
        curs.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'readmodels_g%'")
        names = [r["name"] for r in curs.fetchall()]
        curs.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'tracking'")
        if curs.fetchall():
            curs.execute("SELECT application_name FROM tracking WHERE application_name LIKE 'readmodels_g%'")
            names += [r["application_name"] for r in curs.fetchall()]
        return names

    def _drop(self, curs: Any, view: ReadModelsView) -> None:
        super()._drop(curs, view)
        curs.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'tracking'")
        if curs.fetchall():
            curs.execute("DELETE FROM tracking WHERE application_name = ?", (view.name,))


class PostgresCatalog(SQLCatalog):
    """Generations in a PostgreSQL schema, each with its own tracking table."""

    datastore: PostgresDatastore

    def _q(self, text: str) -> str:
        schema = '"' + self.datastore.schema.replace('"', '""') + '".'
        return text.replace("{pointer}", schema + POINTER_TABLE).replace("{schema}", schema)

    def _create_pointer(self, statement: str) -> None:
        # once, under the schema's lock: no DDL when it exists (a read-only replica can read)
        with self.datastore.get_connection() as conn:
            create_once(conn, lock_key(self.datastore.schema), table_exists(self.datastore.schema, POINTER_TABLE),
                        [statement])

    def view(self, generation: int, *, create: bool = False) -> ReadModelsView:
        view = PostgresReadModelsView(self.datastore, generation_name(generation))
        if create:
            view.create_table()
        return view

    def _names(self, curs: Any) -> list[str]:
        curs.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name LIKE 'readmodels\\_g%%'",
            (self.datastore.schema,),
        )
        return [r["table_name"] for r in curs.fetchall()]


class MemoryCatalog(Catalog):
    """Generations in memory, for a store on the library's in-memory persistence."""

    def __init__(self) -> None:
        self.lock = RLock()
        self.live: Pointer | None = None
        self.next_generation = 1
        self.views: dict[int, POPOReadModelsView] = {}

    def pointer(self) -> Pointer | None:
        with self.lock:
            return self.live

    def view(self, generation: int, *, create: bool = False) -> ReadModelsView:
        with self.lock:
            if generation not in self.views:
                if not create:
                    raise KeyError(f"no read models of generation {generation}")
                self.views[generation] = POPOReadModelsView(generation_name(generation), self.lock)
            return self.views[generation]

    def start(self, rules: str) -> Pointer:
        with self.lock:
            if self.live is None:
                self.view(self.allocate(), create=True)
                self.live = Pointer(1, rules)
            return self.live

    def allocate(self) -> int:
        with self.lock:
            self.next_generation += 1
            return self.next_generation - 1

    def switch(self, generation: int, rules: str) -> tuple[str, ...]:
        with self.lock:
            if self.live is not None and self.live.generation > generation:
                self.views.pop(generation).drop()
                raise RebuildSuperseded(f"generation {generation} was superseded by {self.live.generation}")
            self.live = Pointer(generation, rules)
            dropped: list[str] = []
            for old in [g for g in self.views if g < generation]:
                view = self.views.pop(old)
                view.drop()
                dropped += view.tables
            return tuple(dropped)

    def generations(self) -> set[int]:
        with self.lock:
            return set(self.views)


_MEMORY: WeakKeyDictionary[Any, MemoryCatalog] = WeakKeyDictionary()


def catalog_for(store: ConversationStore) -> Catalog:
    """Returns the catalog in the store's own database: its SQLite file, its PostgreSQL
    schema, or (in memory) one shared by every ReadModels of that store."""
    datastore = getattr(store.recorder, "datastore", None)
    if isinstance(datastore, SQLiteDatastore):
        return SQLiteCatalog(datastore)
    if isinstance(datastore, PostgresDatastore):
        return PostgresCatalog(datastore)
    if datastore is None:
        return _MEMORY.setdefault(store.recorder, MemoryCatalog())
    raise TypeError(f"no read models for a store on {type(store.recorder).__name__}")
