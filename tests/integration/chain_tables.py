"""The chain's tables changed directly, as one who can write the store's database would: a
mixin per backend with `run(statement, params, guard)`, the demo conversation's stored events
and links. `guard=False` goes past the store's guard (`adapters.store.chain_checks.GUARD`: its
triggers dropped or disabled for that statement, and put back); a test class whose every change
goes past it sets `past_the_guard`."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
from psycopg import sql

from adapters.store.chain_checks import GUARD
from domain.events import conversation_uuid
from tests.integration.backends import PostgresStores, SQLiteStores

DEMO = conversation_uuid("conv-demo-seo")
TABLES = {
    "events": ("stored_events", "conversationstore_events"),
    "chain": ("chatrecord_chain", "chatrecord_chain"),
    "kind": ("chatrecord_chain_kind", "chatrecord_chain_kind"),
    "verified": ("chatrecord_chain_verified", "chatrecord_chain_verified"),
    "broken": ("chatrecord_chain_broken", "chatrecord_chain_broken"),
}
"""The names `{events}`, `{chain}`, ... of a statement stand for: (SQLite's, PostgreSQL's)."""


class ChainTables:
    past_the_guard = False
    """Whether a change goes past the store's guard where `run` is not told."""

    def run(self, statement: str, params: tuple[Any, ...] = (), guard: bool | None = None) -> list[Any]:
        """Runs `statement` (`?` parameters; {events}, {chain}, {kind}, {verified}, {broken}
        stand for the tables) on the store's database, past the guard where `guard` is False."""
        raise NotImplementedError

    def key(self, value: Any) -> Any:
        """The demo conversation's id as its tables key it."""
        return value

    def guarded(self, guard: bool | None) -> bool:
        return not self.past_the_guard if guard is None else guard

    def events(self) -> dict[int, tuple[str, bytes]]:
        rows = self.run("SELECT originator_version, topic, state FROM {events} WHERE originator_id = ?", (self.key(DEMO),))
        return {v: (t, bytes(s)) for v, t, s in rows}

    def links(self) -> dict[int, bytes]:
        rows = self.run("SELECT originator_version, hash FROM {chain} WHERE originator_id = ?", (self.key(DEMO),))
        return {v: bytes(h) for v, h in rows}


class SQLiteChainTables(SQLiteStores, ChainTables):
    def key(self, value: Any) -> Any:
        return value.hex

    def run(self, statement: str, params: tuple[Any, ...] = (), guard: bool | None = None) -> list[Any]:
        query = statement.format(**{name: tables[0] for name, tables in TABLES.items()})
        with sqlite3.connect(self.path) as conn:
            guards = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE ?", (f"{GUARD}%",))
            dropped = [] if self.guarded(guard) else guards.fetchall()
            for name, _ in dropped:
                conn.execute(f"DROP TRIGGER {name}")
            try:
                return conn.execute(query, params).fetchall()
            finally:
                for _, made in dropped:
                    conn.execute(made)


class PostgresChainTables(PostgresStores, ChainTables):
    def run(self, statement: str, params: tuple[Any, ...] = (), guard: bool | None = None) -> list[Any]:
        query = sql.SQL(statement.replace("?", "%s")).format(
            **{name: sql.Identifier(self.schema, tables[1]) for name, tables in TABLES.items()}
        )
        guarded = [] if self.guarded(guard) else [TABLES["events"][1], TABLES["chain"][1]]
        with psycopg.connect(self.url) as conn:  # the guard disabled and enabled again in the same transaction
            for table in guarded:
                conn.execute(
                    sql.SQL("ALTER TABLE {} DISABLE TRIGGER {}").format(sql.Identifier(self.schema, table), sql.Identifier(GUARD))
                )
            cursor = conn.execute(query, params)
            found = cursor.fetchall() if cursor.description else []
            for table in guarded:
                conn.execute(
                    sql.SQL("ALTER TABLE {} ENABLE TRIGGER {}").format(sql.Identifier(self.schema, table), sql.Identifier(GUARD))
                )
            return found
