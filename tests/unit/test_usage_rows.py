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


def test_a_segments_row_holds_its_usage_and_its_values_follow_the_tables_columns() -> None:
    """`usage_row` counts a segment's steps in one pass of its own (no `SegmentUsage` made): for
    every segment of the demo tours its fields are those `segment_usage` gives, and `usage_values`
    lists them in `USAGE`'s order."""
    from pathlib import Path

    from adapters.api import Chatrecord
    from adapters.backends.settings import memory_env
    from adapters.backends.sql.views_tables import USAGE
    from adapters.bootstrap import build_store
    from adapters.views.usage_rows import usage_values
    from domain.events import SegmentReturned
    from projections.rules import DEFAULT_RULE_SET, resolve
    from projections.steps import read_segment
    from projections.usage import COST_UNIT, segment_usage, usage_row

    root = Path(__file__).resolve().parents[2]
    rules, seen = resolve(DEFAULT_RULE_SET), 0
    for tour in ("demo_seo_tour.jsonl", "behalten_tour.jsonl"):
        store = build_store(memory_env())
        chat = Chatrecord(store)
        lines = [raw for raw in (root / "tests/data" / tour).read_text(encoding="utf-8").splitlines() if raw.strip()]
        for raw in lines:
            chat.record(raw)
        for event in store.events(store.conversation_ids()[0]):
            if not isinstance(event, SegmentReturned):
                continue
            reading = read_segment(event.steps, event.trigger, None, rules, outcome=event.outcome)
            usage, row = segment_usage(event, reading), usage_row(event, reading, 5, "c", 7)
            assert (row.seq, row.at, row.conversation, row.owner) == (event.originator_version, 5, "c", 7)
            assert row.duration_us == round(usage.duration_ms * 1000)
            assert row.cost == (None if usage.cost is None else round(usage.cost * COST_UNIT))
            shared = ("model_calls", "calls_without_usage", "input_tokens", "output_tokens", "total_tokens")
            assert {k: getattr(row, k) for k in shared} == {k: getattr(usage, k) for k in shared}
            assert (row.tool_calls, row.failed_calls, row.refused_calls) == (
                usage.tool_calls,
                usage.failed_calls,
                usage.refused_calls,
            )
            values = dict(zip(USAGE.names, usage_values(row), strict=True))
            assert values["seq"] == row.seq and values["day"] == day_of(5) and values["cost"] == row.cost
            assert values["calls_without_cost"] == row.calls_without_cost
            seen += usage.model_calls
    assert seen > 3
