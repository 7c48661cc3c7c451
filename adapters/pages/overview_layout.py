"""The overview picture's layout: which cell of which column and lane each point or bucket of a
conversation's overview fills, with its tone, title and day labels (`overview_data`), for the template
`overview.svg` to draw."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from adapters.api import OverviewPoint
from projections.overview import Overview


def when(at: datetime, short: bool = False) -> str:
    """Returns `at` in UTC: `2026-10-31 14:05:00 UTC`, or `14:05:00` when `short`."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    at = at.astimezone(UTC)
    return at.strftime("%H:%M:%S") if short else at.strftime("%Y-%m-%d %H:%M:%S UTC")


LANES = {"message": 0, "retry": 0, "segment": 1, "decision": 2, "undecided": 3, "edit": 3, "cut": 3, "erased": 3}
TONE_RANK = {"info": 0, "ok": 1, "wait": 2, "cut": 3, "bad": 4}


def overview_data(points: Sequence[OverviewPoint] | Overview, width: int) -> dict[str, Any]:
    """Returns what the overview's template draws: cells per column and lane, day labels.
    From a read model whose buckets hold one point each (up to `projections.overview.BUCKETS`
    events) the cells are those of its points; from a wider one (`bucket_data`) coarser."""
    if isinstance(points, Overview):
        exact = points.points()
        if exact is None:
            return bucket_data(points, width)
        points = exact
    left, plot = 92, width - 92 - 12
    if not points:
        return {
            "width": width,
            "height": 120,
            "cells": [],
            "days": [],
            "left": left,
            "plot": plot,
            "count": 0,
            "segments": 0,
            "lanes": ["messages", "segments", "decisions", "trouble"],
        }
    first, last = points[0].version, points[-1].version
    span = max(last - first, 1)
    columns = min(plot, max(len(points), 80))
    cells: dict[tuple[int, int], OverviewPoint] = {}
    counts: dict[tuple[int, int], int] = {}
    days: list[tuple[float, str]] = []
    day = None
    for p in points:
        col = min(int((p.version - first) / span * (columns - 1)) if columns > 1 else 0, columns - 1)
        key = (col, LANES.get(p.kind, 3))
        counts[key] = counts.get(key, 0) + 1
        kept = cells.get(key)
        if kept is None or TONE_RANK[p.tone] > TONE_RANK[kept.tone]:
            cells[key] = p
        stamp = when(p.at)[:10]
        if stamp != day:
            day = stamp
            days.append((left + col * plot / columns, stamp))
    step = plot / columns
    shown_days, last_x = [], -1000.0
    for x, label in days:
        if x - last_x >= 90:
            shown_days.append((round(x, 1), label))
            last_x = x
    return {
        "width": width,
        "height": 120,
        "left": left,
        "plot": plot,
        "count": len(points),
        "segments": sum(1 for p in points if p.kind == "segment"),
        "lanes": ["messages", "segments", "decisions", "trouble"],
        "days": shown_days,
        "cells": [
            {
                "x": round(left + col * step, 2),
                "w": round(max(step - (1 if step > 3 else 0), 1), 2),
                "lane": lane,
                "tone": p.tone,
                "title": p.label + (f" (+{counts[(col, lane)] - 1} more)" if counts[(col, lane)] > 1 else ""),
                "version": p.version,
            }
            for (col, lane), p in sorted(cells.items())
        ],
    }


def bucket_data(overview: Overview, width: int) -> dict[str, Any]:
    """`overview_data` of a read model whose buckets hold several points each: one column per
    bucket at most (x: the bucket's place among the first and last bucket), a cell per lane
    whose tone is the highest of the bucket's points there and whose title gives the bucket's
    versions and its counts per kind and tone (no single point's label), a day label where a
    bucket's first point's day differs from the day of the bucket before's last. Coarser than
    the picture of the points (`overview_data`), which places each point by its version."""
    left, plot = 92, width - 92 - 12
    ordered = sorted(overview.buckets.items())
    first, last = ordered[0][0], ordered[-1][0]
    span = max(last - first, 1)
    columns = min(plot, max(len(ordered), 80))
    cells: dict[tuple[int, int], dict[str, int]] = {}
    ranges: dict[int, tuple[int, int]] = {}
    days: list[tuple[float, str]] = []
    day = None
    w = overview.width
    for index, bucket in ordered:
        col = min(int((index - first) / span * (columns - 1)) if columns > 1 else 0, columns - 1)
        low, high = ranges.get(col, (index, index))
        ranges[col] = (min(low, index), max(high, index))
        for key, n in bucket.counts.items():
            kind, tone = key.split(":")
            held = cells.setdefault((col, LANES.get(kind, 3)), {})
            held[key] = held.get(key, 0) + n
        stamp = when(bucket.first.at)[:10]
        if stamp != day:
            days.append((left + col * plot / columns, stamp))
        day = when(bucket.last_at)[:10]
    step = plot / columns
    shown_days, last_x = [], -1000.0
    for x, label in days:
        if x - last_x >= 90:
            shown_days.append((round(x, 1), label))
            last_x = x

    def title(col: int, counts: dict[str, int]) -> str:
        low, high = ranges[col]
        versions = f"versions {low * w + 1}–{(high + 1) * w}"
        return versions + ": " + ", ".join(f"{n} {key.replace(':', ' ')}" for key, n in sorted(counts.items()))

    return {
        "width": width,
        "height": 120,
        "left": left,
        "plot": plot,
        "count": overview.total,
        "segments": sum(n for b in overview.buckets.values() for k, n in b.counts.items() if k.startswith("segment:")),
        "lanes": ["messages", "segments", "decisions", "trouble"],
        "days": shown_days,
        "cells": [
            {
                "x": round(left + col * step, 2),
                "w": round(max(step - (1 if step > 3 else 0), 1), 2),
                "lane": lane,
                "tone": max((k.split(":")[1] for k in counts), key=TONE_RANK.__getitem__),
                "title": title(col, counts),
                "version": ranges[col][0] * w + 1,
            }
            for (col, lane), counts in sorted(cells.items())
        ],
    }
