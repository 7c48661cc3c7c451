"""Benchmark: `chatrecord timeline ID -o FILE` of a conversation of 10,000 segments, on SQLite and
PostgreSQL: the file's bytes and the time to write it (issue 39, item 2: at most 5 MB in at most
5 s; docs/benchmarks.md). The served page's first open is `scripts/bench_timeline.py`'s.

    python3 scripts/bench_timeline_file.py [--segments 10000] [--backend sqlite|postgres|both] [--runs 3]

Fills a new store per backend (a SQLite file in /tmp, kept and reused, or a PostgreSQL schema of
CHATRECORD_TEST_DATABASE_URL, dropped after) with one conversation of `--segments` segments of
the demo tour's steps (`bench_flat_lines.bulk_fill`), reads its latest turn once (the read
models catch up), then runs `chatrecord timeline` in a process of its own `--runs` times
(median wall clock, the process's start included) with the default `--inputs 50`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flat_lines import bulk_fill
from bench_flat_support import Postgres

from adapters.api import Chatrecord
from adapters.backends.settings import sqlite_env
from adapters.bootstrap import build_store

ROOT = Path(__file__).resolve().parents[1]


def filled(env: dict[str, str], conv: str, segments: int, fresh: bool) -> None:
    chat = Chatrecord(build_store(env))
    try:
        if fresh:
            bulk_fill(chat.store, conv, segments)
        chat.turn_input(conv)
    finally:
        chat.close()


def written(env: dict[str, str], conv: str, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "adapters.cli", "timeline", conv, "-o", str(out)],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    conv, out = f"timeline-file-{args.segments}", Path("/tmp/bench_timeline_file.html")
    print(f"nproc {os.cpu_count()}, load {Path('/proc/loadavg').read_text().split()[:3]}, Python {sys.version.split()[0]}")
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        pg = Postgres() if backend == "postgres" else None
        try:
            db = Path(f"/tmp/bench_timeline_file_{args.segments}.sqlite")
            fresh = pg is not None or not db.exists()
            env = pg.env("file") if pg is not None else sqlite_env(db)
            filled(env, conv, args.segments, fresh)
            times = [written(env, conv, out) for _ in range(args.runs)]
            size = out.stat().st_size
            print(
                f"{backend}: {args.segments:,} segments: timeline -o: {size / 1e6:.2f} MB "
                f"(target 5 MB: {'met' if size <= 5e6 else 'NOT met'}), median {statistics.median(times):.1f} s of "
                f"{', '.join(f'{t:.1f}' for t in times)} (target 5 s: {'met' if statistics.median(times) <= 5 else 'NOT met'})"
            )
        finally:
            if pg is not None:
                pg.close()
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
