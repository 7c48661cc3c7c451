"""The limits every input line is held to (README, "Input limits"). Numbers and times are bounded to
what every backend stores (32-bit signed integers, datetimes up to year 9999). Sizes are bounded so
the work per line stays linear. The ingester refuses a value outside them, with line and field,
before storing anything."""

from __future__ import annotations

from datetime import UTC, datetime

INT_MAX = 2**31 - 1
"""The largest whole number a line may carry (message, page, owner, uid, round, `after`,
`follows`): PostgreSQL's `integer`, 2,147,483,647."""

DURATION_MS_MAX = 1e10
"""The longest step duration in milliseconds (about 115 days); a duration is a finite number
from 0 to this."""

COST_MAX = 1e6
"""The largest estimated cost of one model call a line may carry, in nr-llm's currency unit; a
cost is a finite number from 0 to this (before 2026-12: 1e9, which ten calls of a segment summed
past what a usage row keeps)."""

SEGMENT_COST_MAX = 1e6
"""The largest sum of one segment's model calls' estimated costs: 1e15 billionths of the unit in a
usage row, so the usage audit's sums over 9,000 such segments still fit a 64-bit integer."""

SEGMENT_TOKENS_MAX = 10**12
"""The largest sum of one segment's model calls' `promptTokens`, `completionTokens` or
`totalTokens` (each summed alone): the usage audit's sums over 9 million such segments fit a 64-bit
integer."""

SEGMENT_DURATION_MS_MAX = 1e10
"""The longest sum of one segment's steps' durations in ms (about 115 days, a step's own limit):
1e13 microseconds in a usage row."""

STORED_INT_MAX = 2**63 - 1
"""The largest whole number a read model's BIGINT column keeps (SQLite's INTEGER, PostgreSQL's
bigint); a usage row's sum beyond it is written as unknown (`projections.usage.usage_row`)."""

AT_MIN = datetime(2000, 1, 1, tzinfo=UTC)
AT_MAX = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
"""The range of `at` after conversion to UTC: years 2000 to 9998, so no view's arithmetic on a
time overflows."""

LINE_BYTES_MAX = 8 * 1024 * 1024
"""The longest line, in bytes of UTF-8 (8 MiB); a longer one is refused unread."""

TEXT_MAX = 1_000_000
"""The longest text (a message, an answer, a transcript message), in characters."""

STEPS_MAX = 50_000
"""The most steps one segment may carry."""

LIST_MAX = 20_000
"""The most entries of any other list a line carries (pending calls, fields, transcript
messages, card outcomes)."""

DEPTH_MAX = 64
"""The deepest nesting of objects and lists a line may have, the line's own object counting as
1 (the deepest the chat's lines go is 5: a segment's steps, a step's writes and their fields);
a deeper line is refused before anything else reads it (the JSON encoder stops at 255 levels)."""

SHOWN_MAX = 40
"""The most characters of a rejected value an error message quotes."""
