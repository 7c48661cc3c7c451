"""The whole-conversation rule-set diff and the compare of two turns, on the demo and on a
Behalten tour (the timeline page's views, issue 39 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import Chat, seo_tour

from adapters.service.line_commands import read_events
from projections.rules_diff import rules_diff
from projections.turn import build_turn_input
from projections.turn_compare import TurnMissing, compare_turns

DEMO = Path(__file__).parents[1] / "data" / "demo_seo_tour.jsonl"


@pytest.fixture(scope="module")
def demo_events():
    return read_events(DEMO)


def test_transcript_only_drops_every_note_the_live_rule_set_sends_and_its_page_line(demo_events):
    turns, more = rules_diff(demo_events, "2026-11-02", "transcript-only")

    assert not more and [t.message for t in turns] == [1, 3]
    latest = build_turn_input(demo_events, rules="2026-11-02")
    assert turns[1].dropped == latest.notes and len(turns[1].dropped) == 14
    assert turns[1].added == ()
    assert turns[1].page_line == (latest.system, "No page is selected.")
    assert turns[0].same  # the first turn: nothing ran before it, the same page


def test_the_diff_is_read_a_page_of_turns_at_a_time(demo_events):
    first, more = rules_diff(demo_events, "2026-11-02", "2026-11-01", start=0, limit=1)
    turns, after = rules_diff(demo_events, "2026-11-02", "2026-11-01", start=1, limit=1)

    assert [t.index for t in first] == [0] and more
    assert [t.index for t in turns] == [1] and not after


def test_before_the_amendment_the_behalten_tour_reads_other_notes_at_the_last_turn():
    chat = Chat()
    seo_tour(chat, ["Behalten", "Behalten", "Behalten"])
    chat.user("was ist hier passiert?", page=0)

    turns, _ = rules_diff(chat.events, "2026-11-02", "2026-11-01")

    last = turns[-1]
    assert sum("(1 call, 1 failed)" in n for n in last.added) == 3
    assert not any("failed" in n for n in last.dropped) and last.dropped
    assert set(last.added).isdisjoint(last.dropped)


def test_comparing_the_demos_two_turns_names_what_the_tour_appended_and_the_notes_it_added(demo_events):
    compared = compare_turns(demo_events, "2026-11-02", 1, 3)

    changes = compared.changes
    latest = build_turn_input(demo_events, rules="2026-11-02")
    assert (compared.first, compared.second, changes["message"]) == (1, 3, 3)
    assert changes["kept"] == 1  # the first user message; the tour's answers and message 3 appended
    assert [m["role"] for m in changes["appended"]][-1] == "user"
    assert changes["appended"][-1]["content"] == "was ist hier passiert?"
    assert [n["text"] for n in changes["notes"]["added"]] == list(latest.notes)
    assert changes["notes"]["dropped"] == [] and len(changes["record"]["changed"]) == 8
    assert compared.first_line == "The selected page is page 42." and compared.second_line == latest.system


def test_a_turn_compared_with_itself_changes_nothing(demo_events):
    changes = compare_turns(demo_events, "2026-11-02", 3, 3).changes

    assert changes["appended"] == [] and changes["notes"] == {"added": [], "moved": [], "dropped": []}


def test_comparing_a_turn_that_does_not_exist_names_those_that_do(demo_events):
    with pytest.raises(TurnMissing, match="no turn starts at user message 2; turns start at messages 1, 3"):
        compare_turns(demo_events, "2026-11-02", 2, 3)
