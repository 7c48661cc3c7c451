"""The turn input: exactly the messages a model call is sent (spec D15), and the read models it saw.
`messages`: a system message with the page line, then the transcript with the notes placed. An
`alt_text` conversation and the `transcript-only` rule set get no notes. `replay_turns` folds every
read model in one pass. One turn's input costs the notes' budget, not the history."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from domain.errors import ChatrecordError
from domain.events import (
    ConversationEvent,
    MessageEdited,
    SegmentReturned,
    TurnRetried,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.values import Immutable, assembled
from projections import card_outcomes, run_record, transcript, view_context
from projections.card_outcomes import CardOutcome, CardOutcomes
from projections.notes import NoteOf, note_of, select_notes
from projections.page_line import PageCheck, every_page, page_line
from projections.placement import place
from projections.rules import DEFAULT_RULE_SET, RuleSet, resolve
from projections.run_record import Entry, RunRecord
from projections.transcript import Message, Transcript
from projections.view_context import ViewContext


class NoTurnYet(ChatrecordError):
    """Raised when a turn input is asked for events that hold no user message or retry."""


class TurnState(Immutable):
    """The read models a turn input is built from, folded together."""

    transcript: Transcript = Transcript()
    """The transcript the model is sent, message by message."""
    record: RunRecord = RunRecord()
    """The run record: one entry per run segment."""
    outcomes: CardOutcomes = CardOutcomes()
    """The card outcomes, in order."""
    view: ViewContext = ViewContext()
    """The page of the latest turn and the page last selected."""


def initial() -> TurnState:
    """Returns the state before a conversation's first event."""
    return TurnState()


def apply(state: TurnState, event: ConversationEvent, rules: RuleSet | str, skim: frozenset[str] = frozenset()) -> TurnState:
    """Returns the state after `event`, every read model folded under `rules`. Segments in `skim` get
    entries made without reading their steps."""
    rules = resolve(rules)
    if skim and isinstance(event, SegmentReturned) and event.segment in skim:
        record = run_record.returned(state.record, event, rules, skim=True)
    else:
        record = run_record.apply(state.record, event, rules)
    fields = {
        "transcript": transcript.apply(state.transcript, event, rules),
        "record": record,
        "outcomes": card_outcomes.apply(state.outcomes, event, rules),
        "view": view_context.apply(state.view, event, rules),
    }
    return assembled(TurnState, fields, set(fields))  # each field given: pydantic's model_construct, at a third of its cost


def apply_each(
    states: Sequence[TurnState], event: ConversationEvent, rule_sets: Sequence[RuleSet], skims: Sequence[frozenset[str]]
) -> list[TurnState]:
    """Returns `[apply(states[i], event, rule_sets[i], skims[i]) for each i]`, folding once
    where several states hold the same read model and `event` changes it alike under their rule
    sets: the run record where they read `event` alike (`run_record.reading`: all but a returned
    segment), the transcript where `event` is disarmed alike (`transcript.applied`), the card
    outcomes where `event` does not read the rule set (`card_outcomes.reads_rules`), the view
    context where the rule sets read it alike (`view_context.reading`). The same states, with
    less work for rule sets folded side by side."""
    transcripts: dict[tuple[bool, int], Transcript] = {}
    views: dict[tuple[bool, int], ViewContext] = {}
    disarmed: dict[bool, bool] = {}  # by the part of a rule set `transcript.disarms` reads
    outcomes: dict[tuple[str | None, int], CardOutcomes] = {}
    after = []
    records: dict[tuple[tuple[str, int | str] | None, int], RunRecord] = {}
    for state, rules, skim in zip(states, rule_sets, skims, strict=True):
        skimmed = bool(skim) and isinstance(event, SegmentReturned) and event.segment in skim
        made = (run_record.reading(event, rules, skimmed), id(state.record))
        if made not in records:
            if skimmed:
                assert isinstance(event, SegmentReturned)
                records[made] = run_record.returned(state.record, event, rules, skim=True)
            else:
                records[made] = run_record.apply(state.record, event, rules)
        record = records[made]
        reads = transcript.reading(rules)
        if reads not in disarmed:
            disarmed[reads] = transcript.disarms(event, rules)
        key = (disarmed[reads], id(state.transcript))
        if key not in transcripts:
            transcripts[key] = transcript.applied(state.transcript, event, disarmed[reads])
        seen = (view_context.reading(rules), id(state.view))
        if seen not in views:
            views[seen] = view_context.apply(state.view, event, rules)
        read = (rules.id if card_outcomes.reads_rules(state.outcomes, event) else None, id(state.outcomes))
        if read not in outcomes:
            outcomes[read] = card_outcomes.apply(state.outcomes, event, rules)
        fields = {"transcript": transcripts[key], "record": record, "outcomes": outcomes[read], "view": views[seen]}
        after.append(assembled(TurnState, fields, set(fields)))
    return after


@dataclass(frozen=True)
class TurnInput:
    """What one model call is sent, and the read models as it saw them. `message`: the user message
    that started it. `at`: its time (UTC). `system`: the system text. `messages`: the transcript
    with notes placed. `notes`: the notes in order of appearance."""

    message: int
    at: datetime
    view_context: ViewContext
    system: str
    messages: tuple[Message, ...]
    notes: tuple[str, ...]
    record: tuple[Entry, ...]
    card_outcomes: tuple[CardOutcome, ...]

    def model_messages(self) -> list[dict[str, str]]:
        """Returns the messages sent to the model: `[{"role": …, "content": …}, …]`."""
        return [{"role": "system", "content": self.system}] + [{"role": m.role, "content": m.text} for m in self.messages]

    def to_json(self) -> dict[str, Any]:
        """Returns one element of `"turns"` of the `replay --json` contract (docs/spec-map.md, D15)."""
        return {
            "message": self.message,
            "at": iso(self.at),
            "view_context": self.view_context.to_json(),
            "messages": self.model_messages(),
            "notes": list(self.notes),
            "record": [e.to_json() for e in self.record],
            "card_outcomes": [o.to_json() for o in self.card_outcomes],
        }


def iso(at: datetime) -> str:
    """Returns `at` as ISO-8601 in UTC with a `Z`, as the chat writes it."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def turn_input(
    state: TurnState,
    message: int,
    at: datetime,
    rules: RuleSet | str = DEFAULT_RULE_SET,
    can_see_page: PageCheck = every_page,
    note: NoteOf = note_of,
) -> TurnInput:
    """Returns the turn input of user message `message` at `at` from a folded `state`. `note` renders
    each note (`projections.notes.NoteOf`); a caller may pass a caching one."""
    rules = resolve(rules)
    messages = state.transcript.messages
    notes: tuple[str, ...] = ()
    if rules.notes and state.transcript.kind == "chat":
        selected, older = select_notes(state.record, state.outcomes.outcomes, rules, can_see_page, note=note)
        messages, notes = place(messages, selected, older)
    return TurnInput(
        message=message,
        at=at,
        view_context=state.view,
        system=page_line(state.view, rules, can_see_page),
        messages=messages,
        notes=notes,
        record=state.record.entries,
        card_outcomes=state.outcomes.outcomes,
    )


def starts_turn(event: ConversationEvent, edited: int | None) -> int | None:
    """Returns the user message number whose model call `event` starts, else None. A typed message, a
    retry or an edit's cut starts one."""
    if isinstance(event, (UserMessagePosted, TurnRetried)):
        return event.message
    if isinstance(event, TurnsTruncated) and edited == event.after_message:
        return event.after_message
    return None


def _turns(
    events: Iterable[ConversationEvent], rules: RuleSet, skim: frozenset[str] = frozenset()
) -> Iterator[tuple[TurnState, int, datetime]]:
    """Yields (state, user message number, time) for each model call the events start, in one pass."""
    state, edited = initial(), None
    for event in events:
        state = apply(state, event, rules, skim)
        number = starts_turn(event, edited)
        edited = event.message if isinstance(event, MessageEdited) else None
        if number is not None:
            yield state, number, event.timestamp


def replay_turns(
    events: Iterable[ConversationEvent],
    rules: RuleSet | str = DEFAULT_RULE_SET,
    can_see_page: PageCheck = every_page,
) -> list[TurnInput]:
    """Returns one turn input per model call started by a user message (typed messages,
    retries and edits; not answers to a question), each as that turn saw it. One pass."""
    rules = resolve(rules)
    return [turn_input(state, number, at, rules, can_see_page) for state, number, at in _turns(events, rules)]


def turns_of(
    events: Iterable[ConversationEvent],
    message: int,
    rules: RuleSet | str = DEFAULT_RULE_SET,
    can_see_page: PageCheck = every_page,
) -> tuple[list[TurnInput], TurnInput | None, list[int]]:
    """Returns the inputs of the turns user message `message` started, the latest turn's input, and all
    turn numbers. The latest is None when no event starts a turn. This is what `replay --at` shows.
    One pass; only those turns' inputs are built."""
    rules = resolve(rules)
    events = events if isinstance(events, Sequence) else list(events)
    picked: list[TurnInput] = []
    numbers: list[int] = []
    last = None
    for state, number, at in _turns(events, rules, falls_out_before(events, message, rules)):
        numbers.append(number)
        last = (state, number, at, len(picked))
        if number == message:
            picked.append(turn_input(state, number, at, rules, can_see_page))
    if last is None:
        return picked, None, numbers
    latest = picked[-1] if last[1] == message else turn_input(last[0], last[1], last[2], rules, can_see_page)
    return picked, latest, numbers


def falls_out_before(events: Sequence[ConversationEvent], message: int, rules: RuleSet) -> frozenset[str]:
    """Returns the segments whose entries fall out of the run record before message `message`'s first
    turn. No later turn reads them: a fallen-out entry never comes back. Empty when no turn of
    `message` starts. One pass, reading segment ids only."""
    edited: int | None = None
    for index, event in enumerate(events):
        if starts_turn(event, edited) == message:
            return falls_out_until(events, index, rules)
        edited = event.message if isinstance(event, MessageEdited) else None
    return frozenset()


def falls_out_until(events: Sequence[ConversationEvent], stop: int, rules: RuleSet) -> frozenset[str]:
    """Returns the segments whose entries fall out of the run record in `events[: stop + 1]`
    (`falls_out_before`). One pass, reading segment ids only."""
    present: deque[str] = deque()
    out: set[str] = set()
    for event in events[: stop + 1]:
        if isinstance(event, SegmentReturned):
            present.append(event.segment)
            if len(present) > rules.record_entries:
                out.add(present.popleft())
        elif isinstance(event, TurnsTruncated):
            cut = set(event.cut_segments)
            present = deque(s for s in present if s not in cut)
    return frozenset(out)


def newest_inputs(
    events: Sequence[ConversationEvent], rule_sets: Sequence[str], count: int, can_see_page: PageCheck = every_page
) -> dict[str, list[TurnInput]]:
    """Returns, per rule set of `rule_sets` (ids as given), the inputs of the newest `count`
    turns, each as `replay_turns` gives it: one pass over the log folding every rule set's read
    models side by side, the run record entries that fall out before the first of those turns
    made without reading their steps (`projections.turn.falls_out_until`)."""
    starts, edited = [], None
    for index, event in enumerate(events):
        if starts_turn(event, edited) is not None:
            starts.append(index)
        edited = event.message if isinstance(event, MessageEdited) else None
    inputs: dict[str, list[TurnInput]] = {rules: [] for rules in rule_sets}
    wanted = set(starts[-count:]) if count > 0 else set()
    if not wanted:
        return inputs
    folds = [(rules, resolve(rules)) for rules in rule_sets]
    resolved = [r for _, r in folds]
    skims = [falls_out_until(events, min(wanted), r) for r in resolved]
    first = initial()
    states = [first for _ in folds]  # one start: the rule sets that read alike share their folds
    edited = None
    for index, event in enumerate(events[: max(wanted) + 1]):
        states = apply_each(states, event, resolved, skims)
        number = starts_turn(event, edited)
        edited = event.message if isinstance(event, MessageEdited) else None
        if index in wanted and number is not None:
            for state, (rules, r) in zip(states, folds, strict=True):
                inputs[rules].append(turn_input(state, number, event.timestamp, r, can_see_page))
    return inputs


def build_turn_input(
    events: Sequence[ConversationEvent],
    rules: RuleSet | str = DEFAULT_RULE_SET,
    can_see_page: PageCheck = every_page,
) -> TurnInput:
    """Returns the turn input of the latest user message or retry in `events`, as that turn
    saw it. Raises NoTurnYet when no event starts a turn."""
    rules = resolve(rules)
    last = None
    for last in _turns(events, rules):  # noqa: B007 - the last turn is the one asked for
        pass
    if last is None:
        raise NoTurnYet("the events hold no user message or retry, so no turn to build")
    return turn_input(last[0], last[1], last[2], rules, can_see_page)


def replay_json(conversation_id: str, rules_id: str, turns: Iterable[TurnInput]) -> dict[str, Any]:
    """Returns the `replay --json` object (docs/spec-map.md, D15) of one conversation."""
    return {"conversation": conversation_id, "rules": resolve(rules_id).id, "turns": [t.to_json() for t in turns]}
