"""The reproductions' streams in a SQL table (`SQLReproductionRows`):
`chatrecord_reproductions(reproduction, seq, conversation, kind, body, hash)`
(`adapters.store.reproductions`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import OperationalError, ProgrammingError

from adapters.backends.sql.dialect import Dialect
from adapters.store.reproductions import ReproductionRow, ReproductionRows, StreamConflict

TABLE = "chatrecord_reproductions"
COLUMNS = (
    "(reproduction TEXT NOT NULL, seq INTEGER NOT NULL, conversation TEXT NOT NULL, kind TEXT NOT NULL, "
    "body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (reproduction, seq))"
)


def create_statements(dialect: Dialect) -> list[str]:
    """Returns the statements that make the table and its index where they are missing."""
    return [
        f"CREATE TABLE IF NOT EXISTS {dialect.table(TABLE)} {COLUMNS}",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_conversation ON {dialect.table(TABLE)} (conversation)",
    ]


class SQLReproductionRows(ReproductionRows):
    """The table in the store's database (`datastore`, the library's). `create`: the statements that make
    it, which a backend may wrap in a lock."""

    def __init__(self, datastore: Any, dialect: Dialect, create: Sequence[str]) -> None:
        self.datastore, self.create_statements = datastore, list(create)
        table = dialect.table(TABLE)
        self.insert = (
            f"INSERT INTO {table} (reproduction, seq, conversation, kind, body, hash) VALUES ({dialect.params(6)}) "
            "ON CONFLICT (reproduction, seq) DO NOTHING RETURNING seq"
        )
        self.select = (
            f"SELECT reproduction, seq, conversation, kind, body, hash FROM {table} "
            f"WHERE conversation = {dialect.param} ORDER BY reproduction, seq"
        )

    def create(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            for statement in self.create_statements:
                curs.execute(statement)

    def append(self, *rows: ReproductionRow) -> None:
        with self.datastore.transaction(commit=True) as curs:  # an exception rolls every row back
            for row in rows:
                curs.execute(self.insert, (row.reproduction, row.seq, row.conversation, row.kind, row.body, row.hash))
                if curs.fetchone() is None:
                    raise StreamConflict(f"reproduction {row.reproduction} already holds an event at {row.seq}")

    def of_conversation(self, conversation: str) -> list[ReproductionRow]:
        try:
            with self.datastore.transaction(commit=False) as curs:
                curs.execute(self.select, (conversation,))
                rows = curs.fetchall()
        except (OperationalError, ProgrammingError) as error:  # no table yet: no reproduction was kept
            if TABLE not in str(error):
                raise
            return []
        return [
            ReproductionRow(r["reproduction"], int(r["seq"]), r["conversation"], r["kind"], r["body"], r["hash"]) for r in rows
        ]
