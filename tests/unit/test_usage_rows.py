"""The usage audit's sums over flat rows (`adapters.views.usage_rows.sum_rows`, the definition the
SQL statements follow): groups in their order, the unknown owner as a group of its own, unknown
sums None, the page's keys after its cursor, the total over every group of the range."""

from __future__ import annotations

from adapters.views.usage_rows import UNKNOWN_OWNER, UsageQuery, day_of, sum_rows
from projections.usage import UsageRow

DAY = 86_400_000_000


def row(seq: int, at: int, conversation: str, owner: int | None, tokens: int | None) -> UsageRow:
    return UsageRow(seq, at, conversation, owner, 1000, 1, 0 if tokens else 1, 1, tokens, tokens, tokens, None, 2, 1, 1)


ROWS = [row(1, 0, "b", 8, 10), row(2, DAY, "a", None, None), row(3, DAY + 5, "a", None, 5), row(4, 2 * DAY, "c", 7, 1)]


def test_the_unknown_owner_is_a_group_of_its_own_listed_first() -> None:
    groups, total = sum_rows(ROWS, UsageQuery("owner", 10))

    assert [(g.key, g.segments, g.input_tokens, g.calls_without_usage) for g in groups] == [
        (UNKNOWN_OWNER, 2, 5, 1),
        (7, 1, 1, 0),
        (8, 1, 10, 0),
    ]
    assert (total.segments, total.input_tokens, total.cost, total.calls_without_cost, total.refused_calls) == (4, 16, None, 4, 4)


def test_days_go_newest_first_and_a_page_starts_after_its_cursor_within_its_range() -> None:
    days, _ = sum_rows(ROWS, UsageQuery("day", 10))
    after, total = sum_rows(ROWS, UsageQuery("day", 1, after=day_of(DAY), since=0, until=2 * DAY))

    assert [(g.key, g.segments, g.first_at, g.last_at) for g in days] == [
        ("1970-01-03", 1, 2 * DAY, 2 * DAY),
        ("1970-01-02", 2, DAY, DAY + 5),
        ("1970-01-01", 1, 0, 0),
    ]
    assert ([g.key for g in after], total.segments) == (["1970-01-01"], 3)
