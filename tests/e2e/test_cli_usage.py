"""`chatrecord usage`, run as the user runs it: the demo's totals as its lines state them, a
page with its cursor, JSON for tools, and its mistakes as one line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import Run

DATA = Path(__file__).parent.parent / "data"


def test_usage_prints_the_total_and_the_groups_and_pages_by_day(store_run: Run) -> None:
    store_run("ingest", DATA / "demo_seo_tour.jsonl")
    store_run("ingest", DATA / "behalten_tour.jsonl")

    shown = store_run("usage")
    paged = store_run("usage", "--limit", "1")
    as_json = json.loads(store_run("usage", "--by", "day", "--json").stdout)

    assert (shown.returncode, shown.stdout) == (
        0,
        "conversation   segments    time  model calls   tokens in  tokens out       cost  tool calls  failed  refused\n"
        "total                12  31.8 s           14  18,000 +4?   1,200 +4?  0.041 +4?          23       0        3\n"
        "conv-behalten         4   8.4 s            4     unknown     unknown    unknown           7       0        3\n"
        "conv-demo-seo         8  23.4 s           10      18,000       1,200      0.041          16       0        0\n",
    )
    assert paged.stdout.splitlines()[-1] == "more: chatrecord usage --cursor cconv-behalten --limit 1"
    assert [g["key"] for g in as_json["groups"]] == ["2026-10-28"]
    assert (as_json["total"]["input_tokens"], as_json["total"]["calls_without_usage"]) == (18000, 4)
    assert store_run("usage", "--cursor", "cconv-behalten", "--limit", "1").stdout.splitlines()[-1].startswith("conv-demo-seo ")


def test_usage_mistakes_are_one_line(sqlite_run: Run) -> None:
    sqlite_run("ingest", DATA / "demo_seo_tour.jsonl")
    bad_cursor = sqlite_run("usage", "--cursor", "nonsense")
    bad_by = sqlite_run("usage", "--by", "week")
    empty = sqlite_run("usage", "--since", "2026-11-01T00:00:00Z")

    assert bad_cursor.returncode == 2 and "'nonsense' is not a cursor" in bad_cursor.stderr
    assert bad_by.returncode == 2 and "'week' is not one of" in bad_by.stderr
    assert (empty.returncode, empty.stdout) == (0, "no segments since 2026-11-01T00:00:00Z\n")
