"""The application recorder with the hash chain (`ChainedPostgresRecorder`), in the store's schema."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from psycopg.sql import SQL, Identifier, Literal

from adapters.backends.postgres.append import AppendDocument
from adapters.backends.postgres.recorder import EventRecorder, Sealing
from adapters.backends.postgres.schema import schema_lock_name
from adapters.store.chain import (
    CHAIN_KIND_TABLE,
    CHAIN_TABLE,
    CUTS,
    GENESIS,
    PAGE,
    ChainedRecorder,
    Link,
    Stored,
    run_inline,
    state_bytes,
)
from adapters.store.chain_checks import BROKEN_TABLE, GUARD, GUARD_BY, GUARD_DETAIL, VERIFIED_TABLE, BrokenChain, VerifiedPosition
from adapters.store.chain_heads import ChainHeadCache


class ChainedPostgresRecorder(ChainedRecorder, EventRecorder):
    """The PostgreSQL application recorder (`EventRecorder`) with the hash chain, in the store's schema. The
    library's insert function (POSTGRES_ENABLE_DB_FUNCTIONS) would bypass the chain; it is never called."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.chain_heads: ChainHeadCache = ChainHeadCache()
        self._broken_made = False  # whether the stored breaks' table was seen (`_chain_cut`)
        self._sealing: Sealing = Sealing()  # the heads of this thread's transaction, until it commits
        self.chain_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(CHAIN_TABLE))
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {} (originator_id uuid NOT NULL, originator_version bigint NOT NULL, "
                "hash bytea NOT NULL, PRIMARY KEY (originator_id, originator_version))"
            ).format(self.chain_table)
        )
        self.verified_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(VERIFIED_TABLE))
        self.verified_statement = SQL(
            "CREATE TABLE IF NOT EXISTS {} (originator_id uuid PRIMARY KEY, version bigint NOT NULL, hash bytea NOT NULL, "
            "verified_at timestamptz NOT NULL, verified_by text NOT NULL)"
        ).format(self.verified_table)
        self.sql_create_statements.append(self.verified_statement)
        self.broken_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(BROKEN_TABLE))
        self.broken_statement = SQL(
            "CREATE TABLE IF NOT EXISTS {} (originator_id uuid PRIMARY KEY, version bigint NOT NULL, problem text NOT NULL, "
            "detail text NOT NULL, found_at timestamptz NOT NULL, found_by text NOT NULL)"
        ).format(self.broken_table)
        self.sql_create_statements.append(self.broken_statement)
        self.kind_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(CHAIN_KIND_TABLE))
        self.events_table = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(self.events_table_name))
        self.sql_create_statements.extend(self.guard_statements())
        # The lock timeout is a connection option (`PostgresFactory`), not a SET LOCAL per append.
        self.lock_table_statements = [SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(self.events_table)]

    def guard_statements(self) -> list[Any]:
        """The function and triggers that delete a conversation's verified position when one of its events
        or chain rows is updated or deleted (`chain_checks.GUARD`)."""
        function = SQL("{}.{}").format(Identifier(self.datastore.schema), Identifier(GUARD))
        made = [
            SQL(
                "CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $guard$ BEGIN "
                "INSERT INTO {} (originator_id, version, problem, detail, found_at, found_by) VALUES (OLD.originator_id, "
                "OLD.originator_version, CASE TG_OP WHEN 'UPDATE' THEN 'changed' ELSE 'deleted' END, "
                "CASE TG_OP WHEN 'UPDATE' THEN {} ELSE {} END, now(), {}) ON CONFLICT (originator_id) DO NOTHING; "
                "DELETE FROM {} WHERE originator_id = OLD.originator_id; RETURN NULL; END $guard$"
            ).format(
                function,
                self.broken_table,
                GUARD_DETAIL.format("changed"),
                GUARD_DETAIL.format("deleted"),
                GUARD_BY,
                self.verified_table,
            )
        ]
        for table in (self.events_table, self.chain_table):
            made.append(SQL("DROP TRIGGER IF EXISTS {} ON {}").format(Identifier(GUARD), table))
            made.append(
                SQL("CREATE TRIGGER {} AFTER UPDATE OR DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {}()").format(
                    Identifier(GUARD), table, function
                )
            )
        return made

    def _guarded(self) -> Any:
        """The query whose `g` is 2 where the guard's triggers are on both tables."""
        schema = self.datastore.schema
        return SQL(
            "(SELECT count(*) FROM pg_trigger WHERE tgname = {} AND tgrelid IN (to_regclass({}), to_regclass({})))"
        ).format(GUARD, f'"{schema}"."{self.events_table_name}"', f'"{schema}".{CHAIN_TABLE}')

    def verified_position(self, key: UUID) -> VerifiedPosition | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(  # the table, and the guard that keeps a position true (else none is trusted)
                SQL("SELECT to_regclass(%s) AS t, {} AS g").format(self._guarded()),
                (f'"{self.datastore.schema}".{VERIFIED_TABLE}',),
            )
            found = curs.fetchone()
            if found is None or found["t"] is None or found["g"] != 2:
                return None
            curs.execute(
                SQL("SELECT version, hash, verified_at, verified_by FROM {} WHERE originator_id = %s").format(
                    self.verified_table
                ),
                (key,),
            )
            row = curs.fetchone()
        if row is None:
            return None
        return VerifiedPosition(key, int(row["version"]), state_bytes(row["hash"]), row["verified_at"], row["verified_by"])

    def broken_chain(self, key: UUID) -> BrokenChain | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT to_regclass(%s) AS t", (f'"{self.datastore.schema}".{BROKEN_TABLE}',))
            found = curs.fetchone()
            if found is None or found["t"] is None:
                return None
            curs.execute(
                SQL("SELECT version, problem, detail, found_at, found_by FROM {} WHERE originator_id = %s").format(
                    self.broken_table
                ),
                (key,),
            )
            row = curs.fetchone()
        if row is None:
            return None
        return BrokenChain(key, int(row["version"]), row["problem"], row["detail"], row["found_at"], row["found_by"])

    def keep_verdicts(self, positions: Sequence[VerifiedPosition], broken: Sequence[BrokenChain]) -> None:
        if not positions and not broken:
            return
        with self.datastore.transaction(commit=True) as curs:
            self._make_verdict_tables(curs)
            self._guard(curs)
            if positions:
                curs.executemany(
                    SQL(
                        "INSERT INTO {} (originator_id, version, hash, verified_at, verified_by) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (originator_id) DO UPDATE SET version = excluded.version, hash = excluded.hash, "
                        "verified_at = excluded.verified_at, verified_by = excluded.verified_by"
                    ).format(self.verified_table),
                    [(p.originator_id, p.version, p.hash, p.at, p.by) for p in positions],
                )
                curs.execute(
                    SQL("DELETE FROM {} WHERE originator_id = ANY(%s)").format(self.broken_table),
                    ([p.originator_id for p in positions],),
                )
            if broken:
                curs.executemany(
                    SQL(
                        "INSERT INTO {} (originator_id, version, problem, detail, found_at, found_by) "
                        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (originator_id) DO UPDATE SET version = excluded.version, "
                        "problem = excluded.problem, detail = excluded.detail, found_at = excluded.found_at, "
                        "found_by = excluded.found_by"
                    ).format(self.broken_table),
                    [(b.originator_id, b.version, b.problem, b.detail, b.at, b.by) for b in broken],
                )
                curs.execute(
                    SQL("DELETE FROM {} WHERE originator_id = ANY(%s)").format(self.verified_table),
                    ([b.originator_id for b in broken],),
                )

    def chain_mark(self) -> str | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT to_regclass(%s) AS t", (f'"{self.datastore.schema}".{CHAIN_KIND_TABLE}',))
            found = curs.fetchone()
            if found is None or found["t"] is None:
                return None
            curs.execute(SQL("SELECT mark FROM {} WHERE id = 1").format(self.kind_table))
            row = curs.fetchone()
        return None if row is None else str(row["mark"])

    def _chain_mark_put(self, cursor: Any, mark: str | None) -> None:
        cursor.execute(
            SQL(
                "CREATE TABLE IF NOT EXISTS {} (id integer PRIMARY KEY CHECK (id = 1), kind text NOT NULL, mark text NOT NULL)"
            ).format(self.kind_table)
        )
        if mark is None:
            cursor.execute(SQL("DELETE FROM {}").format(self.kind_table))
        else:
            cursor.execute(
                SQL(
                    "INSERT INTO {} (id, kind, mark) VALUES (1, 'hmac-sha256', %s) ON CONFLICT (id) DO UPDATE SET mark = excluded.mark"
                ).format(self.kind_table),
                (mark,),
            )

    def _chain_everything(self, cursor: Any) -> tuple[list[Stored], list[Link]]:
        for statement in self.lock_table_statements:  # as an append takes it: appends wait for the re-key
            cursor.execute(statement)
        cursor.execute(
            SQL(
                "SELECT originator_id, originator_version, topic, state FROM {} ORDER BY originator_id, originator_version"
            ).format(self.events_table)
        )
        events = [(r["originator_id"], r["originator_version"], r["topic"], state_bytes(r["state"])) for r in cursor.fetchall()]
        cursor.execute(SQL("SELECT originator_id, originator_version, hash FROM {}").format(self.chain_table))
        return events, [(r["originator_id"], r["originator_version"], state_bytes(r["hash"])) for r in cursor.fetchall()]

    def _chain_kept(self, cursor: Any, only: UUID | None) -> tuple[list[tuple[UUID, int, str]], list[Link]]:
        where, params = (SQL(" WHERE originator_id = %s"), (only,)) if only is not None else (SQL(""), ())
        found: list[list[Any]] = []
        for name, table, column in ((BROKEN_TABLE, self.broken_table, "problem"), (VERIFIED_TABLE, self.verified_table, "hash")):
            cursor.execute("SELECT to_regclass(%s) AS t", (f'"{self.datastore.schema}".{name}',))
            if cursor.fetchone()["t"] is None:
                found.append([])
                continue
            cursor.execute(
                SQL("SELECT originator_id, version, {} AS c FROM {}").format(Identifier(column), table) + where, params
            )
            found.append([(r["originator_id"], int(r["version"]), r["c"]) for r in cursor.fetchall()])
        return found[0], [(k, v, state_bytes(h)) for k, v, h in found[1]]

    def _chain_cut(self, cursor: Any, key: UUID) -> tuple[int, str] | None:
        if not self._broken_made:  # a store an earlier version made may not have the table yet
            cursor.execute("SELECT to_regclass(%s) AS t", (f'"{self.datastore.schema}".{BROKEN_TABLE}',))
            if cursor.fetchone()["t"] is None:
                return None
            self._broken_made = True
        cursor.execute(
            SQL("SELECT version, problem FROM {} WHERE originator_id = %s AND problem = ANY(%s)").format(self.broken_table),
            (key, list(CUTS)),
        )
        row = cursor.fetchone()
        return None if row is None else (int(row["version"]), str(row["problem"]))

    def _chained_earlier(self, cursor: Any, key: UUID, upto: int = 2**62) -> bool:
        cursor.execute(
            SQL(
                "SELECT EXISTS (SELECT 1 FROM {0} e JOIN {1} c ON c.originator_id = e.originator_id AND c.originator_version = "
                "e.originator_version WHERE e.originator_id <> %s AND e.notification_id < (SELECT max(notification_id) "
                "FROM {0} WHERE originator_id = %s AND originator_version <= %s)) AS found"
            ).format(self.events_table, self.chain_table),
            (key, key, upto),
        )
        return bool(cursor.fetchone()["found"])

    def _chain_replace(self, cursor: Any, rows: list[Link]) -> None:
        # the guard is for changes by hand: this one is chatrecord's; made again in the same transaction
        cursor.execute(SQL("DROP TRIGGER IF EXISTS {} ON {}").format(Identifier(GUARD), self.chain_table))
        cursor.execute(SQL("DELETE FROM {}").format(self.chain_table))
        if rows:
            self._chain_insert(cursor, rows)
        cursor.execute(self.broken_statement)
        for statement in self.guard_statements():
            cursor.execute(statement)
        cursor.execute(self.verified_statement)
        cursor.execute(SQL("DELETE FROM {}").format(self.verified_table))  # their hashes were of the replaced links

    def _make_verdict_tables(self, curs: Any) -> None:
        """Makes the verdicts' tables where missing. Runs no DDL where both exist, so a read-only database
        refuses only the verdicts' rows."""
        curs.execute(
            SQL("SELECT to_regclass({}) IS NOT NULL AND to_regclass({}) IS NOT NULL AS made").format(
                Literal(self.verified_table.as_string(curs)), Literal(self.broken_table.as_string(curs))
            )
        )
        if not curs.fetchone()["made"]:
            curs.execute(self.verified_statement)
            curs.execute(self.broken_statement)

    def _guard(self, curs: Any) -> None:
        """Makes the guard where missing, under the schema's lock, so one process of several makes it."""
        curs.execute(SQL("SELECT {} AS g").format(self._guarded()))
        if curs.fetchone()["g"] == 2:
            return
        curs.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (schema_lock_name(self.datastore.schema),))
        curs.execute(SQL("SELECT {} AS g").format(self._guarded()))
        if curs.fetchone()["g"] != 2:
            for statement in self.guard_statements():
                curs.execute(statement)

    def write_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        if isinstance(curs, AppendDocument):  # the function takes the table lock and inserts them
            curs.put(
                "events",
                [
                    [str(e.originator_id), e.originator_version, e.topic, base64.b64encode(state_bytes(e.state)).decode()]
                    for e in stored_events
                ],
                (self.events_table_name,),
            )
            self._sealing.heads = self._seal(curs, stored_events)
            return
        self.write_as_statements(curs, stored_events)
        # another cursor of the same transaction: the ids are read from `curs` afterwards
        with curs.connection.cursor() as own:
            self._sealing.heads = self._seal(own, stored_events)

    def _committed(self, stored_events: Sequence[StoredEvent]) -> None:
        """Keeps the hashes this thread's transaction just committed (`ChainHeadCache`)."""
        heads, self._sealing.heads = self._sealing.heads, None
        if heads:
            self.chain_heads.remember(heads)

    def write_first(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        run_inline(kwargs, curs)

    def _chain_start(self, cursor: Any, key: UUID, version: int) -> bytes:
        if isinstance(cursor, AppendDocument) and version >= 0:  # the function checks it under the table's lock
            cursor.doc.setdefault("starts", []).append([str(key), version])
            return GENESIS
        return super()._chain_start(cursor, key, version)

    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        cursor.execute(
            SQL("SELECT hash FROM {} WHERE originator_id = %s AND originator_version = %s").format(self.chain_table),
            (key, version),
        )
        row = cursor.fetchone()
        return state_bytes(row["hash"]) if row else None

    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        if isinstance(cursor, AppendDocument) and not missing_only:
            cursor.put(
                "chain", [[str(key), version, base64.b64encode(digest).decode()] for key, version, digest in rows], (CHAIN_TABLE,)
            )
            return
        conflict = SQL(" ON CONFLICT DO NOTHING") if missing_only else SQL("")
        statement = SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(self.chain_table) + conflict
        if len(rows) == 1:
            cursor.execute(statement, rows[0])
        else:
            cursor.executemany(statement, rows)

    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        cursor.execute(
            SQL(
                "SELECT originator_version, topic, state FROM {} WHERE originator_id = %s "
                "AND originator_version <= %s ORDER BY originator_version"
            ).format(self.events_table),
            (key, upto),
        )
        return [(key, r["originator_version"], r["topic"], state_bytes(r["state"])) for r in cursor.fetchall()]

    def _page(self, table: Any, columns: str, after: tuple[UUID, int] | None, only: UUID | None, limit: int = PAGE) -> list[Any]:
        where: list[SQL] = []
        params: list[UUID | int] = []
        if only is not None:
            where.append(SQL("originator_id = %s"))
            params.append(only)
        if after is not None:
            where.append(SQL("(originator_id, originator_version) > (%s, %s)"))
            params += [after[0], after[1]]
        clause = SQL("WHERE {} ").format(SQL(" AND ").join(where)) if where else SQL("")
        statement = SQL(
            "SELECT originator_id, originator_version, {} FROM {} {}ORDER BY originator_id, originator_version LIMIT {}"
        ).format(SQL(columns), table, clause, int(limit))
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(statement, params)
            return curs.fetchall()

    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        rows = self._page(self.events_table, "topic, state", after, only)
        return [(r["originator_id"], r["originator_version"], r["topic"], state_bytes(r["state"])) for r in rows]

    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None, limit: int = PAGE) -> list[Link]:
        rows = self._page(self.chain_table, "hash", after, only, limit)
        return [(r["originator_id"], r["originator_version"], state_bytes(r["hash"])) for r in rows]
