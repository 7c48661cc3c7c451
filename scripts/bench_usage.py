"""Times the usage audit (`chatrecord usage`, `Chatrecord.usage`) at a few and at many
conversations, on SQLite and PostgreSQL, in one run: a store of `--small` (10) and one of
`--large` (10,000) conversations, each a short tour (a user message and a segment of two model
calls and a tool call, on one of 30 days, of one of 50 owners), stored through the ordinary
ingest, so the flat usage rows are the ones the append wrote. For each store and each grouping
(conversation, owner, day) it times the first page (50 groups, with the range's total) and a
range of one week, the median of `--runs`; and, for scale, the fold of every log (the audit of
each conversation, `Chatrecord.audit`, which sums the same usage from events) at the small store.

Prints one line per measurement and the ratio large/small. Not a test. Example:

    python3 scripts/bench_usage.py --small 10 --large 10000 --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.api import Chatrecord  # noqa: E402
from adapters.backends.settings import postgres_env, sqlite_env  # noqa: E402
from adapters.bootstrap import build_store  # noqa: E402

PG_URL = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"
START = datetime(2026, 10, 1, tzinfo=UTC)


def tour(n: int) -> list[bytes]:
    """The lines of conversation `n`: started, a user message, a segment of two model calls and a tool call."""
    conv, day = f"bench-{n:06d}", START + timedelta(days=n % 30, seconds=n)
    at = [(day + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ") for s in (0, 1, 5)]
    llm = {"kind": "llm", "round": 1, "durationMs": 800.0, "promptTokens": 1500, "completionTokens": 90, "totalTokens": 1590}
    lines: list[dict[str, Any]] = [
        {"type": "conversation_started", "conversation": conv, "at": at[0], "kind": "chat", "owner": n % 50},
        {"type": "user_message", "conversation": conv, "at": at[1], "message": 1, "text": "SEO", "page": 42},
        {
            "type": "segment_returned",
            "conversation": conv,
            "at": at[2],
            "segment": f"{conv}/1",
            "run": conv,
            "trigger": "turn",
            "outcome": "completed",
            "answer": "Fertig.",
            "steps": [
                llm | {"estimatedCost": 0.0035},
                {
                    "kind": "tool",
                    "round": 1,
                    "durationMs": 40.0,
                    "toolName": "get_page",
                    "toolIsError": False,
                    "toolOutcome": "ok",
                },
                llm | {"round": 2},
            ],
        },
    ]
    return [orjson.dumps(line) for line in lines]


def median(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def filled(env: dict[str, str], conversations: int) -> Chatrecord:
    chat = Chatrecord(build_store(env))
    start = time.perf_counter()
    chat.ingest([line for n in range(conversations) for line in tour(n)], "bench")
    print(f"  filled {conversations:,} conversations in {time.perf_counter() - start:.1f} s", flush=True)
    return chat


def measure(chat: Chatrecord, runs: int) -> dict[str, float]:
    week = (START + timedelta(days=7), START + timedelta(days=14))
    found = {}
    for by in ("conversation", "owner", "day"):
        found[f"usage --by {by}"] = median(runs, lambda by=by: chat.usage(by))
    found["usage --by day, one week"] = median(runs, lambda: chat.usage("day", *week))
    return found


def postgres_env_for(schema: str) -> dict[str, str]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return {**postgres_env(PG_URL), "POSTGRES_SCHEMA": schema}


def drop(schema: str) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    print(f"usage audit: {args.small:,} and {args.large:,} conversations, median of {args.runs} runs", flush=True)
    for backend in args.backends.split(","):
        results: dict[int, dict[str, float]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for size in (args.small, args.large):
                print(f"{backend}, {size:,} conversations:", flush=True)
                schema = f"bench_usage_{uuid.uuid4().hex[:8]}"
                env = sqlite_env(Path(tmp) / f"{size}.sqlite") if backend == "sqlite" else postgres_env_for(schema)
                try:
                    chat = filled(env, size)
                    results[size] = measure(chat, args.runs)
                    if size == args.small:  # the fold of every log, for scale
                        names = [f"bench-{n:06d}" for n in range(size)]
                        results[size]["audit of every log"] = median(
                            args.runs, lambda chat=chat, names=names: [chat.audit(c) for c in names]
                        )
                    chat.close()
                finally:
                    if backend == "postgres":
                        drop(schema)
        for name, small in results[args.small].items():
            large = results[args.large].get(name)
            if large is None:
                print(f"  {backend:8} {name:28} {args.small:>6,}: {small * 1000:9.2f} ms")
                continue
            print(
                f"  {backend:8} {name:28} {args.small:>6,}: {small * 1000:9.2f} ms   "
                f"{args.large:>6,}: {large * 1000:9.2f} ms   ratio {large / small:7.1f}"
            )


if __name__ == "__main__":
    main()
