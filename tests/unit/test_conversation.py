"""The Conversation aggregate's invariants (docs/spec-map.md, D1–D6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from domain import conversation as c
from domain.errors import (
    CardAlreadyDecided,
    ConversationNotStarted,
    MessageOutOfOrder,
    MessageTooEarly,
    NoCardWaiting,
    NoQuestionWaiting,
    TurnTruncated,
    WrongConversationKind,
)
from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationStarted,
    MessageEdited,
    SegmentReturned,
    SkillLoaded,
    TourEnded,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.values import LegacyCardOutcome, RecordRef, TranscriptLine, WaitingCall

T0 = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)


class Story:
    """Runs commands against an in-memory state, as the store would: decide, then evolve."""

    def __init__(self, kind: str = "chat") -> None:
        self.tick = 0
        self.state: c.Conversation | None = None
        self.history = c.MemoryHistory()
        self.log: list = []
        self.run(c.start_conversation, "conv-1", kind, 7)

    def run(self, command, *args, **kwargs):
        self.tick += 1
        kwargs.setdefault("at", T0 + timedelta(seconds=self.tick))
        events = command(self.state, *args, history=self.history, **kwargs)
        self.history.record(self.state, events)
        self.state = c.project_conversation(self.state, events)
        self.log.extend(events)
        return events

    def message(self, n: int, page: int = 42, skill: str | None = None):
        return self.run(c.post_user_message, n, f"message {n}", page, skill)

    def segment(self, segment: str, outcome: str = "completed", run: str = "run-1", trigger="turn", waiting=()):
        return self.run(c.return_segment, segment, run, trigger, outcome, "answer", False, [], list(waiting))

    def card(self, segment: str, run: str = "run-1", trigger: str = "turn"):
        call = WaitingCall(tool_name="update_page_metadata", target=RecordRef(table="pages", uid=42), fields=("title",))
        return self.segment(segment, "awaiting_approval", run=run, trigger=trigger, waiting=[call])

    def question(self, segment: str, run: str = "run-1"):
        return self.segment(segment, "awaiting_input", run=run, waiting=[WaitingCall(tool_name="ask_choice")])


def names(events) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_decision_needs_a_waiting_card():
    story = Story()
    story.message(1)
    story.segment("s1", "completed")
    with pytest.raises(NoCardWaiting, match="segment s1 has no card waiting"):
        story.run(c.decide_card, "s1", True, "Übernehmen", None, None)
    with pytest.raises(NoCardWaiting, match="segment nope is unknown: this conversation recorded no segment of that id") as early:
        story.run(c.decide_card, "nope", True, "Übernehmen", None, None)
    assert early.value.waits_for == "segment nope"


def test_an_answer_needs_a_waiting_question():
    story = Story()
    story.message(1)
    story.card("s1")
    with pytest.raises(NoQuestionWaiting, match="segment s1 has no question waiting"):
        story.run(c.answer_question, "s1", 2, "Ja")


def test_a_card_is_decided_once():
    story = Story()
    story.message(1)
    story.card("s1")
    assert names(story.run(c.decide_card, "s1", False, "Behalten", None, None)) == ["CardDecided"]
    with pytest.raises(CardAlreadyDecided, match="card of segment s1 was decided already"):
        story.run(c.decide_card, "s1", True, "Übernehmen", None, None)


def test_a_question_is_answered_once():
    story = Story()
    story.message(1)
    story.question("s1")
    story.run(c.answer_question, "s1", 2, "Alles der Reihe nach")
    with pytest.raises(CardAlreadyDecided):
        story.run(c.answer_question, "s1", 3, "Nur Social Media")


def test_a_repeated_segment_id_is_a_no_op_that_keeps_the_first_result():
    story = Story()
    story.message(1)
    first = story.segment("s1", "completed")
    version = story.state.version
    assert story.segment("s1", "failed") == []
    assert story.state.version == version
    assert c.recorded_segment(story.history, "s1") == first[0].originator_version


def test_the_same_input_line_delivered_twice_changes_nothing():
    story = Story()
    events = story.run(c.post_user_message, 1, "hi", 42, None, source="digest-1")
    assert names(events) == ["UserMessagePosted"]
    assert story.run(c.post_user_message, 1, "hi", 42, None, source="digest-1") == []


def test_an_edit_of_a_message_still_to_come_waits_for_it():
    story = Story()
    story.message(1)
    with pytest.raises(MessageTooEarly, match="edit of message 5 waits for user message 5") as early:
        story.run(c.edit_message, 5, "new text")
    assert early.value.waits_for == "message 5"


def test_nothing_can_arrive_later_for_a_truncated_turn():
    story = Story()
    story.message(1)
    story.card("s1", run="run-1")
    story.run(c.edit_message, 1, "edited")
    with pytest.raises(TurnTruncated):
        story.run(c.decide_card, "s1", True, "Übernehmen", None, None)
    with pytest.raises(TurnTruncated):
        story.segment("s2", run="run-1", trigger="approval")
    with pytest.raises(TurnTruncated):
        story.segment("s1")
    # a new run for the edited message is welcome
    assert names(story.segment("s3", run="run-2")) == ["SegmentReturned"]


def test_an_edit_cuts_the_later_messages_segments_and_card_decisions():
    story = Story()
    story.message(1, skill="3:seo-optimieren")
    story.segment("s1")
    story.message(2)
    story.card("s2", run="run-2")
    story.run(c.decide_card, "s2", True, "Übernehmen", None, None)
    story.segment("s3", run="run-2", trigger="approval")
    story.message(3)
    edited, truncated = story.run(c.edit_message, 2, "anders")
    assert isinstance(edited, MessageEdited) and edited.text == "anders"
    assert isinstance(truncated, TurnsTruncated)
    assert truncated.cut_messages == (3,)
    assert truncated.cut_segments == ("s2", "s3")
    assert truncated.cut_cards == ("s2",)
    assert story.state.last_message == 2 and story.history.messages_after(0) == [1, 2]
    assert [r.segment for r in story.history.segments_from(1)] == ["s1"]
    assert story.history.outcomes() == 0


def test_an_edit_of_a_waiting_turn_records_no_undecided_note():
    story = Story()
    story.message(1)
    story.card("s1")
    events = story.run(c.edit_message, 1, "edited")
    assert names(events) == ["MessageEdited", "TurnsTruncated"]
    assert story.state.waiting is None


def test_a_new_message_while_a_card_waits_first_records_it_as_left_undecided():
    story = Story()
    story.message(1)
    story.card("s1")
    events = story.message(2)
    assert names(events) == ["CardLeftUndecided", "UserMessagePosted"]
    undecided = events[0]
    assert (undecided.segment, undecided.waiting_kind, undecided.reason) == ("s1", "card", "new_message")
    assert undecided.decidable_elsewhere is True  # an ordinary chat's run may still be decided in AI Tasks
    with pytest.raises(CardAlreadyDecided):
        story.run(c.decide_card, "s1", True, "Übernehmen", None, None)


def test_a_new_message_while_a_question_waits_in_a_tour_is_not_decidable_elsewhere():
    story = Story()
    story.message(1, skill="3:seo-optimieren")
    story.question("s1")
    undecided = story.message(2)[0]
    assert (undecided.waiting_kind, undecided.reason, undecided.decidable_elsewhere) == ("question", "new_message", False)


def test_tour_ended_while_a_card_waits_records_it_as_left_undecided_and_clears_the_skill():
    story = Story()
    events = story.message(1, skill="3:seo-optimieren")
    assert names(events) == ["SkillLoaded", "UserMessagePosted"]
    story.card("s1")
    events = story.run(c.end_tour)
    assert names(events) == ["CardLeftUndecided", "TourEnded"]
    assert events[0].reason == "tour_ended" and events[0].decidable_elsewhere is False
    assert story.state.skill is None and story.state.waiting is None


def test_tour_ended_with_nothing_waiting_only_ends_the_tour():
    story = Story()
    story.message(1, skill="3:seo-optimieren")
    story.segment("s1")
    assert names(story.run(c.end_tour)) == ["TourEnded"]


def test_a_segment_counts_the_card_outcomes_of_a_guided_process_before_it():
    story = Story()
    story.message(1, skill="3:seo-optimieren")
    story.card("s1")
    story.run(c.decide_card, "s1", True, "Übernehmen", None, None)
    (continuation,) = story.card("s2", trigger="approval")
    assert continuation.card_outcomes_before == 1
    assert continuation.skill == "3:seo-optimieren"
    story.run(c.decide_card, "s2", False, "Überspringen", 2, "Überspringen")
    (after,) = story.segment("s3", trigger="approval")
    assert after.card_outcomes_before == 2
    assert after.message == 2


def test_an_ordinary_card_has_no_card_outcome_to_count():
    story = Story()
    story.message(1)
    story.card("s1")
    story.run(c.decide_card, "s1", False, "abgelehnt", None, None)
    (after,) = story.segment("s2", trigger="approval")
    assert after.card_outcomes_before == 0


def test_user_messages_must_increase():
    story = Story()
    story.message(1)
    story.message(2)
    with pytest.raises(MessageOutOfOrder) as refused:
        story.message(2)

    assert str(refused.value) == (
        "user message 2 is not after message 2, the last so far "
        "(numbers go up; a replaced transcript's or a legacy row's user messages count as 1 to n)"
    )


def test_events_before_the_start_are_refused():
    with pytest.raises(ConversationNotStarted):
        c.post_user_message(None, 1, "hi", 0, None, at=T0)


def test_only_an_alt_text_conversation_replaces_its_transcript():
    story = Story()
    with pytest.raises(WrongConversationKind):
        story.run(c.replace_transcript, [TranscriptLine(role="user", text="x")])
    alt = Story(kind="alt_text")
    assert names(alt.run(c.replace_transcript, [TranscriptLine(role="user", text="x")])) == ["TranscriptReplaced"]


def test_a_retry_names_an_existing_message():
    story = Story()
    story.message(1)
    story.segment("s1", "failed")
    assert names(story.run(c.retry_turn, 1)) == ["TurnRetried"]
    with pytest.raises(MessageTooEarly) as early:  # a retry of a message still to come waits for it
        story.run(c.retry_turn, 3)
    assert early.value.waits_for == "message 3"


def test_a_snapshot_restores_the_same_state():
    story = Story()
    story.message(1, skill="3:seo-optimieren")
    story.card("s1")
    snapshot = c.ConversationSnapshot.take(story.state)
    assert c.evolve(snapshot, None) == story.state


def test_versions_are_consecutive_from_one():
    story = Story()
    story.message(1, skill="x")
    story.card("s1")
    story.message(2)
    assert [e.originator_version for e in story.log] == list(range(1, len(story.log) + 1))
    assert isinstance(story.log[0], ConversationStarted)
    assert {type(e) for e in story.log} >= {SkillLoaded, UserMessagePosted, SegmentReturned, CardLeftUndecided}


def test_a_rejected_command_appends_nothing():
    story = Story()
    story.message(1)
    before = (story.state, len(story.log))
    with pytest.raises(MessageTooEarly):
        story.run(c.edit_message, 9, "x")
    assert (story.state, len(story.log)) == before
    assert not any(isinstance(e, (CardDecided, CardLeftUndecided, TourEnded)) for e in story.log)


def test_a_card_adds_one_card_outcome_per_call_a_decline_at_once_an_approval_with_its_continuation():
    story = Story()
    story.message(1, skill="3:seo-optimieren")
    two_calls = [
        WaitingCall(tool_name="update_page_metadata", target=RecordRef(table="pages", uid=42), fields=("title",)),
        WaitingCall(tool_name="update_page_metadata", target=RecordRef(table="pages", uid=42), fields=("description",)),
    ]
    story.segment("s1", "awaiting_approval", waiting=two_calls)
    story.run(c.decide_card, "s1", True, "Übernehmen", None, None)
    assert story.history.outcomes() == 0  # an approval's outcomes come with its continuation
    (continuation,) = story.segment("s2", "awaiting_approval", trigger="approval", waiting=two_calls)
    assert continuation.card_outcomes_before == 2
    story.run(c.decide_card, "s2", False, "Behalten", None, None)
    assert story.history.outcomes() == 4
    (after,) = story.segment("s3", trigger="approval")
    assert after.card_outcomes_before == 4


def test_a_legacy_rows_card_outcomes_count_before_the_first_segment():
    story = Story()
    outcome = LegacyCardOutcome(outcome="applied", after=1, tool="update_page_metadata")
    story.run(c.import_legacy_row, [TranscriptLine(role="user", text="alt")], [outcome, outcome])
    story.message(2)
    (segment,) = story.segment("s1")
    assert segment.card_outcomes_before == 2


def test_an_edit_of_a_legacy_message_takes_the_legacy_card_outcomes_after_it_out_of_the_count():
    story = Story()
    lines = [
        TranscriptLine(role=r, text=t)
        for r, t in [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"), ("user", "e"), ("assistant", "f")]
    ]
    outcomes = [LegacyCardOutcome(outcome="applied", after=a, tool="update_page_metadata") for a in (3, 5)]
    story.run(c.import_legacy_row, lines, outcomes)
    story.message(4)
    story.segment("s1")
    story.run(c.edit_message, 3, "E")  # keeps the transcript up to index 4: the outcome at 5 goes
    (segment,) = story.segment("s2", run="run-2")
    assert segment.card_outcomes_before == 1


def test_a_continuation_follows_a_decision_of_its_own_kind_since_the_segment_before_it() -> None:
    """A segment after an approval follows a card decided, one after an answer a question
    answered, since the segment before it (two fresh users stored both with nothing decided:
    the notes then told of a decision that never came)."""
    from domain.errors import ContinuationBeforeDecision

    story = Story()
    story.message(1)
    story.segment("s1")  # completed: nothing waits, nothing is decided
    refused = []
    for trigger in ("approval", "answer"):
        with pytest.raises(ContinuationBeforeDecision) as error:
            story.segment(f"s-{trigger}", trigger=trigger)
        refused.append(str(error.value))
    story.card("s2", run="run-2")
    story.run(c.decide_card, "s2", True, "Übernehmen", None, None)
    with pytest.raises(ContinuationBeforeDecision):  # a card was decided, no question answered
        story.segment("s3", run="run-2", trigger="answer")
    (continued,) = story.segment("s3", run="run-2", trigger="approval")
    with pytest.raises(ContinuationBeforeDecision):  # one continuation per decision
        story.segment("s4", run="run-2", trigger="approval")
    story.question("s5", run="run-3")
    story.run(c.answer_question, "s5", 2, "Option A")
    (answered,) = story.segment("s6", run="run-3", trigger="answer")

    assert refused == [
        "segment s-approval continues after an approval, but no card decision was recorded since the segment "
        "before it; a continuation follows its decision (card_decided first)",
        "segment s-answer continues after an answer, but no answer was recorded since the segment before it; "
        "a continuation follows its decision (question_answered first)",
    ]
    assert (continued.trigger, answered.trigger) == ("approval", "answer")
    assert names(story.log).count("SegmentReturned") == 5


def test_a_state_from_a_snapshot_before_version_5_takes_any_continuation() -> None:
    """A snapshot of class version 4 did not keep what was decided: upcast, it reads `any`, so a
    continuation right after it is taken as it was before."""
    from domain.state import ConversationSnapshot

    state = {"state": {"conversation": "conv-1"}}
    ConversationSnapshot.upcast_v4_v5(state)

    assert state["state"]["decided"] == "any"
    assert c.Conversation.class_version == ConversationSnapshot.class_version == 7
