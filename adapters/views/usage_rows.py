"""The usage audit's rows and what a page of it asks of them.

Each segment has one flat row in its generation's usage table (`views_g<N>_usage`, described
in `adapters.backends.sql.views_tables.USAGE`; a dict of them in memory), written by the row
fold with the segment's entry (`projections.usage.UsageRow`, `usage_values`), so the audit sums
rows kept at append time and never folds a log. `UsageQuery` is what one page asks
(`ViewStorage.usage`), `UsageSums` one group's sums (and the range's total). `sum_rows` is the
definition the SQL backends' statements follow, and the memory backend's sum.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Literal

from projections.usage import UsageRow

By = Literal["conversation", "owner", "day"]
BY: tuple[By, ...] = ("conversation", "owner", "day")
"""What the usage audit groups by: the conversation (ascending by its id), its owner
(ascending, the unknown owner first) or the chat's day in UTC (newest first)."""

UNKNOWN_OWNER = -1
"""The owner key of the group of conversations whose owner is unknown (no backend user id is negative)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_STATED = ("input_tokens", "output_tokens", "total_tokens", "cost")
"""The sums that stay None (unknown) until a row states a value."""


def day_of(at: int) -> str:
    """Returns the UTC day (`YYYY-MM-DD`) of `at` (microseconds since 1970)."""
    return (_EPOCH + timedelta(microseconds=at)).strftime("%Y-%m-%d")


_REST = attrgetter(*(f.name for f in fields(UsageRow) if f.name not in ("seq", "at")))
"""`UsageRow`'s fields after `seq` and `at`, in their order, read at once."""


def usage_values(row: UsageRow) -> tuple[int | str | None, ...]:
    """Returns a segment's usage row as `USAGE`'s columns after `cid`: `seq`, `at`, its `day`, then
    `UsageRow`'s other fields in their order."""
    return (row.seq, row.at, day_of(row.at), *_REST(row))


def group_key(row: UsageRow, by: By) -> str | int:
    """Returns the key of the group `row` falls in (`UNKNOWN_OWNER` for an unknown owner)."""
    if by == "conversation":
        return row.conversation
    if by == "owner":
        return UNKNOWN_OWNER if row.owner is None else row.owner
    return day_of(row.at)


@dataclass(frozen=True)
class UsageQuery:
    """What one page of the usage audit asks: the segments at or after `since` and before
    `until` (the chat's time, microseconds), grouped `by`, at most `limit` groups after the key
    `after` (a page's last key: conversations and owners ascending, days descending)."""

    by: By
    limit: int
    after: str | int | None = None
    since: int | None = None
    until: int | None = None

    def admits(self, row: UsageRow) -> bool:
        """Whether `row` is summed by this query (its range; not the page's keys)."""
        return (self.since is None or row.at >= self.since) and (self.until is None or row.at < self.until)

    def follows(self, key: str | int) -> bool:
        """Whether group `key` comes after the page's `after` in this query's order."""
        if self.after is None:
            return True
        if self.by == "day":
            return str(key) < str(self.after)
        return key > self.after  # type: ignore[operator]  # both str or both int: `after` is of this `by`


@dataclass
class UsageSums:
    """The sums over some segments' usage rows: `key` their group's (None: the total), how many
    `segments`, their time in microseconds, model calls (`calls_without_usage` stated no token
    count, `calls_without_cost` no cost), tokens and cost (1/`projections.usage.COST_UNIT`;
    None where no call stated any: unknown, never 0), tool calls, failed and refused calls, the
    chat's time of the first and last (None: no segment)."""

    key: str | int | None = None
    segments: int = 0
    duration_us: int = 0
    model_calls: int = 0
    calls_without_usage: int = 0
    calls_without_cost: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost: int | None = None
    tool_calls: int = 0
    failed_calls: int = 0
    refused_calls: int = 0
    first_at: int | None = None
    last_at: int | None = None

    def add(self, row: UsageRow) -> None:
        """Adds one segment's row (the memory backend's sum; SQL's SUM skips NULLs as this does)."""
        self.segments += 1
        for name in ("duration_us", "model_calls", "calls_without_usage", "calls_without_cost"):
            setattr(self, name, getattr(self, name) + getattr(row, name))
        for name in ("tool_calls", "failed_calls", "refused_calls"):
            setattr(self, name, getattr(self, name) + getattr(row, name))
        for name in _STATED:
            value = getattr(row, name)
            if value is not None:
                held = getattr(self, name)
                setattr(self, name, value if held is None else held + value)
        self.first_at = row.at if self.first_at is None else min(self.first_at, row.at)
        self.last_at = row.at if self.last_at is None else max(self.last_at, row.at)

    def values(self) -> dict[str, str | int | None]:
        """Returns the sums by name (`key` included)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def sum_rows(rows: Iterable[UsageRow], query: UsageQuery) -> tuple[list[UsageSums], UsageSums]:
    """Returns the groups of the rows `query` admits, in its order, at most `query.limit` after
    its `after`, and the sums of every row it admits (`key` None)."""
    total, groups = UsageSums(), dict[str | int, UsageSums]()
    for row in rows:
        if not query.admits(row):
            continue
        total.add(row)
        key = group_key(row, query.by)
        if query.follows(key):
            groups.setdefault(key, UsageSums(key)).add(row)
    ordered = sorted(groups.values(), key=lambda g: g.key, reverse=query.by == "day")  # type: ignore[arg-type, return-value]
    return ordered[: query.limit], total
