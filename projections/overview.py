"""The overview read model: a conversation's overview picture as a bounded number of buckets.

The overview picture (`adapters.pages.overview_svg`) shows one point per message or retry,
segment, decision, card or question left undecided, edit, cut and erasure (`point`, read from
the audit's rows, `projections.audit`), in lanes, coloured by a tone (`ok`, `wait`, `bad`,
`cut`, `info`). This read model keeps, per conversation, at most `BUCKETS` buckets of those
points by event version: bucket `i` holds the points of versions `i * width + 1` to
`(i + 1) * width`, where `width` is the smallest power of two that fits the log's versions in
`BUCKETS` buckets (`width_for`); when the log outgrows them the width doubles and each two
neighbours merge. Each bucket keeps its count of points per kind and tone (`"segment:ok": 3`),
its first point (version, time, kind, tone, label) and the time of its last. So a reader of
the picture reads O(`BUCKETS`) values, never the log.

Up to `BUCKETS` events (width 1) a bucket holds at most one point (an event gives at most
one), and `Overview.points()` gives back exactly the points the audit's fold gives: the picture
drawn from them is the picture drawn from the log. Wider, the picture is coarser: one column
per bucket at most, its tone the highest of the bucket's lane, its title the counts.

An edit's cut (`TurnsTruncated`) turns the points of the segments and user messages it cuts to
the tone `cut`, wherever they are in the history: the fold finds them through `Marks`, an
index of each segment's and user message's point (its version, kind and tone) by key, which
the caller keeps (`MemoryMarks`, or rows in the store's tables). Apart from that lookup the
fold reads nothing; `fold` equals `of_events` (the buckets computed from the whole event list
at once) at every prefix of a log (a property test holds them equal).

Example:
    state = fold(Overview(), events, "2026-11-02", MemoryMarks())
    [b.counts for b in state.buckets.values()]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from domain.events import ConversationEvent, TurnsTruncated
from projections import audit
from projections.audit import AuditRow, AuditState
from projections.rules import RuleSet, resolve
from projections.steps import LastDecision

BUCKETS = 1024
"""The most buckets a conversation's overview keeps (the picture's plot is 856 pixels wide at
the page's width of 960: one column per bucket up to that)."""

_TONES = {"completed": "ok", "awaiting_approval": "wait", "awaiting_input": "wait"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Point:
    """One fact of the overview picture: its event `version`, time, `kind` (`message`,
    `retry`, `segment`, `decision`, `undecided`, `edit`, `cut`, `erased`), a `tone` (`ok`,
    `wait`, `bad`, `cut`, `info`) and a short `label` (ids, an outcome, a card's answer: no
    tool argument or result, no model or user text)."""

    version: int
    at: datetime
    kind: str
    tone: str
    label: str


def point(row: AuditRow) -> Point | None:
    """Returns the overview point of an audit row, None for a row the picture does not show
    (a start, a skill, an answer, a card outcome, a tour's end, a replaced transcript, a
    legacy row). A segment is `bad` when a call of it is read as failed or its outcome is not
    completed or waiting; a cut message or segment is `cut`."""
    f = row.facts
    if row.kind == "segment":
        failed = any(c["reading"] == "failed" for c in f["calls"])
        tone = "bad" if failed or f["outcome"] not in _TONES else _TONES[f["outcome"]]
        return Point(row.version, row.at, "segment", "cut" if row.cut else tone, f"segment {f['segment']} → {f['outcome']}")
    if row.kind in ("message", "retry"):
        label = f"user message {f['message']}" + (" (retry)" if row.kind == "retry" else "")
        return Point(row.version, row.at, row.kind, "cut" if row.cut else "info", label)
    if row.kind == "decision":
        verdict = "approved" if f["approved"] else "declined"
        return Point(row.version, row.at, "decision", "ok" if f["approved"] else "wait", f"card {verdict}: {f['answer']}")
    if row.kind in ("undecided", "edit", "cut", "erased"):
        return Point(row.version, row.at, row.kind, "bad" if row.kind != "edit" else "cut", row.kind)
    return None


def points(rows: Iterable[AuditRow]) -> list[Point]:
    """Returns the overview points of audit rows, in order (`point` of each)."""
    return [p for p in map(point, rows) if p is not None]


@dataclass(frozen=True)
class Bucket:
    """The points of one bucket: `counts` per `"kind:tone"` (no zero counts), the `first`
    point (the one of the lowest version) and the time of the last (`last_at`)."""

    counts: dict[str, int]
    first: Point
    last_at: datetime

    @property
    def total(self) -> int:
        """How many points the bucket holds."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class Mark:
    """Where a segment's or user message's point is: `key` (`s:<segment>` or `m:<number>`),
    the `version` of its event, its `kind` and its `tone` now."""

    key: str
    version: int
    kind: str
    tone: str


class Marks(Protocol):
    """The index of the points an edit's cut may reach, kept by the caller."""

    def find(self, keys: Sequence[str]) -> list[Mark]:
        """Returns the marks of these keys (every version of each), in any order."""

    def put(self, marks: Sequence[Mark]) -> None:
        """Inserts the marks, or replaces those of the same key and version."""


class MemoryMarks:
    """`Marks` in a dict (tests, the in-memory store, a fold that keeps none)."""

    def __init__(self) -> None:
        self.marks: dict[tuple[str, int], Mark] = {}

    def find(self, keys: Sequence[str]) -> list[Mark]:
        wanted = set(keys)
        return [m for (key, _), m in self.marks.items() if key in wanted]

    def put(self, marks: Sequence[Mark]) -> None:
        for mark in marks:
            self.marks[(mark.key, mark.version)] = mark


@dataclass(frozen=True)
class Overview:
    """A conversation's overview at event `version`: its buckets by index (`width` versions
    each) and what the next continuation follows (`follow`, as the audit folds it: a segment's
    calls are read by it)."""

    version: int = 0
    width: int = 1
    follow: LastDecision | None = None
    buckets: dict[int, Bucket] = field(default_factory=dict)

    def points(self) -> list[Point] | None:
        """Returns the points, in order, where every bucket holds one (width 1: exactly the
        audit's points); None where a bucket holds more (the picture is drawn from buckets)."""
        ordered = [self.buckets[i] for i in sorted(self.buckets)]
        if any(b.total != 1 for b in ordered):
            return None
        return [b.first for b in ordered]

    @property
    def total(self) -> int:
        """How many points the overview holds."""
        return sum(b.total for b in self.buckets.values())

    def to_json(self) -> dict[str, Any]:
        """Returns the overview as JSON-ready data (times in microseconds since 1970, UTC)."""
        return {
            "v": self.version,
            "w": self.width,
            "follow": self.follow.model_dump(mode="json") if self.follow is not None else None,
            "b": [
                [
                    i,
                    b.counts,
                    [b.first.version, _micros(b.first.at), b.first.kind, b.first.tone, b.first.label],
                    _micros(b.last_at),
                ]
                for i, b in sorted(self.buckets.items())
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Overview:
        """Returns the overview `to_json` gave."""
        follow = LastDecision.model_validate(data["follow"]) if data["follow"] is not None else None
        buckets = {
            int(i): Bucket(dict(counts), Point(first[0], _time(first[1]), first[2], first[3], first[4]), _time(last))
            for i, counts, first, last in data["b"]
        }
        return cls(int(data["v"]), int(data["w"]), follow, buckets)


def _micros(at: datetime) -> int:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def width_for(version: int) -> int:
    """Returns the width (versions per bucket, a power of two) of a log of `version` events:
    the smallest that keeps every version in `BUCKETS` buckets."""
    width = 1
    while (version - 1) // width >= BUCKETS:
        width *= 2
    return width


def _key(p: Point, facts: dict[str, Any]) -> str | None:
    if p.kind == "segment":
        return f"s:{facts['segment']}"
    if p.kind in ("message", "retry"):
        return f"m:{facts['message']}"
    return None


def _merge(a: Bucket | None, b: Bucket) -> Bucket:
    """Merges bucket `b` into `a`, the one before it (None: none)."""
    if a is None:
        return b
    counts = dict(a.counts)
    for k, n in b.counts.items():
        counts[k] = counts.get(k, 0) + n
    return Bucket(counts, a.first, b.last_at)


def _add(buckets: dict[int, Bucket], index: int, p: Point) -> None:
    held = buckets.get(index)
    k = f"{p.kind}:{p.tone}"
    if held is None:
        buckets[index] = Bucket({k: 1}, p, p.at)
    else:
        counts = dict(held.counts)
        counts[k] = counts.get(k, 0) + 1
        buckets[index] = Bucket(counts, held.first, p.at)


def fold(state: Overview, events: Iterable[ConversationEvent], rules: RuleSet | str, marks: Marks) -> Overview:
    """Returns the overview after `events` (one conversation's, in order, each following
    `state.version`): their points added to their buckets (the width doubled first where a
    version needs it), an edit's cut turning the points it cuts (found in `marks`) to `cut`.
    Writes the marks of new segment and message points, and of cut ones, to `marks`. `state`
    is not changed. Raises ValueError for an event that does not follow the version before."""
    rules = resolve(rules)
    version, width, follow, buckets = state.version, state.width, state.follow, dict(state.buckets)
    for event in events:
        if event.originator_version != version + 1:
            raise ValueError(f"event {event.originator_version} does not follow the overview's version {version}")
        version = event.originator_version
        while (version - 1) // width >= BUCKETS:
            width *= 2
            merged: dict[int, Bucket] = {}
            for i in sorted(buckets):
                merged[i // 2] = _merge(merged.get(i // 2), buckets[i])
            buckets = merged
        if isinstance(event, TurnsTruncated):
            _cut(buckets, width, event, marks)
        after = audit.fold(AuditState(follow=follow), (event,), rules, outcomes=False)
        follow = after.follow
        new: list[Mark] = []
        for row in after.rows:
            p = point(row)
            if p is None:
                continue
            _add(buckets, (p.version - 1) // width, p)
            key = _key(p, row.facts)
            if key is not None:
                new.append(Mark(key, p.version, p.kind, p.tone))
        if new:
            marks.put(new)
    return Overview(version, width, follow, buckets)


def _cut(buckets: dict[int, Bucket], width: int, event: TurnsTruncated, marks: Marks) -> None:
    """Turns the points of the segments and user messages `event` cuts to the tone `cut`."""
    keys = [f"s:{s}" for s in dict.fromkeys(event.cut_segments)] + [f"m:{n}" for n in dict.fromkeys(event.cut_messages)]
    if not keys:
        return
    changed: list[Mark] = []
    for mark in sorted(marks.find(keys), key=lambda m: m.version):
        if mark.tone == "cut":
            continue
        index = (mark.version - 1) // width
        held = buckets[index]
        counts = dict(held.counts)
        old, new = f"{mark.kind}:{mark.tone}", f"{mark.kind}:cut"
        counts[old] -= 1
        if not counts[old]:
            del counts[old]
        counts[new] = counts.get(new, 0) + 1
        first = replace(held.first, tone="cut") if held.first.version == mark.version else held.first
        buckets[index] = Bucket(counts, first, held.last_at)
        changed.append(replace(mark, tone="cut"))
    if changed:
        marks.put(changed)


def of_events(events: Sequence[ConversationEvent], rules: RuleSet | str) -> Overview:
    """Returns the overview of a whole event list at once, from the audit of it (the reference
    `fold` is held to): its points bucketed at the width of its last version."""
    state = audit.fold(audit.initial(), events, rules, outcomes=False)
    version = events[-1].originator_version if events else 0
    width = width_for(version)
    buckets: dict[int, Bucket] = {}
    for p in points(state.rows):
        _add(buckets, (p.version - 1) // width, p)
    return Overview(version, width, state.follow, buckets)
