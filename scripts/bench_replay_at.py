"""Benchmark: `replay --conversation ID --at N` of the first and of the last turn of a stored
conversation of 10,000 segments (issue 25, item 4; docs/benchmarks.md).

    python3 scripts/bench_replay_at.py [--segments 10000] [--backend sqlite|postgres] [--db FILE]

Fills a new store (a SQLite file, kept at `--db` when given and reused when it exists, or a
PostgreSQL schema of CHATRECORD_TEST_DATABASE_URL) with one conversation of `--segments`
segments of the demo tour's steps (`bench_flat_lines.bulk_fill`, the last turn recorded as the
chat records it), reads its latest turn once (the read models catch up), then times
`Chatrecord.replay(conv, at=N)` for the first, the middle and the last message, each `--calls`
times (median), also per message of the input it returns (the issue's unit: at most 0.05 ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flat_lines import bulk_fill, segment_lines
from bench_flat_support import Postgres

from adapters.api import Chatrecord
from adapters.backends.settings import sqlite_env
from adapters.bootstrap import build_store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--db", type=Path, default=Path("/tmp/bench_replay_at.sqlite"))
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    conv, size = f"replay-at-{args.segments}", args.segments
    pg = Postgres() if args.backend == "postgres" else None
    fresh = pg is not None or not args.db.exists()
    chat = Chatrecord(build_store(pg.env("replay_at") if pg is not None else sqlite_env(args.db)))
    try:
        if fresh:
            bulk_fill(chat.store, conv, size - 1)  # saved as they are: the read models catch up at the next read
            chat.turn_input(conv)
            for line in segment_lines(conv, size):
                chat.record(line)
        chat.turn_input(conv)
        events = len(chat.events(conv))
        for at in (1, size // 2, size):
            times = []
            for _ in range(args.calls):
                t0 = time.perf_counter()
                done = chat.replay(conv, at=at)
                times.append(time.perf_counter() - t0)
            assert [t.message for t in done.turns] == [at] and not done.differs
            took, messages = statistics.median(times) * 1000, sum(len(t.messages) for t in done.turns)
            print(
                f"{args.backend}: {size:,} segments, {events:,} events: replay --at {at}: {took:.0f} ms, "
                f"{messages:,} messages, {took / max(messages, 1):.4f} ms per message"
            )
    finally:
        chat.close()
        if pg is not None:
            pg.close()


if __name__ == "__main__":
    main()
