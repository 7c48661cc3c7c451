"""A line that comes before a line it needs is refused as too early (issue 35, item 2): the
chat delivers at least once, in any order, so the refusal names what the line waits for
(`waits_for`), stores nothing, and the same line is taken once that has come. A refusal that
delivering again cannot change has no `waits_for`."""

from __future__ import annotations

import pytest
from test_conversation import Story, names

from domain import conversation as c
from domain.errors import (
    CardAlreadyDecided,
    ChatrecordError,
    ContinuationBeforeDecision,
    ConversationNotStarted,
    LineOutOfOrder,
    LineTooEarly,
    MessageOutOfOrder,
    MessageTooEarly,
    NoQuestionWaiting,
    SegmentBeforeMessage,
)
from domain.state import ConversationSnapshot
from domain.values import StepFact, WaitingCall


def refused(story: Story, command, *args) -> ChatrecordError:  # type: ignore[no-untyped-def]
    before = (story.state, len(story.log))
    with pytest.raises(ChatrecordError) as error:
        story.run(command, *args)
    assert (story.state, len(story.log)) == before  # nothing of it stored
    return error.value


def test_a_user_message_that_skips_a_number_waits_for_the_message_before_it():
    story = Story()
    story.message(1)
    early = refused(story, c.post_user_message, 3, "drei", 0, None)
    assert isinstance(early, MessageTooEarly) and early.waits_for == "message 2"
    assert str(early) == (
        "user message 3 waits for message 2: the conversation's last user message is 1 "
        "(numbers go up by one; nothing of it was stored, deliver it again after message 2)"
    )
    story.message(2)
    assert names(story.message(3)) == ["UserMessagePosted"]


def test_a_message_number_that_does_not_go_up_is_refused_for_good():
    story = Story()
    story.message(1)
    story.message(2)
    late = refused(story, c.post_user_message, 1, "eins", 0, None)
    assert isinstance(late, MessageOutOfOrder) and late.waits_for is None


def test_after_an_edit_the_next_message_counts_on_from_the_highest_number_cut_or_kept():
    story = Story()
    for n in (1, 2, 3):
        story.message(n)
    story.run(c.edit_message, 1, "anders")  # cuts 2 and 3
    assert story.state is not None and (story.state.last_message, story.state.numbered) == (1, 3)
    assert refused(story, c.post_user_message, 5, "fünf", 0, None).waits_for == "message 4"
    assert names(story.message(4)) == ["UserMessagePosted"]  # 2 would do too: one above the last kept


def test_an_answer_that_skips_a_number_waits_for_the_message_before_it():
    story = Story()
    story.message(1)
    story.question("s1")
    early = refused(story, c.answer_question, "s1", 3, "Ja")
    assert isinstance(early, MessageTooEarly) and early.waits_for == "message 2"
    assert names(story.run(c.answer_question, "s1", 2, "Ja")) == ["QuestionAnswered"]


def test_a_decision_on_a_segment_still_to_come_waits_for_it_and_a_settled_one_is_refused_for_good():
    story = Story()
    story.message(1)
    early = refused(story, c.answer_question, "s1", 2, "Ja")
    assert isinstance(early, NoQuestionWaiting) and early.waits_for == "segment s1"
    story.question("s1")
    story.run(c.answer_question, "s1", 2, "Ja")
    again = refused(story, c.answer_question, "s1", 3, "Nein")
    assert isinstance(again, CardAlreadyDecided) and again.waits_for is None


def test_a_continuation_before_its_decision_waits_for_it():
    story = Story()
    story.message(1)
    story.card("s1")
    early = refused(story, c.return_segment, "s2", "run-1", "approval", "completed", "ok", False, [], [])
    assert isinstance(early, ContinuationBeforeDecision) and early.waits_for == "card_decided"
    story.run(c.decide_card, "s1", True, "Übernehmen", None, None)
    assert names(story.segment("s2", trigger="approval")) == ["SegmentReturned"]


def test_a_segment_before_any_user_message_waits_for_one():
    story = Story()
    early = refused(story, c.return_segment, "s1", "run-1", "turn", "completed", "ok", False, [], [])
    assert isinstance(early, SegmentBeforeMessage) and early.waits_for == "a user message"


def test_a_retry_or_an_edit_of_a_message_still_to_come_waits_for_it():
    story = Story()
    story.message(1)
    assert refused(story, c.retry_turn, 2).waits_for == "message 2"
    assert refused(story, c.edit_message, 2, "anders").waits_for == "message 2"


def test_a_tour_end_before_the_tours_first_segment_waits_for_it():
    story = Story()
    story.message(1, skill="3:seo-optimieren")
    early = refused(story, c.end_tour)
    assert type(early) is LineTooEarly and early.waits_for == "a segment of the tour"
    story.question("s1")
    assert names(story.run(c.end_tour)) == ["CardLeftUndecided", "TourEnded"]


def test_a_line_before_the_start_waits_for_it():
    from datetime import UTC, datetime

    with pytest.raises(ConversationNotStarted) as early:
        c.post_user_message(None, 1, "hi", 0, None, at=datetime(2026, 10, 28, tzinfo=UTC))
    assert early.value.waits_for == "conversation_started"
    # the CLI said only "user message 1: the conversation was never started", not that it comes again later
    assert str(early.value) == (
        "user message 1 waits for conversation_started: the conversation was never started (nothing of it was "
        "stored, deliver it again after its conversation_started)"
    )


def test_a_line_that_follows_a_version_still_to_come_waits_for_it_and_one_written_for_an_older_one_not():
    assert LineOutOfOrder("m", follows=3, actual=1).waits_for == "version 3"
    assert LineOutOfOrder("m", follows=0, actual=1).waits_for is None


def test_a_snapshot_before_version_6_keeps_no_number_rule_and_takes_a_tour_end():
    state = {"state": {"conversation": "conv-1"}}
    ConversationSnapshot.upcast_v5_v6(state)
    assert (state["state"]["numbered"], state["state"]["tour_returned"]) == (None, True)


def steps(*rounds: tuple[str, int]) -> list[StepFact]:
    return [StepFact(kind=kind, round=r, duration_ms=0.0) for kind, r in rounds]  # type: ignore[arg-type]


def continuation(segment: str, run: str, opening: list[StepFact]) -> tuple:  # type: ignore[type-arg]
    return (c.return_segment, segment, run, "approval", "completed", "ok", False, opening, [])


def test_a_continuation_of_another_run_than_the_decided_card_waits_for_the_decision_of_its_own():
    story = Story()
    story.message(1)
    story.card("s1", run="run-1")
    story.run(c.decide_card, "s1", True, "Übernehmen", None, None)
    early = refused(story, *continuation("t2", "run-2", []))
    assert isinstance(early, ContinuationBeforeDecision) and early.waits_for == "card_decided of run run-2"
    assert str(early) == (
        "segment t2 resumes run run-2, but the decision recorded last ended the pause of run run-1; it continues "
        "another decision, still to come (nothing of it was stored; deliver it again after the card_decided it continues)"
    )
    assert names(story.run(*continuation("s2", "run-1", []))) == ["SegmentReturned"]


def test_a_continuation_resumes_at_the_round_its_run_paused_in_else_it_waits_for_that_rounds_decision():
    """nr-llm runs the waiting calls first, at the round the run paused in, then model rounds from
    the next; the Behalten tour's card /1 paused at round 1, its third continuation opens at 3."""
    story = Story()
    story.message(1)
    card = WaitingCall(tool_name="update_page_metadata")
    story.run(c.return_segment, "r/1", "r", "turn", "awaiting_approval", "?", False, steps(("llm", 1), ("tool", 1)), [card])
    story.run(c.decide_card, "r/1", False, "Behalten", None, None)

    early = refused(story, *continuation("r/4", "r", steps(("tool", 3), ("llm", 4))))
    assert isinstance(early, ContinuationBeforeDecision) and early.waits_for == "card_decided of run r paused at round 3"
    late_model = refused(story, *continuation("r/x", "r", steps(("llm", 3))))
    assert late_model.waits_for == "card_decided of run r paused at round 2"
    assert names(story.run(*continuation("r/2", "r", steps(("tool", 1), ("llm", 2))))) == ["SegmentReturned"]
    assert story.state is not None and story.state.resumes == ("r", 2)


def test_a_continuation_that_opens_with_a_model_round_opens_one_after_the_pause():
    story = Story()
    story.message(1)
    card = WaitingCall(tool_name="update_page_metadata")
    story.run(c.return_segment, "r/1", "r", "turn", "awaiting_approval", "?", False, steps(("llm", 1)), [card])
    story.run(c.decide_card, "r/1", True, "Übernehmen", None, None)
    assert names(story.run(*continuation("r/2", "r", steps(("context", 2), ("llm", 2))))) == ["SegmentReturned"]


def test_a_snapshot_before_version_7_keeps_no_pause_and_takes_any_continuation_after_a_decision():
    state = {"state": {"conversation": "conv-1"}}
    ConversationSnapshot.upcast_v6_v7(state)
    assert state["state"]["resumes"] is None
    story = Story()
    story.message(1)
    story.card("s1", run="run-1")
    story.run(c.decide_card, "s1", True, "Übernehmen", None, None)
    assert story.state is not None
    story.state = story.state.model_copy(update={"resumes": None})
    assert names(story.run(*continuation("t2", "run-2", steps(("tool", 5))))) == ["SegmentReturned"]
