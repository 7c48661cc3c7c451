"""One conversation's rows for a turn read on PostgreSQL, whose newest entries and card outcomes came with
its summary (`PrefetchedRows`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from adapters.backends.sql.views_rows import SQLRows
from adapters.backends.sql.views_statements import RowStatements
from adapters.store.crypto import ViewTexts
from adapters.views.caches import SEPARATOR, MessagesCache, PlacementCache
from adapters.views.ports import ReadMoved
from adapters.views.row_bodies import LazyEntries
from projections.card_outcomes import CardOutcome
from projections.run_record import Entry
from projections.summary_rows import Summary
from projections.transcript import Message


class PrefetchedRows(SQLRows):
    """`SQLRows` whose newest entries and card outcomes were read already, with their summary.
    `PostgresViewStorage.turn_rows` read them, joined by SEPARATOR, oldest first. A turn read decodes
    each body on demand. It asks the database only for messages and, if needed, older entries. `run` runs
    its reads, maybe prepared."""

    def __init__(
        self,
        curs: Any,
        tables: dict[str, str],
        cid: str,
        p: str,
        entries: str | Sequence[str],
        outcomes: str | Sequence[str],
        newest: int,
        texts: ViewTexts | None = None,
        run: Callable[[Any, str, Any], Any] | None = None,
        summary: Summary | None = None,
        known: PlacementCache | None = None,
        statements: RowStatements | None = None,
    ) -> None:
        super().__init__(curs, tables, cid, p, texts, statements)
        self._entries, self._outcomes, self._newest = entries, outcomes, newest
        self._run = run
        self._summary = summary
        self.placement = known if known is not None else PlacementCache()
        """What the read knew and learned of the rows for placing its notes (`placement_reads`)."""

    def placement_reads(
        self, length: int, kept: MessagesCache | None = None, known: PlacementCache | None = None
    ) -> tuple[Callable[[set[int]], dict[int, Message]], Callable[[set[int]], dict[int, int | None]]]:
        """As `SQLRows.placement_reads`, knowing and learning in `self.placement`."""
        return super().placement_reads(length, kept, known if known is not None else self.placement)

    def _blocks(self, numbers: set[int]) -> tuple[str, tuple[Any, ...]]:
        """As `SQLRows._blocks`, with the numbers as one array, so one statement text serves any count. Each
        number is its own index lookup; `number = ANY(…)` let the planner scan the whole transcript."""
        return _blocks(self.t["messages"]), (sorted(numbers), self.cid)

    def _select(self, sql: str, args: tuple[Any, ...]) -> Any:
        """Runs a read through the backend's `run` (PostgreSQL: prepared), if given."""
        if self._run is None:
            return super()._select(sql, args)
        return self._run(self.curs, sql, args)

    def entries(
        self, decode: Callable[[str], Entry] | None = None, newest: int | None = None, total: int | None = None
    ) -> LazyEntries:
        """Returns the kept entries, oldest first, each decoded (by `decode` if given) on first access.
        Older ones are read only when reached; then all are read. Raises ReadMoved if the summary moved
        from the read's version."""
        bodies = _split(self._entries)
        seqs = self._summary.seqs if self._summary is not None else ()
        if len(bodies) >= len(seqs):
            return LazyEntries(bodies, decode)
        return LazyEntries(bodies, decode, len(seqs), lambda: self._older_entries(list(seqs[: len(seqs) - len(bodies)])))

    def _older_entries(self, seqs: list[int]) -> list[str]:
        assert self._summary is not None
        rows = self._select(_older(self.t["heads"], self.t["entries"]), (seqs, self.cid)).fetchall()
        bodies = [r["body"] for r in rows if r["body"] is not None]
        if not rows or int(rows[0]["version"]) != self._summary.version or len(bodies) != len(seqs):
            raise ReadMoved(f"the head of {self.cid} moved during a turn read")
        return bodies

    def outcomes(self, newest: int | None = None, decode: Callable[[str], CardOutcome] | None = None) -> tuple[CardOutcome, ...]:
        if newest is not None and newest <= self._newest:
            bodies = _split(self._outcomes)
            bodies = bodies[len(bodies) - newest :] if newest else []
            decode = decode or CardOutcome.model_validate_json
            return tuple([decode(body) for body in bodies])
        return super().outcomes(newest, decode)


@functools.cache
def _blocks(messages: str) -> str:
    """The block ends of an array of user message numbers in the table `messages` (once per table)."""
    return (
        "SELECT x.idx, n.number, x.block_end FROM unnest(%s::bigint[]) AS n(number) CROSS JOIN LATERAL "
        f"(SELECT idx, block_end FROM {messages} WHERE cid = %s AND number = n.number ORDER BY idx DESC LIMIT 1) x"
    )


@functools.cache
def _older(summaries: str, entries: str) -> str:
    """The summary's version with the entries of an array of versions (once per generation)."""
    return (
        f"SELECT h.version, e.body FROM {summaries} h LEFT JOIN {entries} e "
        "ON e.cid = h.cid AND e.seq = ANY(%s::bigint[]) WHERE h.cid = %s ORDER BY e.seq"
    )


def _split(bodies: str | Sequence[str]) -> list[str]:
    """Returns row bodies joined by SEPARATOR, or held as a sequence (`TurnRowsCache`)."""
    if isinstance(bodies, str):
        return bodies.split(SEPARATOR) if bodies else []
    return list(bodies)
