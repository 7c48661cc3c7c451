"""The overview read model: a conversation's overview picture in at most `BUCKETS` buckets.

The picture has one point per message, retry, segment, decision, undecided card, edit, cut and
erasure, with a tone (`ok`, `wait`, `bad`, `cut`, `info`). Bucket `i` holds versions `i * width + 1`
to `(i + 1) * width`; `width` is the smallest power of two that fits (`width_for`). A bucket keeps
counts per kind and tone, its first point and its last time. At width 1, `Overview.points()` equals
the audit's points. An edit's cut turns its points to `cut`, found through the caller's `Marks`.
`fold` equals `of_events` at every prefix of a log.

Example:
    state = fold(Overview(), events, "2026-11-02", MemoryMarks())"""

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
    """One fact of the overview picture. Its event `version`, time, `kind` (`message`, `retry`,
    `segment`, `decision`, `undecided`, `edit`, `cut`, `erased`), `tone` (`ok`, `wait`, `bad`,
    `cut`, `info`) and a short `label`. The label holds ids, outcomes or answers, never a text."""

    version: int
    at: datetime
    kind: str
    tone: str
    label: str


def point(row: AuditRow) -> Point | None:
    """Returns the overview point of an audit row, or None for a row the picture does not show. A
    segment is `bad` when a call failed or its outcome is neither completed nor waiting. A cut
    message or segment is `cut`."""
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
    """One bucket's points: `counts` per `"kind:tone"` (no zeros), the `first` point, `last_at`."""

    counts: dict[str, int]
    first: Point
    last_at: datetime

    @property
    def total(self) -> int:
        """How many points the bucket holds."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class Mark:
    """Where a point is: `key` (`s:<segment>` or `m:<number>`), event `version`, `kind`, current `tone`."""

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
    """A conversation's overview at event `version`: buckets by index, `width` versions each. `follow`
    is what the next continuation follows, as the audit folds it."""

    version: int = 0
    width: int = 1
    follow: LastDecision | None = None
    buckets: dict[int, Bucket] = field(default_factory=dict)

    def points(self) -> list[Point] | None:
        """Returns the points in order when every bucket holds at most one; None otherwise."""
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
    """Returns the smallest power of two that keeps `version` versions in `BUCKETS` buckets."""
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
    """Returns the overview after `events` (one conversation's, in order after `state.version`). Cut
    points are found in and written to `marks`, as are new segment and message points. `state` is
    not changed. Raises ValueError for an event that does not follow the version before."""
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
    """Returns the overview of a whole event list at once, from its audit: `fold`'s reference."""
    state = audit.fold(audit.initial(), events, rules, outcomes=False)
    version = events[-1].originator_version if events else 0
    width = width_for(version)
    buckets: dict[int, Bucket] = {}
    for p in points(state.rows):
        _add(buckets, (p.version - 1) // width, p)
    return Overview(version, width, state.follow, buckets)
