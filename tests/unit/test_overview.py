"""The overview read model (`projections.overview`) equals the buckets computed from the whole
event list at every prefix, for random conversations (hypothesis): edits that cut turns,
failed segments, cards left undecided, retries and legacy rows included; with the bucket
count cut down so that widths double and buckets merge on the way.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from factories import Chat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import EPISODES, tell

from adapters.pages import overview_svg
from adapters.pages.overview_layout import overview_data
from adapters.service.timeline import overview as log_overview
from domain.events import CardLeftUndecided, TurnsTruncated
from projections import audit
from projections import overview as ov

DEMO = Path(__file__).parents[1] / "data" / "demo_seo_tour.jsonl"


def _fold_each(events, rules, buckets):
    """Folds `events` one at a time; asserts the state equals `of_events` of each prefix."""
    saved = ov.BUCKETS
    ov.BUCKETS = buckets
    try:
        state, marks = ov.Overview(), ov.MemoryMarks()
        for end, event in enumerate(events, start=1):
            state = ov.fold(state, [event], rules, marks)
            expected = ov.of_events(events[:end], rules)
            assert state == expected, f"after event {end} ({type(event).__name__})"
            assert len(state.buckets) <= buckets
        return state
    finally:
        ov.BUCKETS = saved


def _told(legacy, episodes, retry):
    chat = tell(legacy, episodes)
    if retry:
        chat.retry(chat.history.messages_after(0)[-1])
    return chat.events


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    legacy=st.integers(0, 1),
    episodes=EPISODES,
    rules=st.sampled_from(["2026-11-02", "2026-11-01", "transcript-only"]),
    buckets=st.sampled_from([1, 2, 3, 1024]),
    retry=st.booleans(),
)
def test_the_fold_is_the_buckets_of_the_whole_log_at_every_prefix(legacy, episodes, rules, buckets, retry):
    events = _told(legacy, episodes, retry)
    state = _fold_each(events, rules, buckets)
    assert state.total == len(ov.points(audit.audit(events, rules)))


def test_cuts_failed_segments_and_undecided_cards_come_up_and_are_bucketed():
    """One conversation with each: a failed segment (bad), a card left undecided (bad), an
    edit that cuts a turn (its message and segment turn `cut`), folded with 2 buckets."""
    episodes = [
        ("plain", True),  # a failed segment
        ("cards", False, [("Übernehmen", 1, False)]),  # a card decided, its run not continued
        ("cards", False, [("Behalten", 1, False)]),
        ("question", False),
        ("edit", 1),
        ("plain", False),
    ]
    chat = tell(0, episodes)
    events = chat.events
    kinds = {type(e) for e in events}
    assert TurnsTruncated in kinds
    state = _fold_each(events, "2026-11-02", 2)
    counts: dict[str, int] = {}
    for b in state.buckets.values():
        for k, n in b.counts.items():
            counts[k] = counts.get(k, 0) + n
    assert counts["segment:bad"] == 1
    assert counts["edit:cut"] == 1 and counts["cut:bad"] == 1
    assert counts.get("segment:cut", 0) >= 1 and counts.get("message:cut", 0) >= 1
    if CardLeftUndecided in kinds:
        assert counts["undecided:bad"] >= 1


def test_width_doubles_and_keeps_every_version_in_the_buckets():
    assert [ov.width_for(v) for v in (0, 1, 1024, 1025, 2048, 2049, 20_001)] == [1, 1, 1, 2, 2, 4, 32]


def test_an_overview_survives_its_json():
    chat = tell(0, [("cards", True, [("Übernehmen", 1, True), ("Behalten", 1, False)]), ("edit", 0), ("plain", True)])
    state = ov.fold(ov.Overview(), chat.events, "2026-11-02", ov.MemoryMarks())
    assert ov.Overview.from_json(orjson.loads(orjson.dumps(state.to_json()))) == state


def test_the_picture_from_the_read_model_is_the_picture_from_the_log_up_to_1024_events():
    chat = tell(1, [("cards", True, [("Übernehmen", 1, True), ("Übernehmen", 1, False)]), ("plain", True), ("edit", 0)])
    events = chat.events
    state = ov.fold(ov.Overview(), events, "2026-11-02", ov.MemoryMarks())
    assert state.points() == log_overview(events, "2026-11-02")
    assert overview_svg(state) == overview_svg(log_overview(events, "2026-11-02"))


def test_a_wider_picture_is_coarser_but_counts_every_point():
    """Past `BUCKETS` events the picture is drawn from buckets: at most one column per bucket,
    the tone of a cell the highest of its points', the same number of points and segments."""
    chat = Chat()
    for n in range(40):
        chat.user(f"m{n}", page=42)
        chat.segment("turn", "failed" if n % 7 == 0 else "completed", None if n % 7 == 0 else "Ok.", [], run=f"r{n}")
    events = chat.events
    saved = ov.BUCKETS
    ov.BUCKETS = 8
    try:
        state = ov.fold(ov.Overview(), events, "2026-11-02", ov.MemoryMarks())
    finally:
        ov.BUCKETS = saved
    assert state.points() is None and state.width == 16
    wide = overview_data(state, 960)
    exact = overview_data(log_overview(events, "2026-11-02"), 960)
    assert (wide["count"], wide["segments"]) == (exact["count"], exact["segments"]) == (80, 40)
    assert len(wide["cells"]) <= 2 * len(state.buckets)
    segments = [c for c in wide["cells"] if c["lane"] == 1]
    failing = [b for _, b in sorted(state.buckets.items()) if "segment:bad" in b.counts]
    assert {c["tone"] for c in segments} == {"bad", "ok"}
    assert len([c for c in segments if c["tone"] == "bad"]) == len(failing) == 5
    assert all("versions" in c["title"] for c in wide["cells"])
