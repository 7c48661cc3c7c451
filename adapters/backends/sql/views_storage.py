"""Where the row read models live, per backend: transactions, the generation pointer, locks, and a
conversation's log version.

The pointer table `chatrecord_views` (one row: live generation, rule set, next number) names the live
tables. Writers apply under a shared lock; a rebuild switches under the exclusive one. So no write lands
in a generation after its switch. `SQLViewStorage` is `ViewStorage`'s SQL part; each backend has its own,
which its factory hands out (`StoreFactory.view_storage`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from adapters.backends.sql.views_buffered import BufferedRows, StatementRows
from adapters.backends.sql.views_overview import OverviewStatements, read_overview
from adapters.backends.sql.views_rows import SQLRows
from adapters.backends.sql.views_statements import RowStatements
from adapters.backends.sql.views_tables import (
    LISTING,
    USAGE,
    USAGE_SUMMED,
    create_statements,
    listing_name,
    overview_table_names,
    table_names,
    usage_name,
)
from adapters.store.crypto import ViewTexts
from adapters.views.listing import OUTCOMES, Listed, ListQuery, like_pattern
from adapters.views.ports import ViewStorage, not_updated
from adapters.views.row_tables import OVERVIEW_TABLES
from adapters.views.storage_reads import Pointer
from adapters.views.usage_rows import UNKNOWN_OWNER, UsageQuery, UsageSums
from projections.overview import Marks, Overview

POINTER = "chatrecord_views"
STATUS_SQL = {"failed": "failed > 0", "waiting": "waiting > 0", "undecided": "undecided > 0", "erased": "erased = 1"}
"""The condition on a list row (`LISTING`) of each of `adapters.views.listing.OUTCOMES`."""
OLD_POINTER = "chatrecord_projection"
USAGE_KEYS = {"conversation": "conversation", "owner": f"COALESCE(owner, {UNKNOWN_OWNER})", "day": "day"}
"""The key of each grouping of the usage rows (`adapters.views.usage_rows.BY`)."""
SPLIT = 2**32
"""Each count is summed in two parts, `c / SPLIT` and the rest (a count is never negative; no `%`, which
psycopg reads as a placeholder), so no
sum of fewer than 2**31 rows passes 64 bits: SQLite's SUM raises "integer overflow" there, and
PostgreSQL's cast of its numeric sum to bigint "out of range". `_sums` adds them back exactly."""
USAGE_SUMS = ", ".join(
    [
        "COUNT(*) AS segments",
        *(
            f"CAST(SUM({c} / {SPLIT}) AS BIGINT) AS {c}_hi, CAST(SUM({c} - {c} / {SPLIT} * {SPLIT}) AS BIGINT) AS {c}_lo"
            for c in USAGE_SUMMED
        ),
        "MIN(at) AS first_at",
        "MAX(at) AS last_at",
    ]
)
"""The sums of usage rows (`UsageSums`), each in two parts (`SPLIT`); SUM skips NULLs, and is NULL
where every value is."""


def _sums(row: Any, key: Any) -> UsageSums:
    """Returns the `UsageSums` of a row of `USAGE_SUMS` (a count summed over no row: 0)."""
    found = UsageSums(None if key is None else key if isinstance(key, str) else int(key))
    found.segments = int(row["segments"])
    for column in USAGE.columns:
        if column.name in USAGE_SUMMED:  # a nullable count summed over unknowns only is unknown, else 0
            high, low = row[f"{column.name}_hi"], row[f"{column.name}_lo"]
            value = None if high is None else int(high) * SPLIT + int(low)
            setattr(found, column.name, (None if column.null else 0) if value is None else value)
    for name in ("first_at", "last_at"):
        setattr(found, name, None if row[name] is None else int(row[name]))
    return found


class SQLViewStorage(ViewStorage):
    """The views in a SQL database (`datastore`, the library's; `events_table`, its events table). `p`: the
    placeholder; `schema`: the tables' schema ("": none)."""

    p = "?"
    schema = ""
    summaries_storage = ""
    """What follows the summaries table's columns in its CREATE statement (`create_statements`)."""
    buffered_rows: type[BufferedRows] = StatementRows
    overview_tables = OVERVIEW_TABLES
    listing_tables = (LISTING.name,)
    usage_tables = (USAGE.name,)
    """The rows `rows(..., buffered=True)` returns (a backend may send their writes its own way)."""

    def __init__(self, datastore: Any, events_table: str, *, texts: ViewTexts | None = None) -> None:
        self.datastore, self.events_table = datastore, events_table
        self.texts = texts
        self._has_pointer = False
        self._statements: dict[int, RowStatements] = {}
        self._listing: dict[int, bool] = {}
        """Whether each generation has the list table, asked once (`rows`)."""
        self._usage: dict[int, bool] = {}
        """Whether each generation has the usage table, asked once (`rows`)."""
        self._overviews: dict[int, OverviewStatements] = {}

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Any]:
        with self.datastore.transaction(commit=write) as curs:
            yield curs

    def rows(self, curs: Any, generation: int, cid: UUID, buffered: bool = False) -> SQLRows:
        kind = self.buffered_rows if buffered else SQLRows
        statements = self._statements.get(generation)
        if statements is None or generation not in self._listing or generation not in self._usage:
            # once per generation: an append makes rows for every line
            statements = self.statements(generation)
            if generation not in self._listing:
                self._listing[generation] = self._has_listing(curs, generation)
            if not self._listing[generation]:
                statements.listing = None  # a generation an earlier version made: no list rows to write
            if generation not in self._usage:
                self._usage[generation] = self._exists(curs, usage_name(generation))
            if not self._usage[generation]:
                statements.usage = None  # a generation an earlier version made: no usage rows to write
        return kind(curs, statements.t, str(cid), self.p, self.texts, statements)

    def _has_listing(self, curs: Any, generation: int) -> bool:
        """Whether `generation` has the list table (`LISTING`), asked through `curs`."""
        return self._exists(curs, listing_name(generation))

    def statements(self, generation: int) -> RowStatements:
        """The row statements of `generation` (made once)."""
        found = self._statements.get(generation)
        if found is None:
            found = self._statements[generation] = RowStatements.of(generation, self.schema, self.p)
        return found

    def run(self, curs: Any, sql: str, params: Any) -> Any:
        """Runs one read statement of a turn read on `curs` and returns the cursor; a backend may prepare
        it."""
        curs.execute(sql, params)
        return curs

    @contextmanager
    def savepoint(self, curs: Any, on_failure: Callable[[Exception], object] | None = None) -> Iterator[Any]:
        """As `ViewStorage.savepoint`, with SAVEPOINT statements."""
        name = "chatrecord_views"
        curs.execute(f"SAVEPOINT {name}")
        try:
            yield curs
        except Exception as error:  # noqa: BLE001 - the events stand; a later read catches up
            retried = on_failure(error) if on_failure is not None else False
            curs.execute(f"ROLLBACK TO SAVEPOINT {name}")
            if retried is not True:
                not_updated(error)
        curs.execute(f"RELEASE SAVEPOINT {name}")

    lock_row = ""
    """What makes the overview's SELECT lock its row (PostgreSQL: FOR UPDATE; SQLite's write
    transaction holds the file)."""

    def overview(
        self, cid: UUID, generation: int, logged: int, fold: Callable[[Overview, Marks], Overview], keep: bool = True
    ) -> Overview | None:
        statements = self._overviews.get(generation)
        if statements is None:
            with self.transaction(write=False) as curs:
                if not self._exists(curs, overview_table_names(generation)["overview"]):
                    return None  # a generation an earlier version made: `chatrecord rebuild` makes one with them
            names = overview_table_names(generation, self.schema)
            statements = self._overviews[generation] = OverviewStatements(
                names["overview"], names["overview_marks"], self.p, self.lock_row
            )
        return read_overview(self, statements, str(cid), logged, fold, keep)

    def _t(self, name: str) -> str:
        return f'"{self.schema}".{name}' if self.schema else name

    def _x(self, curs: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """Runs `sql` (its placeholders the driver's, `p`) and returns the cursor."""
        curs.execute(sql, params)
        return curs

    def pointer(self, curs: Any) -> Pointer | None:
        if not self._has_pointer and not self._exists(curs, POINTER):
            return None
        row = self._x(curs, f"SELECT generation, rules, next FROM {self._t(POINTER)} WHERE id = 1").fetchone()
        if row is None:
            return None
        self._has_pointer = True  # the pointer table is never dropped: no need to ask again
        return Pointer(int(row["generation"]), row["rules"], int(row["next"]))

    def pointer_and_summary(self, curs: Any, cid: UUID, generation: int) -> tuple[Pointer | None, str | None]:
        """Returns the live pointer and, when it is `generation`, `cid`'s summary body, in one statement.
        The body is None when the guess was wrong or there is no summary yet. Generation 0 reads the
        pointer alone."""
        if not self._has_pointer or generation < 1:
            return self.pointer(curs), None
        summaries = table_names(generation, self.schema)["heads"]
        row = self._x(
            curs,
            f"SELECT p.generation, p.rules, p.next, h.body FROM {self._t(POINTER)} p "
            f"LEFT JOIN {summaries} h ON h.cid = {self.p} WHERE p.id = 1",
            (str(cid),),
        ).fetchone()
        if row is None:
            return None, None
        live = Pointer(int(row["generation"]), row["rules"], int(row["next"]))
        return live, (row["body"] if live.generation == generation else None)

    def set_pointer(self, curs: Any, pointer: Pointer) -> None:
        p = self.p
        self._x(
            curs,
            f"CREATE TABLE IF NOT EXISTS {self._t(POINTER)} "
            "(id INTEGER PRIMARY KEY, generation BIGINT NOT NULL, rules TEXT NOT NULL, next BIGINT NOT NULL)",
        )
        self._x(
            curs,
            f"INSERT INTO {self._t(POINTER)} (id, generation, rules, next) VALUES (1, {p}, {p}, {p}) "
            "ON CONFLICT (id) DO UPDATE SET generation = excluded.generation, rules = excluded.rules, "
            "next = excluded.next",
            (pointer.generation, pointer.rules, pointer.next),
        )

    def create(self, curs: Any, generation: int) -> None:
        for statement in create_statements(generation, self.schema, self.summaries_storage):
            self._x(curs, statement)
        self._listing[generation] = self._usage[generation] = True

    def has_activity(self, curs: Any, generation: int) -> bool:
        return self._exists(curs, listing_name(generation))

    def has_usage(self, curs: Any, generation: int) -> bool:
        return self._exists(curs, usage_name(generation))

    def usage(self, curs: Any, generation: int, query: UsageQuery) -> tuple[list[UsageSums], UsageSums]:
        p, where, params = self.p, list[str](), list[Any]()
        if query.since is not None:
            where.append(f"at >= {p}")
            params.append(query.since)
        if query.until is not None:
            where.append(f"at < {p}")
            params.append(query.until)
        key = USAGE_KEYS[query.by]
        table = usage_name(generation, self.schema)
        total = self._x(
            curs, f"SELECT {USAGE_SUMS} FROM {table}" + (f" WHERE {' AND '.join(where)}" if where else ""), tuple(params)
        ).fetchone()
        if query.after is not None:
            where.append(f"{key} {'<' if query.by == 'day' else '>'} {p}")
            params.append(query.after)
        order = "DESC" if query.by == "day" else "ASC"
        groups = self._x(
            curs,
            f"SELECT {key} AS k, {USAGE_SUMS} FROM {table}"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + f" GROUP BY {key} ORDER BY {key} {order} LIMIT {p}",
            (*params, query.limit),
        ).fetchall()
        return [_sums(row, row["k"]) for row in groups], _sums(total, None)

    def listed(self, curs: Any, generation: int, query: ListQuery) -> list[Listed]:
        p, where, params = self.p, ["at IS NOT NULL"], list[Any]()
        if query.before is not None:  # a range on the index's first column, then the cids of that time
            where.append(f"at <= {p} AND (at < {p} OR cid < {p})")
            params += [query.before[0], query.before[0], query.before[1]]
        if query.since is not None:
            where.append(f"at >= {p}")
            params.append(query.since)
        if query.until is not None:
            where.append(f"at < {p}")
            params.append(query.until)
        if query.owner is not None:
            where.append(f"owner = {p}")
            params.append(query.owner)
        if query.search:
            where.append(f"LOWER(conversation) LIKE {p} ESCAPE '!'")
            params.append(like_pattern(query.search.lower()))
        if query.statuses:
            where.append("(" + " OR ".join(STATUS_SQL[s] for s in OUTCOMES if s in query.statuses) + ")")
        rows = self._x(
            curs,
            f"SELECT cid, at, conversation, owner, users, failed, waiting, undecided, erased "
            f"FROM {listing_name(generation, self.schema)} WHERE {' AND '.join(where)} ORDER BY at DESC, cid DESC LIMIT {p}",
            (*params, query.limit),
        ).fetchall()
        return [
            Listed(
                str(r["cid"]),
                int(r["at"]),
                r["conversation"],
                r["owner"],
                r["users"],
                r["failed"],
                int(r["waiting"]),
                r["undecided"],
                bool(r["erased"]),
            )
            for r in rows
        ]

    def drop(self, curs: Any, generation: int) -> None:
        tables = table_names(generation, self.schema).values(), overview_table_names(generation, self.schema).values()
        for table in (*tables[0], *tables[1], listing_name(generation, self.schema), usage_name(generation, self.schema)):
            self._x(curs, f"DROP TABLE IF EXISTS {table}")
        self._dropped(curs, generation)

    def _dropped(self, curs: Any, generation: int) -> None:
        """Drops what else the backend keeps of a dropped generation."""

    def generations(self, curs: Any) -> set[int]:
        found = set()
        for name in self._tables(curs):
            if name.startswith("views_g") and name.endswith("_heads"):
                found.add(int(name[len("views_g") : -len("_heads")]))
        return found

    def log_version(self, curs: Any, cid: UUID) -> int:
        row = self._x(
            curs,
            f"SELECT originator_version AS v FROM {self._t(self.events_table)} "
            f"WHERE originator_id = {self.p} ORDER BY originator_version DESC LIMIT 1",
            (self._id(cid),),
        ).fetchone()
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

    @abstractmethod
    def _tables(self, curs: Any) -> list[str]:
        """Returns the names of the store's tables in its database (each dialect's catalogue)."""

    def _exists(self, curs: Any, name: str) -> bool:
        return name in self._tables(curs)
