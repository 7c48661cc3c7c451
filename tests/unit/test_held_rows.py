"""The newest entries and card outcomes a process holds for its turn read (`adapters.views.held_rows`):
taken from a read, followed through an append's document, dropped where that cannot be exact."""

from __future__ import annotations

from typing import Any

from adapters.views.held_rows import TurnRowsCache, advanced, seeded
from projections.summary_rows import Summary

ENTRIES, OUTCOMES = 3, 2  # the newest entries and outcomes held (the turn read's NEWEST_ENTRIES, NEWEST_OUTCOMES)


def views(**rows: Any) -> dict[str, Any]:
    """An append document's views section (`AppendDocument.views`) with `rows` set."""
    base: dict[str, Any] = {"aside": [], "delete_entries": [], "entries": [], "drop_outcomes": None, "outcomes": []}
    return {**base, **rows}


def held() -> TurnRowsCache:
    return TurnRowsCache(1, 10, (4, 6, 8), ("e4", "e6", "e8"), ("o1", "o2"), 5)


def test_a_read_is_held_with_the_summaries_newest_seqs_when_it_holds_as_many_as_asked() -> None:
    summary = Summary(version=10, seqs=(2, 4, 6, 8), outcomes=5)

    assert seeded(1, summary, "e4\x1ee6\x1ee8", "o1\x1eo2", ENTRIES, OUTCOMES) == held()
    assert seeded(1, summary, "e6\x1ee8", "o1\x1eo2", ENTRIES, OUTCOMES) is None  # fewer entries than the summary keeps
    assert seeded(1, summary, "e4\x1ee6\x1ee8", "o2", ENTRIES, OUTCOMES) is None  # fewer outcomes than the summary counts
    assert seeded(1, Summary(version=1), "", "", ENTRIES, OUTCOMES) == TurnRowsCache(1, 1, (), (), (), 0)


def test_an_append_adds_its_entry_and_outcomes_and_the_oldest_fall_out() -> None:
    after = Summary(version=12, seqs=(2, 4, 6, 8, 11), outcomes=6)
    section = views(entries=[[11, "run/5", "e11"]], outcomes=[[11, 0, None, 3, "o3"]])

    moved = advanced(held(), 1, 10, section, after, ENTRIES, OUTCOMES)

    assert moved == TurnRowsCache(1, 12, (6, 8, 11), ("e6", "e8", "e11"), ("o2", "o3"), 6)


def test_an_update_of_a_held_entry_replaces_its_body() -> None:
    after = Summary(version=11, seqs=(2, 4, 6, 8), outcomes=5)

    moved = advanced(held(), 1, 10, views(entries=[[8, "run/4", "e8 decided"]]), after, ENTRIES, OUTCOMES)

    assert moved is not None and (moved.seqs[-1], moved.entries[-1]) == (8, "e8 decided")


def test_what_cannot_be_followed_exactly_is_dropped() -> None:
    after = Summary(version=11, seqs=(2, 4, 8), outcomes=5)
    # an entry inside the held ones deleted (or set aside): the next older one is not held
    assert advanced(held(), 1, 10, views(delete_entries=[6]), after, ENTRIES, OUTCOMES) is None
    assert advanced(held(), 1, 10, views(aside=[6]), after, ENTRIES, OUTCOMES) is None
    same = Summary(version=11, seqs=(2, 4, 6, 8), outcomes=5)
    # an edit's cut of card outcomes; outcomes not newer than the held version
    assert advanced(held(), 1, 10, views(drop_outcomes={"cards": ["run/1"], "after": 3}), same, ENTRIES, OUTCOMES) is None
    assert advanced(held(), 1, 10, views(outcomes=[[9, 0, None, 3, "o0"]]), same, ENTRIES, OUTCOMES) is None
    # not sent as one document, another generation, another version than the one held
    assert advanced(held(), 1, 10, None, same, ENTRIES, OUTCOMES) is None
    assert advanced(held(), 2, 10, views(), same, ENTRIES, OUTCOMES) is None
    assert advanced(held(), 1, 9, views(), same, ENTRIES, OUTCOMES) is None
    # the summary counts outcomes the section did not write (written otherwise), or fewer
    assert advanced(held(), 1, 10, views(), Summary(version=11, seqs=(2, 4, 6, 8), outcomes=7), ENTRIES, OUTCOMES) is None
    assert advanced(held(), 1, 10, views(outcomes=[[11, 0, None, 3, "o3"]]), same, ENTRIES, OUTCOMES) is None
    assert advanced(held(), 1, 10, views(), same, ENTRIES, OUTCOMES) == TurnRowsCache(
        1, 11, held().seqs, held().entries, held().outcomes, 5
    )


def test_a_delete_of_the_oldest_entry_outside_the_held_ones_keeps_them() -> None:
    after = Summary(version=12, seqs=(4, 6, 8, 11), outcomes=5)
    section = views(delete_entries=[2], entries=[[11, "run/5", "e11"]])

    assert advanced(held(), 1, 10, section, after, ENTRIES, OUTCOMES) == TurnRowsCache(
        1, 12, (6, 8, 11), ("e6", "e8", "e11"), ("o1", "o2"), 5
    )
