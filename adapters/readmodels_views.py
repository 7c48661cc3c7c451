"""The read-model views: the library's tracking recorders with one table of rows each.

A view is one generation of the materialised projection, named `readmodels_g<N>`. Its rows
table `readmodels_g<N>_conversations` holds one row per conversation (`adapters.readmodels_fold.Row`);
its tracking position is the library's single-row tracking record under the generation's name
(PostgreSQL: its own table `readmodels_g<N>_tracking`; SQLite: the file's one `tracking` table,
keyed by `application_name`; in memory: the recorder's dict).

`fold_batch` is the only writer. In one transaction it checks that the position is the one the
batch was read after, writes the changed rows and records the new position with the library's
`_insert_tracking`, which refuses a position that does not advance. Rows and position commit
together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from threading import RLock
from typing import Any
from uuid import UUID

from eventsourcing.persistence import OperationalError, Tracking, TrackingRecorder
from eventsourcing.popo import POPOTrackingRecorder
from eventsourcing.postgres import PostgresDatastore, PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteDatastore, SQLiteTrackingRecorder
from psycopg.sql import SQL, Identifier

from adapters.readmodels_fold import PositionMoved, Row, Turn, dump_state, load_state

Change = Callable[[Mapping[UUID, Row]], Mapping[UUID, Row]]

COLUMNS = (
    "originator_id", "conversation", "version", "position", "state",
    "turn_message", "turn_at", "turn_version", "turn_state", "edited",
)


def generation_name(generation: int) -> str:
    """Returns the projection name of generation `generation`: `readmodels_g<N>`."""
    return f"readmodels_g{generation}"


class ReadModelsView(TrackingRecorder):
    """What every backend's view does; `name` is the generation's projection name."""

    name: str

    @property
    def tables(self) -> tuple[str, ...]:
        """Returns the names of the tables this generation owns."""
        raise NotImplementedError

    def position(self) -> int:
        """Returns the notification id of the last event applied, 0 before the first."""
        return self.max_tracking_id(self.name) or 0

    def fold_batch(
        self, start: int, tracking: Tracking, ids: set[UUID], change: Change, known: Mapping[UUID, Row] | None = None
    ) -> None:
        """Writes the rows `change` returns for the current rows of `ids`, and records
        `tracking`, in one transaction. Raises PositionMoved when the position is not `start`,
        IntegrityError when `tracking` does not advance it; nothing is written then.

        `known` are rows the caller itself committed at position `start`; since the position
        is still `start`, they are current and are not read again."""
        raise NotImplementedError

    def row(self, aggregate_id: UUID) -> Row | None:
        """Returns the row of a conversation, None if it has none."""
        raise NotImplementedError

    def count(self) -> int:
        """Returns how many conversations have a row."""
        raise NotImplementedError

    def _before_commit(self, curs: Any) -> None:
        """Runs inside `fold_batch`'s transaction after every write (a hook for crash tests)."""


# ---------------------------------------------------------------------- SQL


class SQLReadModelsView(ReadModelsView):
    """The SQL shared by SQLite and PostgreSQL; subclasses say how to quote and lock."""

    rows_table: str
    datastore: Any

    def _q(self, text: str) -> str:
        raise NotImplementedError

    def _lock(self, curs: Any) -> None:
        """Serialises the writers of this generation until the transaction ends."""

    def _time(self, value: Any) -> datetime:
        return value if isinstance(value, datetime) else datetime.fromisoformat(value)

    def fold_batch(
        self, start: int, tracking: Tracking, ids: set[UUID], change: Change, known: Mapping[UUID, Row] | None = None
    ) -> None:
        known = known or {}
        with self.datastore.transaction(commit=True) as curs:
            self._lock(curs)
            now = self._max_tracking_id(self.name, curs) or 0
            if now != start:
                raise PositionMoved(f"{self.name} is at position {now}, not {start}; the batch is not written")
            rows = {i: known[i] for i in ids if i in known}
            rows.update(self._select(curs, {i for i in ids if i not in known}))
            changed = change(rows)
            if changed:
                curs.executemany(self._q(self._upsert_sql()), [self._params(r) for r in changed.values()])
            self._insert_tracking(curs, tracking)
            self._before_commit(curs)

    def _upsert_sql(self) -> str:
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
        values = ", ".join(["%s"] * len(COLUMNS))
        return (
            f"INSERT INTO {{rows}} ({', '.join(COLUMNS)}) VALUES ({values}) "
            f"ON CONFLICT (originator_id) DO UPDATE SET {updates}"
        )

    def _params(self, row: Row) -> tuple[Any, ...]:
        turn = row.turn
        own_state = turn is not None and turn.version != row.version
        return (
            self._key(row.aggregate_id), row.conversation, row.version, row.position,
            dump_state(row.state),
            turn.message if turn else None,
            self._at(turn.at) if turn else None,
            turn.version if turn else None,
            dump_state(turn.state) if own_state else None,
            row.edited,
        )

    def _key(self, aggregate_id: UUID) -> Any:
        return str(aggregate_id)

    def _at(self, at: datetime) -> Any:
        return at.isoformat()

    _select_list = ", ".join(COLUMNS)

    def _select(self, curs: Any, ids: set[UUID]) -> dict[UUID, Row]:
        if not ids:
            return {}
        marks = ", ".join(["%s"] * len(ids))
        curs.execute(
            self._q(f"SELECT {self._select_list} FROM {{rows}} WHERE originator_id IN ({marks})"),
            [self._key(i) for i in ids],
        )
        return {row.aggregate_id: row for row in map(self._row, curs.fetchall())}

    def _row(self, record: Any) -> Row:
        state = load_state(record["state"])
        turn = None
        if record["turn_message"] is not None:
            turn_state = state if record["turn_state"] is None else load_state(record["turn_state"])
            turn = Turn(record["turn_message"], self._time(record["turn_at"]), record["turn_version"], turn_state)
        key = record["originator_id"]
        return Row(
            aggregate_id=key if isinstance(key, UUID) else UUID(key),
            conversation=record["conversation"],
            version=record["version"],
            position=record["position"],
            state=state,
            turn=turn,
            edited=record["edited"],
        )

    def row(self, aggregate_id: UUID) -> Row | None:
        with self.datastore.transaction(commit=False) as curs:
            return self._select(curs, {aggregate_id}).get(aggregate_id)

    def count(self) -> int:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self._q("SELECT COUNT(*) AS n FROM {rows}"))
            return int(curs.fetchone()["n"])


class SQLiteReadModelsView(SQLReadModelsView, SQLiteTrackingRecorder):
    """A generation in a SQLite file; its tracking row lives in the file's `tracking` table."""

    def __init__(self, datastore: SQLiteDatastore, name: str) -> None:
        self.name = name
        self.rows_table = f"{name}_conversations"
        super().__init__(datastore)

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.rows_table,)

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {self.rows_table} ("
            "originator_id TEXT PRIMARY KEY, conversation TEXT NOT NULL, version INTEGER NOT NULL, "
            "position INTEGER NOT NULL, state TEXT NOT NULL, turn_message INTEGER, turn_at TEXT, "
            "turn_version INTEGER, turn_state TEXT, edited INTEGER)",
        ]

    def _q(self, text: str) -> str:
        return text.replace("{rows}", self.rows_table).replace("%s", "?")


class PostgresReadModelsView(SQLReadModelsView, PostgresTrackingRecorder):
    """A generation in PostgreSQL: tables `<name>_conversations` and `<name>_tracking`."""

    def __init__(self, datastore: PostgresDatastore, name: str) -> None:
        self.name = name
        self.rows_table = f"{name}_conversations"
        super().__init__(datastore, tracking_table_name=f"{name}_tracking")
        self.check_identifier_length(self.rows_table)
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {0}.{1} ("
                "originator_id uuid PRIMARY KEY, conversation text NOT NULL, version integer NOT NULL, "
                # JSON kept as text, not jsonb: jsonb refuses a NUL character (\u0000) that
                # a chat text may hold, which would stop the projection for good
                "position bigint NOT NULL, state text NOT NULL, turn_message integer, "
                "turn_at timestamptz, turn_version integer, turn_state text, edited integer)"
            ).format(Identifier(datastore.schema), Identifier(self.rows_table))
        )

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.rows_table, self.tracking_table_name)

    def _q(self, text: str) -> str:
        schema = self.datastore.schema.replace('"', '""')
        rows = f'"{schema}"."{self.rows_table}"'
        return text.replace("{rows}", rows)

    def _lock(self, curs: Any) -> None:
        curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.datastore.schema}.{self.name}",))

    def _key(self, aggregate_id: UUID) -> Any:
        return aggregate_id

    def _at(self, at: datetime) -> Any:
        return at


# ---------------------------------------------------------------------- in memory


class POPOReadModelsView(ReadModelsView, POPOTrackingRecorder):
    """A generation in memory: a dict of rows beside the library's in-memory tracking."""

    def __init__(self, name: str, lock: RLock | None = None) -> None:
        super().__init__()
        if lock is not None:
            self._database_lock = lock
        self.name = name
        self.dropped = False
        self._rows: dict[UUID, Row] = {}

    def drop(self) -> None:
        """Drops the generation: every later read or write raises OperationalError, as a
        dropped table does in SQL."""
        with self._database_lock:
            self.dropped = True
            self._rows.clear()

    def _check(self) -> None:
        if self.dropped:
            raise OperationalError(f"no such table: {self.name}_conversations")

    @property
    def tables(self) -> tuple[str, ...]:
        return (f"{self.name}_conversations",)

    def fold_batch(
        self, start: int, tracking: Tracking, ids: set[UUID], change: Change, known: Mapping[UUID, Row] | None = None
    ) -> None:
        with self._database_lock:
            self._check()
            now = self._max_tracking_ids[self.name] or 0
            if now != start:
                raise PositionMoved(f"{self.name} is at position {now}, not {start}; the batch is not written")
            staged = change({i: self._rows[i] for i in ids if i in self._rows})
            self._assert_tracking_uniqueness(tracking)
            self._before_commit(None)
            self._insert_tracking(tracking)
            self._rows.update(staged)

    def row(self, aggregate_id: UUID) -> Row | None:
        with self._database_lock:
            self._check()
            return self._rows.get(aggregate_id)

    def count(self) -> int:
        with self._database_lock:
            self._check()
            return len(self._rows)
