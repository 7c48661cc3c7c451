"""The timeline of one conversation (`adapters.pages`): its turns newest first, a page at a time; the whole
conversation's overview; each turn's input under any rule set. A page reads only the log's tail: its
turns, the turn before (the lead-in, not shown) and, for an older page, the events after it. The newest
page costs what its turns hold. Rows are the audit's (`projections.audit`) with the activity list's
calls, so the page, `audit` and the activity list agree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from adapters.service.replay import TurnNotFound
from adapters.store.application import ConversationStore
from adapters.store.crypto import ERASED
from domain.events import (
    ConversationEvent,
    ConversationStarted,
    MessageEdited,
    SegmentReturned,
    TurnRetried,
    UserMessagePosted,
    conversation_uuid,
)
from projections import activity, audit
from projections import overview as overview_model
from projections import turn as turns
from projections.activity import ActivityEntry
from projections.audit import AuditRow
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn import TurnInput, build_turn_input, starts_turn
from projections.usage import tool_times

PAGE_TURNS = 20
"""Turns on one page of the timeline."""
CHUNK = 256
"""Events read per step when the log is read backwards for a page's turns."""


@dataclass(frozen=True)
class UserText:
    """A user message's text as stored: `erased` when the conversation's texts were erased."""

    text: str
    erased: bool


@dataclass(frozen=True)
class SegmentDetail:
    """What the timeline shows of a segment beyond its audit row: the assistant's `answer` as
    stored (None: it gave none; erased: the conversation's texts were erased) and its tool
    calls in order, each as its tool and the duration its step stated in ms."""

    answer: UserText | None
    tools: tuple[tuple[str, float], ...]


def segment_detail(event: SegmentReturned) -> SegmentDetail:
    """Returns the timeline's detail of the segment `event` (`SegmentDetail`)."""
    answer = None if event.answer is None else UserText(event.answer, event.answer == ERASED)
    return SegmentDetail(answer, tool_times(event))


@dataclass(frozen=True)
class TimelineTurn:
    """One turn of the timeline. `message`: the user message or retry that started it, with time, text and
    page. `page_before`: the page before, None when unchanged. `rows`: the audit rows of its events, in
    order. `activity`: the activity entries per segment id. `details`: each segment's answer and tool-call
    durations, per segment id. Turn 0 holds the events before the first user message."""

    number: int
    version: int
    at: datetime
    kind: str
    text: UserText | None = None
    page: int | None = None
    page_before: int | None = None
    rows: tuple[AuditRow, ...] = ()
    activity: dict[str, tuple[ActivityEntry, ...]] = field(default_factory=dict)
    details: dict[str, SegmentDetail] = field(default_factory=dict)


@dataclass(frozen=True)
class TimelinePage:
    """One page of a conversation's timeline, newest turn first. `before`: the version the
    next older page ends before (None: this page reaches the start); `version`: the log's."""

    conversation: str
    rules: str
    version: int
    turns: tuple[TimelineTurn, ...]
    before: int | None


OverviewPoint = overview_model.Point
"""One fact of the overview picture (`projections.overview.Point`)."""


def _turn_start(event: ConversationEvent) -> int | None:
    if isinstance(event, (UserMessagePosted, TurnRetried)):
        return event.message
    return None


def _tail(store: ConversationStore, key: str, before: int | None, turns: int) -> list[ConversationEvent]:
    """Returns the events from the lead-in turn's start to the log's end. Reads backwards from `before`
    until `turns` + 1 turns started."""
    uuid = conversation_uuid(key)
    upper = None if before is None else before - 1
    found, earliest = 0, None
    while upper is None or upper >= 1:
        chunk: list[ConversationEvent] = list(store.events.get(uuid, lte=upper, desc=True, limit=CHUNK))
        if not chunk:
            break
        for event in chunk:
            if _turn_start(event) is not None:
                found += 1
                earliest = event.originator_version
                if found > turns:
                    break
        if found > turns:
            break
        upper = chunk[-1].originator_version - 1
        if len(chunk) < CHUNK:
            earliest = 1
            break
    if found <= turns:
        earliest = 1
    return list(store.events.get(uuid, gt=(earliest or 1) - 1))


def timeline_page(
    store: ConversationStore, key: str, name: str, rules: str, before: int | None = None, turns: int = PAGE_TURNS
) -> TimelinePage:
    """Returns the timeline page of `key` (stored id) ending before version `before` (None: newest), of
    `turns` turns under `rules`. `name` is the id shown. A conversation without events gives no turns."""
    rule_set = resolve(rules)
    events = _tail(store, key, before, turns)
    if not events:
        return TimelinePage(name, rule_set.id, 0, (), None)
    last_version = events[-1].originator_version
    end = before if before is not None else last_version + 1
    state, acts = audit.fold(audit.initial(), events, rule_set), activity.initial()
    starts: list[tuple[int, ConversationEvent]] = []  # (version, event) of each turn start in the tail
    details: dict[str, SegmentDetail] = {}
    for event in events:
        acts = activity.apply(acts, event, rule_set)
        if isinstance(event, SegmentReturned) and event.originator_version < end:
            details[event.segment] = segment_detail(event)
        if _turn_start(event) is not None or isinstance(event, ConversationStarted):
            starts.append((event.originator_version, event))
    segments = {s.segment: s.entries for s in acts.segments}
    shown = [(v, e) for v, e in starts if v < end]
    # the first start is the lead-in's (not shown) unless the tail begins at the log's start
    lead_in = events[0].originator_version != 1
    page_starts = shown[1:] if lead_in else shown
    page_starts = page_starts[-turns:] if len(page_starts) > turns else page_starts
    older = lead_in or len(shown) > len(page_starts)
    first_shown = page_starts[0][0] if page_starts else end
    bounds = [v for v, _ in page_starts] + [end]
    rows = [r for r in state.rows if first_shown <= r.version < end]
    previous_page = _page_before(shown, first_shown)
    result: list[TimelineTurn] = []
    for (version, event), upto in zip(page_starts, bounds[1:], strict=True):
        turn_rows = tuple(r for r in rows if version <= r.version < upto)
        acts_of = {r.facts["segment"]: segments.get(r.facts["segment"], ()) for r in turn_rows if r.kind == "segment"}
        detail_of = {s: details[s] for s in acts_of if s in details}
        if isinstance(event, UserMessagePosted):
            text = UserText(event.text, event.text == ERASED)
            changed = previous_page if previous_page is not None and previous_page != event.page else None
            result.append(
                TimelineTurn(
                    event.message, version, event.timestamp, "message", text, event.page, changed, turn_rows, acts_of, detail_of
                )
            )
            previous_page = event.page
        elif isinstance(event, TurnRetried):
            result.append(
                TimelineTurn(
                    event.message, version, event.timestamp, "retry", rows=turn_rows, activity=acts_of, details=detail_of
                )
            )
        else:
            result.append(TimelineTurn(0, version, event.timestamp, "start", rows=turn_rows, activity=acts_of, details=detail_of))
    return TimelinePage(
        name, rule_set.id, last_version, tuple(reversed(result)), first_shown if older and first_shown > 1 else None
    )


def _page_before(starts: Sequence[tuple[int, ConversationEvent]], first: int) -> int | None:
    """Returns the page of the last user message before version `first`, None without one."""
    page = None
    for version, event in starts:
        if version >= first:
            break
        if isinstance(event, UserMessagePosted):
            page = event.page
    return page


def overview(events: Sequence[ConversationEvent], rules: str) -> list[OverviewPoint]:
    """Returns the overview points of a conversation's whole log under `rules`: messages, segments,
    decisions, undecided cards, edits, cuts, erasure."""
    return overview_points(audit.audit(events, rules))


@dataclass
class OverviewCache:
    """A conversation's overview kept between requests: the audit fold at `version` (`state`), its points,
    and what was drawn (`drawn`, by renderer). An unchanged conversation draws nothing; new events are
    folded alone (`extend`)."""

    version: int
    state: audit.AuditState
    points: list[OverviewPoint]
    drawn: dict[Any, str] = field(default_factory=dict)

    @classmethod
    def of(cls, events: Sequence[ConversationEvent], rules: str) -> OverviewCache:
        """Returns the overview of a conversation's whole log (one fold)."""
        return cls(0, audit.initial(), []).extend(events, rules)

    def extend(self, events: Sequence[ConversationEvent], rules: str) -> OverviewCache:
        """Returns the overview after `events` (those after `version`, in order), folding only them."""
        state = audit.fold(self.state, events, resolve(rules), outcomes=False)  # the picture shows none
        version = events[-1].originator_version if events else self.version
        return OverviewCache(version, state, overview_points(state.rows))


def overview_points(rows: Sequence[audit.AuditRow]) -> list[OverviewPoint]:
    """Returns the overview points of audit rows (see `overview`; `projections.overview.points`)."""
    return overview_model.points(rows)


@dataclass(frozen=True)
class TurnView:
    """One turn's model input under `rules`, against `base` (the live rule set). `added`, `removed`: notes
    sent only here, only there. `system_differs`: the page line differs."""

    rules: str
    base: str
    turn: TurnInput
    added: frozenset[str] = frozenset()
    removed: tuple[str, ...] = ()
    system_differs: bool = False
    base_system: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "rules": self.rules,
            "base": self.base,
            "turn": self.turn.to_json(),
            "added": sorted(self.added),
            "removed": list(self.removed),
            "system_differs": self.system_differs,
        }


def turn_at(events: Sequence[ConversationEvent], at: int, rules: str, can_see_page: PageCheck = every_page) -> TurnInput:
    """Returns the input of the latest turn of user message `at`, as `replay --at` gives it. Folds the log
    once. Raises TurnNotFound naming the messages that start turns."""
    end, edited, numbers = None, None, []
    for index, event in enumerate(events):
        number = starts_turn(event, edited)
        edited = event.message if isinstance(event, MessageEdited) else None
        if number is not None:
            numbers.append(number)
            if number == at:
                end = index
    if end is None:
        if not numbers:
            raise TurnNotFound(f"no turn starts at user message {at}; the conversation has no user messages yet")
        shown = ", ".join(map(str, sorted(set(numbers))))
        raise TurnNotFound(f"no turn starts at user message {at}; turns start at messages {shown}")
    return build_turn_input(events[: end + 1], rules, can_see_page)


def newest_turns(
    events: Sequence[ConversationEvent], rules: str, count: int, can_see_page: PageCheck = every_page
) -> list[TurnInput]:
    """Returns the inputs of the newest `count` turns (as `replay` gives each), folding the log
    once and building only those turns' inputs (each costs what its transcript holds)."""
    return newest_turns_under(events, (rules,), count, can_see_page)[rules]


def newest_turns_under(
    events: Sequence[ConversationEvent], rule_sets: Sequence[str], count: int, can_see_page: PageCheck = every_page
) -> dict[str, list[TurnInput]]:
    """Returns, per rule set of `rule_sets` (ids as given), the inputs of the newest `count`
    turns, as `newest_turns` gives them, in one pass over the log (`projections.turn.newest_inputs`)."""
    return turns.newest_inputs(events, rule_sets, count, can_see_page)


def turn_view(turn: TurnInput, rules: str, base_turn: TurnInput, base: str) -> TurnView:
    """Returns `turn` (under `rules`) with its differences from `base_turn` (under `base`)."""
    if rules == base:
        return TurnView(rules, base, turn, base_system=base_turn.system)
    here, there = set(turn.notes), set(base_turn.notes)
    return TurnView(
        rules,
        base,
        turn,
        frozenset(here - there),
        tuple(n for n in base_turn.notes if n not in here),
        turn.system != base_turn.system,
        base_turn.system,
    )
