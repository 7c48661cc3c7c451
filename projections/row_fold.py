"""The read models as rows: one event changes a bounded number of rows.

A conversation's `Summary` (`projections.summary_rows`) is its bounded bookkeeping. What grows with
the history lives in rows behind `Rows`: run record entries, card outcomes, transcript messages,
page changes, turns and each segment's usage row (what the usage audit sums, kept when an edit cuts
the segment). The run record keeps `RuleSet.record_entries`. `apply_to_rows(rows, summary,
event, rules)` applies one event and returns the new summary. It reads rows only by key, so its cost
does not depend on the history. Its rules are the folded read models' own functions; a property test
holds the two equal."""

from __future__ import annotations

from functools import singledispatch

from domain.cards import continues_run, is_guided, records_outcome, starts_model_call
from domain.events import (
    CardDecided,
    CardLeftUndecided,
    ConversationErased,
    ConversationEvent,
    ConversationStarted,
    LegacyRowImported,
    MessageEdited,
    QuestionAnswered,
    SegmentReturned,
    SkillLoaded,
    TourEnded,
    TranscriptReplaced,
    TurnRetried,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.values import trusted
from projections import card_outcomes as co
from projections import run_record as rr
from projections import transcript as tr
from projections.card_outcomes import Approval, CardOutcome, OpenCard
from projections.rules import RuleSet
from projections.steps import LastDecision, decision_after, decision_kind, read_segment
from projections.summary_rows import Rows, Summary, TurnMark, _changed, micros
from projections.transcript import Message
from projections.turn import starts_turn
from projections.usage import usage_row
from projections.view_context import last_page

__all__ = ["KEEPS_TURN", "TAIL_ONLY", "apply_to_rows"]
"""The fold's names, and the summary's (`projections.row_head`), which the read models import from here."""


def apply_to_rows(rows: Rows, summary: Summary, event: ConversationEvent, rules: RuleSet) -> Summary:
    """Applies `event` to the rows and returns the summary after it. The caller checks that the
    event's version follows `summary.version`."""
    after = _apply(event, summary, rows, rules)
    number = starts_turn(event, summary.edited)
    update: dict[str, object] = {
        "version": event.originator_version,
        "edited": event.message if isinstance(event, MessageEdited) else None,
        # an erasure is stamped with the wall clock when it ran, not by the chat: not activity
        "last_at": summary.last_at if isinstance(event, ConversationErased) else micros(event.timestamp),
    }
    if type(event) is ConversationErased:
        update["erased"] = True
    if number is not None:
        mark = trusted(
            TurnMark,
            message=number,
            at=event.timestamp,
            version=event.originator_version,
            length=after.length,
            dropped=after.dropped,
        )
        rows.put_turn(mark)
        update["turn"] = mark
        update["turn_intact"] = True
        if after.turn_kept:
            rows.drop_aside()
            update["turn_kept"] = ()
    elif after.turn_intact and type(event) not in KEEPS_TURN:
        update["turn_intact"] = False
    if after is summary:
        return _changed(summary, update)
    # a new copy `_changed` made for this event, which no one else holds yet: changed in place,
    # so an event makes one copy of the summary, not two
    after.__dict__.update(update)
    after.__pydantic_fields_set__.update(update)
    return after


def segment_failed(event: SegmentReturned, follow: LastDecision | None, rules: RuleSet) -> bool:
    """Returns True when a segment counts as failed (`Summary.failed`), as the overview paints it
    `bad`. That is: its outcome is neither completed nor waiting, or a call of it is read as failed."""
    if event.outcome not in ("completed", "awaiting_approval", "awaiting_input"):
        return True
    if not any(step.tool_is_error for step in event.steps):
        return False
    reading = read_segment(event.steps, event.trigger, decision_kind(event.trigger, follow), rules, outcome=event.outcome)
    return any(call.reading == "failed" for call in reading.calls)


# ---------------------------------------------------------------- run record


def _update_entry(rows: Rows, summary: Summary, segment: str, **changes: object) -> Summary:
    """Updates the kept entry of `segment`; returns the summary, no longer `turn_intact` if the latest
    turn saw it."""
    entry = rows.entry(segment)
    if entry is None:
        return summary
    rows.put_entry(entry.model_copy(update=changes))
    return _turn_changed(summary) if _saw(summary, entry.seq) else summary


def _saw(summary: Summary, version: int) -> bool:
    """Whether the latest turn, still intact in the rows, saw the row of `version`."""
    return summary.turn_intact and summary.turn is not None and version <= summary.turn.version


def _turn_changed(summary: Summary) -> Summary:
    return _changed(summary, {"turn_intact": False})


def _give_up(rows: Rows, summary: Summary) -> Summary:
    """A pending approval's decision goes on its card's entry: no outcome came."""
    if summary.pending is None:
        return summary
    summary = _update_entry(rows, summary, summary.pending.card, decision=summary.pending.answer)
    return _changed(summary, {"pending": None})


def _close(summary: Summary, segment: str) -> dict[str, object]:
    return {
        "open_waits": {s: g for s, g in summary.open_waits.items() if s != segment},
        "open_cards": {s: c for s, c in summary.open_cards.items() if s != segment},
    }


# ---------------------------------------------------------------- transcript


def _append_user(
    rows: Rows, summary: Summary, number: int, text: str, disarm: bool, also: dict[str, object] | None = None
) -> Summary:
    """Appends a user message; returns the summary with it (and the changes `also`, in one copy)."""
    index = summary.length
    rows.put_message(index, trusted(Message, role="user", text=tr.disarm(text) if disarm else text, number=number))
    if summary.last_user is not None:
        rows.end_block(summary.last_user, index)
    update: dict[str, object] = {
        "length": index + 1,
        "last_role": "user",
        "last_user": index,
        "users": None if summary.users is None else summary.users + 1,
    }
    if also:
        update.update(also)
    return _changed(summary, update)


def _replace_transcript(rows: Rows, summary: Summary, messages: tuple[Message, ...], disarm: bool) -> Summary:
    rows.cut_messages(0)
    last_user = None
    for index, message in enumerate(messages):
        if disarm:
            message = message.model_copy(update={"text": tr.disarm(message.text)})
        rows.put_message(index, message)
        if message.role == "user":
            if last_user is not None:
                rows.end_block(last_user, index)
            last_user = index
    return _changed(
        summary,
        {
            "length": len(messages),
            "last_role": messages[-1].role if messages else None,
            "last_user": last_user,
            "users": sum(1 for message in messages if message.role == "user"),
        },
    )


# ---------------------------------------------------------------- the fold


@singledispatch
def _apply(event: ConversationEvent, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    """Applies `event` to the rows and returns the summary. It returns `summary` itself when unchanged,
    else a copy for this event alone."""
    return summary


@_apply.register
def _(event: ConversationStarted, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    return _changed(
        summary,
        {"conversation": event.conversation, "kind": event.kind, "users": 0, "owner": event.owner, "failed": 0, "undecided": 0},
    )


@_apply.register
def _(event: UserMessagePosted, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    summary = _new_model_call(rows, summary, event)
    update: dict[str, object] = {
        "page_id": event.page,
        "last_page_id": last_page(event.page, summary.last_page_id, rules),
    }
    if summary.last_change is None or summary.last_change != event.page:
        rows.put_page(event.message, event.page)
        update["last_change"] = event.page
    return _append_user(rows, summary, event.message, event.text, tr.disarms(event, rules), update)


@_apply.register
def _(event: TurnRetried, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    return _new_model_call(rows, summary, event)


def _new_model_call(rows: Rows, summary: Summary, event: ConversationEvent) -> Summary:
    """A new model call gives up a pending approval (`domain.cards.starts_model_call`)."""
    if not starts_model_call(event):
        return summary
    summary = _give_up(rows, summary)
    return summary if summary.approval is None else _changed(summary, {"approval": None})


@_apply.register
def _(event: SegmentReturned, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    # card outcomes, at the transcript's position before the answer
    new: tuple[CardOutcome, ...] = ()
    if co.continues(summary.approval, event):
        assert summary.approval is not None
        new = co.approval_outcomes(summary.approval, event, rules, (summary.length, summary.outcomes))
        rows.put_outcomes(new)
    open_cards = summary.open_cards
    if event.outcome == "awaiting_approval" and is_guided(event):
        open_cards = {**open_cards, event.segment: OpenCard(run=event.run, calls=event.waiting)}
    # run record
    if not continues_run(event.trigger, event.run, summary.pending.run if summary.pending else None):
        summary = _give_up(rows, summary)
    entry, reading = rr.read_entry(event, summary.follow, rules)
    rows.put_entry(entry)
    # the usage audit's flat row: a fact of what ran, kept when an edit cuts the segment
    rows.put_usage(usage_row(event, reading, micros(event.timestamp), summary.conversation, summary.owner))
    seqs = (*summary.seqs, entry.seq)
    overflow = max(0, len(seqs) - rules.record_entries)
    kept = summary.turn_kept
    if overflow:
        seen = [s for s in seqs[:overflow] if _saw(summary, s)]  # the latest turn's input still needs them
        if seen:
            rows.set_aside(seen)
            kept = (*kept, *seen)
        if len(seen) < overflow:
            rows.delete_entries(seqs[len(seen) : overflow])
    open_waits = summary.open_waits
    if event.outcome in ("awaiting_approval", "awaiting_input"):
        open_waits = {**open_waits, event.segment: rr.waits_on(event)}
    update: dict[str, object] = {
        "failed": summary.failed + 1
        if summary.failed is not None and segment_failed(event, summary.follow, rules)
        else summary.failed,
        "seqs": seqs[overflow:],
        "dropped": summary.dropped + overflow,
        "follow": decision_after(summary.follow, event),
        "open_waits": open_waits,
        "pending": None,
        "outcomes": summary.outcomes + len(new),
        "approval": None,
        "open_cards": open_cards,
        "turn_kept": kept,
    }
    # transcript
    if event.answer is not None:
        last = rows.message(summary.length - 1) if summary.last_role == "assistant" else None
        message = tr.answered(last, event.segment, event.answer)
        if tr.disarms(event, rules):
            message = message.model_copy(update={"text": tr.disarm(message.text)})
        index = summary.length - 1 if last is not None else summary.length
        rows.put_message(index, message)
        update.update(length=index + 1, last_role="assistant")
        if last is not None and summary.turn_intact and summary.turn is not None and index < summary.turn.length:
            update["turn_intact"] = False  # the answer joined a message the latest turn saw
    return _changed(summary, update)


@_apply.register
def _(event: CardDecided, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    decision, pending = rr.decided(event, summary.open_waits.get(event.segment))
    summary = _update_entry(rows, summary, event.segment, resolved="decided", decision=decision)
    card = summary.open_cards.get(event.segment)
    summary = _changed(
        summary, {"follow": decision_after(summary.follow, event), "pending": pending, **_close(summary, event.segment)}
    )
    if event.message is not None and event.text is not None:
        summary = _append_user(rows, summary, event.message, event.text, tr.disarms(event, rules))
    if card is None:
        return summary
    if event.approved and records_outcome(True, event.answer):
        approval = Approval(card=event.segment, run=card.run, answer=event.answer, calls=card.calls)
        return _changed(summary, {"approval": approval})
    new = co.declined_outcomes(card.calls, event, (summary.length, summary.outcomes))
    rows.put_outcomes(new)
    return _changed(summary, {"outcomes": summary.outcomes + len(new)})


@_apply.register
def _(event: QuestionAnswered, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    summary = _update_entry(rows, summary, event.segment, resolved="answered")
    open_waits = {s: g for s, g in summary.open_waits.items() if s != event.segment}
    summary = _changed(summary, {"follow": decision_after(summary.follow, event), "open_waits": open_waits})
    return _append_user(rows, summary, event.message, event.text, tr.disarms(event, rules))


@_apply.register
def _(event: CardLeftUndecided, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    summary = _update_entry(rows, summary, event.segment, undecided=event.reason, decidable_elsewhere=event.decidable_elsewhere)
    undecided = summary.undecided + 1 if summary.undecided is not None else None
    return _changed(summary, {**_close(summary, event.segment), "undecided": undecided})


@_apply.register
def _(event: MessageEdited, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    index = rows.user_index(event.message)
    message = rows.message(index) if index is not None else None
    if index is not None and message is not None:
        text = tr.disarm(event.text) if tr.disarms(event, rules) else event.text
        rows.put_message(index, message.model_copy(update={"text": text}))
    return summary


@_apply.register
def _(event: TurnsTruncated, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    cut = set(event.cut_segments)
    gone = [seq for seq in (rows.entry_seq(s) for s in cut) if seq is not None]
    rows.delete_entries(gone)
    update: dict[str, object] = {
        "seqs": tuple(s for s in summary.seqs if s not in gone),
        "follow": decision_after(summary.follow, event),
        "open_waits": {s: g for s, g in summary.open_waits.items() if s not in cut},
        "pending": summary.pending if summary.pending and summary.pending.card not in cut else None,
    }
    index = rows.user_index(event.after_message)
    length = summary.length
    if index is not None:
        length = index + 1
        rows.cut_messages(length)
        rows.end_block(index, None)
        update.update(length=length, last_role="user", last_user=index)
        if summary.users is not None:  # the cut messages are the live ones after `after_message`
            update["users"] = summary.users - len(event.cut_messages)
    cards = set(event.cut_cards) | cut
    removed = rows.cut_outcomes(cards, length)
    update.update(
        outcomes=summary.outcomes - removed,
        approval=summary.approval if summary.approval and summary.approval.card not in cards else None,
        open_cards={s: c for s, c in summary.open_cards.items() if s not in cards},
    )
    newest, newest_page = rows.cut_pages(event.after_message)
    page_id = newest or 0
    update.update(
        page_id=page_id,
        last_page_id=newest_page if rules.keeps_last_page else page_id,
        last_change=newest,
    )
    return _changed(summary, update)


@_apply.register
def _(event: TranscriptReplaced, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    return _replace_transcript(rows, summary, tr.from_lines(event.messages), tr.disarms(event, rules))


@_apply.register
def _(event: LegacyRowImported, summary: Summary, rows: Rows, rules: RuleSet) -> Summary:
    summary = _replace_transcript(rows, summary, tr.from_lines(event.messages), tr.disarms(event, rules))
    legacy = co.legacy_outcomes(event, summary.outcomes)
    rows.put_outcomes(legacy)
    return _changed(summary, {"outcomes": summary.outcomes + len(legacy)})


KEEPS_TURN: tuple[type[ConversationEvent], ...] = (
    SegmentReturned,
    CardDecided,
    QuestionAnswered,
    CardLeftUndecided,
    SkillLoaded,
    TourEnded,
)
"""The events that start no turn and leave the rows the latest turn saw as they were, but
for what `apply_to_rows` checks (an entry updated, an answer joined to a message that turn
saw): they append messages, entries and card outcomes, and update entries. Any other event
that starts no turn (an edit, a cut that no edit started, a replaced transcript, a legacy
row, an erasure, an event class added later) leaves the summary no longer `turn_intact`."""


TAIL_ONLY: tuple[type[ConversationEvent], ...] = (
    ConversationStarted,
    UserMessagePosted,
    SegmentReturned,
    CardDecided,
    QuestionAnswered,
    CardLeftUndecided,
    TurnRetried,
    SkillLoaded,
    TourEnded,
)
"""The events whose fold writes transcript rows only at or after the summary's `last_user` (the
index of the last user message; every row when there is none): a user message is appended at
the end and ends the block of the last one, an answer joins the last assistant message or
follows it. The rest (an edit, a truncation, a replaced transcript, a legacy row, an erasure,
and any event class added later) may rewrite or cut older rows. So a reader that kept rows
before `last_user` at one version may use them at a later version when only these events
came between (`adapters.views.caches.BlocksCache`)."""
