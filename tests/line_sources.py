"""Events of two stores compared line by line: each store keys its lines' digests with its own
conversation's data key (`adapters.store.line_digests`), so the same line has another `source` in
each. These helpers name a source by the order its line first appears in the log instead: two logs
alike have the same events from the same lines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from domain.events import ConversationEvent


def line_numbers(events: Iterable[ConversationEvent]) -> list[int | None]:
    """Returns each event's line: 1 for the first source of the log, 2 for the next new one; None
    for an event made from no line."""
    numbers: dict[str, int] = {}
    return [None if e.source is None else numbers.setdefault(e.source, len(numbers) + 1) for e in events]


def by_line(events: Iterable[ConversationEvent]) -> list[dict[str, Any]]:
    """Returns the events as dicts (`model_dump`), each `source` replaced by its line (`line_numbers`)."""
    kept = list(events)
    return [{**e.model_dump(), "source": n} for e, n in zip(kept, line_numbers(kept), strict=True)]


def versions_by_line(events: Iterable[ConversationEvent]) -> list[tuple[int, str, int | None]]:
    """Returns each event's version, class name and line (`line_numbers`)."""
    kept = list(events)
    return [(e.originator_version, type(e).__name__, n) for e, n in zip(kept, line_numbers(kept), strict=True)]
