"""The Conversation aggregate's commands: functions from state to the events to append.

The state is None before the conversation starts. A command raises a `ChatrecordError` and appends
nothing when an invariant would break (docs/spec-map.md, D1–D6).

Every command takes `at` (the line's time, UTC) and `source` (the line's digest, or None). A command
whose `source` was seen before returns no events. This module re-exports `domain.state`: it is the
aggregate's one public face."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from domain.command_batch import CommandBatch, begin, require_history, require_next, require_posted
from domain.errors import (
    CardAlreadyDecided,
    CardLeftUndecidedBefore,
    ContinuationBeforeDecision,
    ConversationAlreadyStarted,
    LineTooEarly,
    MessageOutOfOrder,
    NoCardWaiting,
    NoQuestionWaiting,
    SegmentBeforeMessage,
    TurnTruncated,
    UnknownMessage,
)
from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationEvent,
    ConversationStarted,
    QuestionAnswered,
    SegmentReturned,
    SkillLoaded,
    TourEnded,
    TurnRetried,
    UserMessagePosted,
    conversation_uuid,
)
from domain.history_index import History, MemoryHistory, SegmentRecord
from domain.segments import SegmentInfo, WaitingKind, resumed_round
from domain.state import (
    Conversation,
    ConversationSnapshot,
    evolve,
    project_conversation,
)
from domain.transcript_commands import ERASURE_SOURCE, edit_message, erase_texts, import_legacy_row, replace_transcript
from domain.values import StepFact, WaitingCall

__all__ = [
    "ERASURE_SOURCE",
    "Conversation",
    "History",
    "MemoryHistory",
    "SegmentRecord",
    "ConversationSnapshot",
    "SegmentInfo",
    "answer_question",
    "decide_card",
    "edit_message",
    "end_tour",
    "erase_texts",
    "evolve",
    "import_legacy_row",
    "post_user_message",
    "project_conversation",
    "recorded_segment",
    "replace_transcript",
    "retry_turn",
    "return_segment",
    "start_conversation",
]


def start_conversation(
    state: Conversation | None,
    conversation: str,
    kind: Literal["chat", "alt_text"],
    owner: int,
    at: datetime,
    source: str | None = None,
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns [ConversationStarted]; [] when the same start was recorded already.

    Raises ConversationAlreadyStarted when the conversation exists with another kind or owner.
    """
    if state is not None:
        if state.kind == kind and state.owner == owner:
            return []
        raise ConversationAlreadyStarted(
            f"conversation {conversation!r} was started already as {state.kind} of owner {state.owner}"
        )
    return [
        ConversationStarted(
            originator_id=conversation_uuid(conversation),
            originator_version=1,
            timestamp=at,
            source=source,
            conversation=conversation,
            kind=kind,
            owner=owner,
        )
    ]


def _leave_waiting(batch: CommandBatch, reason: Literal["new_message", "tour_ended"]) -> None:
    state = batch.state
    if state.waiting is None:
        return
    info = state.waiting_info
    assert info is not None
    batch.add(
        CardLeftUndecided,
        segment=state.waiting,
        waiting_kind=info.waits,
        reason=reason,
        decidable_elsewhere=reason == "new_message" and not info.guided,
    )


def post_user_message(
    state: Conversation | None,
    message: int,
    text: str,
    page: int,
    skill: str | None,
    at: datetime,
    source: str | None = None,
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns the events of a typed user message. They are CardLeftUndecided first if a card or
    question waits, SkillLoaded for a new skill, then UserMessagePosted. Raises MessageOutOfOrder
    when `message` is not above every earlier number. Raises MessageTooEarly when it skips one."""
    batch = begin(state, at, source, history, f"user message {message}")
    if batch is None:
        return []
    if message <= batch.state.last_message:
        raise MessageOutOfOrder(
            f"user message {message} is not after message {batch.state.last_message}, the last so far "
            "(numbers go up; a replaced transcript's or a legacy row's user messages count as 1 to n)"
        )
    require_next(batch.state, message, "user message")
    _leave_waiting(batch, "new_message")
    if skill is not None and skill != batch.state.skill:
        batch.add(SkillLoaded, skill=skill)
    batch.add(UserMessagePosted, message=message, text=text, page=page, skill=skill)
    return batch.events


def return_segment(
    state: Conversation | None,
    segment: str,
    run: str,
    trigger: Literal["turn", "approval", "answer", "retry"],
    outcome: str,
    answer: str | None,
    nothing_saved: bool,
    steps: Sequence[StepFact],
    waiting: Sequence[WaitingCall],
    at: datetime,
    source: str | None = None,
    history: History | None = None,
    model: str | None = None,
    provider: str | None = None,
) -> list[ConversationEvent]:
    """Returns [SegmentReturned]; [] when `segment` was recorded already (the first result stands).

    Raises SegmentBeforeMessage before any user message. Raises TurnTruncated for a segment or run
    an edit cut away. Raises ContinuationBeforeDecision for a continuation (`approval`, `answer`)
    when: a card or question still waits; no decision of its kind came since the segment before; or
    it resumes another run or round than the decision's (`_require_resumed`)."""
    batch = begin(state, at, source, history, f"segment {segment}")
    if batch is None:
        return []
    past = require_history(history)
    record = past.segment(segment)
    if record is not None and not record.cut:
        return []
    current = batch.state
    if record is not None or past.run_cut(run):
        raise TurnTruncated(f"segment {segment} belongs to a turn an edit has cut away")
    if current.last_message == 0:
        raise SegmentBeforeMessage(f"segment {segment} returned before any user message")
    if trigger in ("approval", "answer") and current.waiting is not None:
        waits = current.waiting_info.waits if current.waiting_info else None
        decision = "card_decided" if waits == "card" else "question_answered"
        raise ContinuationBeforeDecision(
            f"segment {segment} continues after an {trigger}, but the {waits} of segment {current.waiting} "
            f"still waits for its decision; a continuation follows its decision ({decision} first)",
            decision,
        )
    followed = _FOLLOWS.get(trigger)
    if followed is not None and current.decided not in (followed[0], "any"):
        raise ContinuationBeforeDecision(
            f"segment {segment} continues after an {trigger}, but no {followed[1]} was recorded since the "
            f"segment before it; a continuation follows its decision ({followed[2]} first)",
            followed[2],
        )
    if followed is not None:
        _require_resumed(current, segment, run, steps, followed[2])
    batch.add(
        SegmentReturned,
        segment=segment,
        run=run,
        trigger=trigger,
        outcome=outcome,
        answer=answer,
        nothing_saved=nothing_saved,
        steps=tuple(steps),
        waiting=tuple(waiting),
        card_outcomes_before=past.outcomes() + _approved_outcomes(current, trigger, run),
        message=current.last_message,
        skill=current.skill,
        model=model,
        provider=provider,
    )
    return batch.events


_FOLLOWS = {"approval": ("card", "card decision", "card_decided"), "answer": ("question", "answer", "question_answered")}
"""What a continuation follows (`Conversation.decided`), named for its error."""


def _require_resumed(state: Conversation, segment: str, run: str, steps: Sequence[StepFact], decision: str) -> None:
    """Raises ContinuationBeforeDecision when a continuation does not resume its decision's pause.
    nr-llm resumes the paused run at the round it paused in, then runs model rounds from the next.
    Another run or round continues a decision still to come."""
    if state.resumes is None:  # a state restored from an older snapshot: taken as before
        return
    paused_run, paused_round = state.resumes
    resumed = resumed_round(steps)
    if run == paused_run and (resumed is None or paused_round is None or resumed == paused_round):
        return
    at = f" paused at round {resumed}" if resumed is not None else ""
    paused_at = f" at round {paused_round}" if paused_round is not None else ""
    raise ContinuationBeforeDecision(
        f"segment {segment} resumes run {run}{at}, but the decision recorded last ended the pause of run "
        f"{paused_run}{paused_at}; it continues another decision, still to come (nothing of it was stored; "
        f"deliver it again after the {decision} it continues)",
        f"{decision} of run {run}{at}",
    )


def _approved_outcomes(state: Conversation, trigger: str, run: str) -> int:
    """Returns the outcomes an approval continuation records of its card (spec D14)."""
    return state.approval[1] if state.approval is not None and state.is_continuation(trigger, run) else 0


def recorded_segment(history: History, segment: str) -> int | None:
    """Returns the version of the SegmentReturned that recorded `segment` (uncut), or None."""
    record = history.segment(segment)
    return record.version if record is not None and not record.cut else None


_LEFT = {"new_message": "a new user message", "tour_ended": "the end of the tour"}


def _check_waiting(state: Conversation, history: History, segment: str, kind: WaitingKind) -> None:
    record = history.segment(segment)
    if record is not None and record.cut:
        raise TurnTruncated(f"segment {segment} belongs to a turn an edit has cut away")
    if record is not None and record.undecided is not None:
        reason = record.undecided
        raise CardLeftUndecidedBefore(
            f"the {kind} of segment {segment} was left undecided by {_LEFT.get(reason, reason)}; a later decision is not recorded"
        )
    if record is not None and record.settled:
        raise CardAlreadyDecided(f"the {kind} of segment {segment} was decided already")
    if record is None:  # too early: the segment is still to come
        error = NoCardWaiting if kind == "card" else NoQuestionWaiting
        unknown = error(
            f"segment {segment} is unknown: this conversation recorded no segment of that id yet; the {kind}'s "
            "decision waits for it (nothing of it was stored; deliver it again after the segment)"
        )
        unknown.waits_for = f"segment {segment}"
        raise unknown
    info = state.waiting_info
    if state.waiting != segment or info is None or info.waits != kind:
        error = NoCardWaiting if kind == "card" else NoQuestionWaiting
        raise error(f"segment {segment} has no {kind} waiting")


def decide_card(
    state: Conversation | None,
    segment: str,
    approved: bool,
    answer: str,
    message: int | None,
    text: str | None,
    at: datetime,
    source: str | None = None,
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns [CardDecided] for the card waiting on `segment`. Raises NoCardWaiting when no card waits
    there; `waits_for` is set when the segment is unknown yet. Raises CardAlreadyDecided when it was
    decided or left undecided before. Raises TurnTruncated when an edit cut it away. Raises
    MessageOutOfOrder or MessageTooEarly for the appended answer's message number."""
    batch = begin(state, at, source, history, f"card of segment {segment}")
    if batch is None:
        return []
    _check_waiting(batch.state, require_history(history), segment, "card")
    if message is not None and message <= batch.state.last_message:
        raise MessageOutOfOrder(f"answer message {message} is not after message {batch.state.last_message}")
    if message is not None:
        require_next(batch.state, message, "answer message")
    batch.add(CardDecided, segment=segment, approved=approved, answer=answer, message=message, text=text)
    return batch.events


def answer_question(
    state: Conversation | None,
    segment: str,
    message: int,
    text: str,
    at: datetime,
    source: str | None = None,
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns [QuestionAnswered] for the question waiting on `segment`. Raises NoQuestionWaiting,
    CardAlreadyDecided, TurnTruncated or MessageOutOfOrder, as `decide_card`."""
    batch = begin(state, at, source, history, f"question of segment {segment}")
    if batch is None:
        return []
    _check_waiting(batch.state, require_history(history), segment, "question")
    if message <= batch.state.last_message:
        raise MessageOutOfOrder(f"answer message {message} is not after message {batch.state.last_message}")
    require_next(batch.state, message, "answer message")
    batch.add(QuestionAnswered, segment=segment, message=message, text=text)
    return batch.events


def retry_turn(
    state: Conversation | None,
    message: int,
    at: datetime,
    source: str | None = None,
    history: History | None = None,
) -> list[ConversationEvent]:
    """Returns [TurnRetried]. Raises MessageTooEarly when `message` is still to come. Raises
    UnknownMessage when it is not an uncut user message."""
    batch = begin(state, at, source, history, f"retry of message {message}")
    if batch is None:
        return []
    require_posted(batch.state, message, "retry")
    if not require_history(history).message_uncut(message):
        raise UnknownMessage(f"retry names user message {message}, which the conversation does not have")
    batch.add(TurnRetried, message=message)
    return batch.events


def end_tour(
    state: Conversation | None, at: datetime, source: str | None = None, history: History | None = None
) -> list[ConversationEvent]:
    """Returns CardLeftUndecided(tour_ended) if a card or question waits, then TourEnded. Returns []
    when no tour runs: a repeated end stores nothing. Raises LineTooEarly before the tour's first
    segment returned."""
    batch = begin(state, at, source, history, "tour end")
    if batch is None or (batch.state.skill is None and batch.state.waiting is None):
        return []
    if not batch.state.tour_returned:
        raise LineTooEarly(
            "the tour end waits for the tour's first segment: no segment has returned since its skill was loaded "
            "(nothing of it was stored; deliver it again after the segment)",
            "a segment of the tour",
        )
    _leave_waiting(batch, "tour_ended")
    batch.add(TourEnded)
    return batch.events
