"""The usage audit (`chatrecord usage`, `GET /v1/usage`): what the segments used, summed per
conversation, per owner or per day, over a range of the chat's time, a page of groups at a time.

It sums the flat usage rows the row fold writes with each segment (`ViewStorage.usage`,
`adapters.views.usage_rows`), never a conversation's log: one grouped read of the live
generation's usage table per page, and one for the range's total. Unknown stays unknown: a
token or cost sum no segment stated is None, and `calls_without_usage` and `calls_without_cost`
say how many model calls of a sum stated none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.views.readmodels import ReadModels
from adapters.views.usage_rows import BY, UNKNOWN_OWNER, By, UsageQuery, UsageSums
from domain.errors import ChatrecordError
from projections.summary_rows import micros
from projections.usage import COST_UNIT

USAGE_LIMIT_MAX = 1000
"""The most groups one page of the usage audit holds."""

USAGE_CURSOR_PATTERN = r"^(c[A-Za-z0-9_.:/-]{1,300}|o(-|[0-9]{1,10})|d[0-9]{4}-[0-9]{2}-[0-9]{2})$"
"""The form of a usage cursor: the last group of a page, `c` and a conversation's stored id,
`o` and an owner's id (`-`: the unknown owner) or `d` and a day. A cursor carries its grouping
(which it takes over from the one asked), so every cursor of this form is a page start."""

_LETTER: dict[By, str] = {"conversation": "c", "owner": "o", "day": "d"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class BadUsageCursor(ChatrecordError):
    """Raised when a usage cursor is of no form a page returns."""


class UsageNeedsRebuild(ChatrecordError):
    """Raised on read models an earlier version made, which keep no usage rows:
    `chatrecord rebuild` makes ones that do."""


def encode_usage_cursor(by: By, key: str | int | None) -> str:
    """Returns the cursor of a page whose last group has `key` under grouping `by`."""
    if by == "owner":
        return "o" + ("-" if key is None or key == UNKNOWN_OWNER else str(key))
    return _LETTER[by] + str(key)


def decode_usage_cursor(cursor: str) -> tuple[By, str | int]:
    """Returns the grouping and the group key a cursor of `encode_usage_cursor` holds. Raises
    BadUsageCursor for any other form."""
    if re.fullmatch(USAGE_CURSOR_PATTERN, cursor) is None:
        raise BadUsageCursor(
            f"{cursor[:40]!r} is not a cursor of chatrecord usage; pass the next_cursor a page returned, or none for the first page"
        )
    by: By = next(b for b, letter in _LETTER.items() if letter == cursor[0])
    if by == "owner":
        return by, UNKNOWN_OWNER if cursor == "o-" else int(cursor[1:])
    return by, cursor[1:]


def _time(at: int | None) -> datetime | None:
    return None if at is None else _EPOCH + timedelta(microseconds=at)


@dataclass(frozen=True)
class Usage:
    """What some segments used: `key` their group's (a conversation's stored id, an owner's id
    or None for the unknown owner, a day `YYYY-MM-DD`; None for a total), how many `segments`,
    their time in milliseconds, model calls (of which `calls_without_usage` stated no token count
    and `calls_without_cost` no cost), tokens in, out and in all and the estimated cost (None:
    no call stated any, unknown, never 0), tool calls, failed and refused ones (held, declined,
    no longer permitted), and the chat's time of the first and last segment (None: none)."""

    key: str | int | None
    segments: int
    duration_ms: float
    model_calls: int
    calls_without_usage: int
    calls_without_cost: int
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    cost: float | None
    tool_calls: int
    failed_calls: int
    refused_calls: int
    first_at: datetime | None
    last_at: datetime | None

    @classmethod
    def of(cls, sums: UsageSums, by: By | None) -> Usage:
        """Returns the usage of the sums of a group of grouping `by` (None: a total)."""
        key = sums.key
        if by == "owner" and key == UNKNOWN_OWNER:
            key = None
        return cls(
            key=key,
            segments=sums.segments,
            duration_ms=sums.duration_us / 1000,
            model_calls=sums.model_calls,
            calls_without_usage=sums.calls_without_usage,
            calls_without_cost=sums.calls_without_cost,
            input_tokens=sums.input_tokens,
            output_tokens=sums.output_tokens,
            total_tokens=sums.total_tokens,
            cost=None if sums.cost is None else sums.cost / COST_UNIT,
            tool_calls=sums.tool_calls,
            failed_calls=sums.failed_calls,
            refused_calls=sums.refused_calls,
            first_at=_time(sums.first_at),
            last_at=_time(sums.last_at),
        )

    def to_json(self) -> dict[str, Any]:
        """Returns the usage as JSON-ready data, `key` first (times ISO-8601, UTC)."""
        return {
            "key": self.key,
            "segments": self.segments,
            "duration_ms": self.duration_ms,
            "model_calls": self.model_calls,
            "calls_without_usage": self.calls_without_usage,
            "calls_without_cost": self.calls_without_cost,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost": self.cost,
            "tool_calls": self.tool_calls,
            "failed_calls": self.failed_calls,
            "refused_calls": self.refused_calls,
            "first_at": _iso(self.first_at),
            "last_at": _iso(self.last_at),
        }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class UsagePage:
    """One page of the usage audit: grouped `by`, over `since`–`until` (None: open), the
    `groups` of the page in order and the `total` over every group of the range; `cursor`: pass
    it for the next page, None after the last."""

    by: By
    since: datetime | None
    until: datetime | None
    groups: tuple[Usage, ...]
    total: Usage
    cursor: str | None

    def to_json(self) -> dict[str, Any]:
        """Returns `{"by", "since", "until", "total": {"key": null, ...}, "groups": [{"key", ...}], "next_cursor"}`."""
        return {
            "by": self.by,
            "since": _iso(self.since),
            "until": _iso(self.until),
            "total": self.total.to_json(),
            "groups": [g.to_json() for g in self.groups],
            "next_cursor": self.cursor,
        }


def usage_page(
    models: ReadModels,
    by: By = "conversation",
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> UsagePage:
    """Returns one page of the usage audit of the store's segments whose time (the chat's) is at
    or after `since` and before `until` (aware datetimes; None: open), summed `by` conversation
    (ascending by id), owner (ascending, the unknown owner first) or day (UTC, newest first): at
    most `limit` (1–USAGE_LIMIT_MAX) groups after `cursor` (a page's `cursor`, whose grouping
    it takes over `by`; None: the first page), and the total over the whole range. Reads the live
    generation's usage rows: a grouped read per page, whatever the logs hold. Segments an edit
    cut are counted (they ran). Raises ValueError for a `limit` or `by` out of range,
    BadUsageCursor for a cursor of no valid form, UsageNeedsRebuild on read
    models an earlier version made."""
    if not 1 <= limit <= USAGE_LIMIT_MAX:
        raise ValueError(f"limit must be 1 to {USAGE_LIMIT_MAX}, not {limit}")
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    after = None
    if cursor is not None:
        by, after = decode_usage_cursor(cursor)
    query = UsageQuery(
        by, limit + 1, after, micros(since) if since is not None else None, micros(until) if until is not None else None
    )
    storage, live = models.storage, models.live_pointer()
    with storage.transaction(write=False) as curs:
        if not storage.has_usage(curs, live.generation):
            raise UsageNeedsRebuild(
                "the read models were made by an earlier version of chatrecord and keep no usage rows; "
                f"run: chatrecord rebuild --rules {live.rules}"
            )
        groups, total = storage.usage(curs, live.generation, query)
    more = len(groups) > limit
    page = tuple(Usage.of(g, by) for g in groups[:limit])
    next_cursor = encode_usage_cursor(by, groups[limit - 1].key) if more else None
    return UsagePage(by, since, until, page, Usage.of(replace(total, key=None), None), next_cursor)
