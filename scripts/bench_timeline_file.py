"""Benchmark: `chatrecord timeline ID -o FILE` of a conversation of 10,000 segments, on SQLite and
PostgreSQL: the file's bytes and the time to write it (issue 39, item 2: at most 5 MB in at most
5 s; docs/benchmarks.md), of this tree and, with `--before DIR`, of another tree of the code (a
`git archive` of an older commit) on the same store in the same minutes, with the ratio. The
served page's first open is `scripts/bench_timeline.py`'s.

    python3 scripts/bench_timeline_file.py [--segments 10000] [--backend sqlite|postgres|both] [--runs 3] [--before DIR]

Fills a new store per backend (a SQLite file in /tmp, kept and reused, or a PostgreSQL schema of
CHATRECORD_TEST_DATABASE_URL, dropped after) with one conversation of `--segments` segments of
the demo tour's steps (`bench_flat_lines.bulk_fill`), reads its latest turn and draws its
overview once (the read models catch up, as after the served page was opened), then runs
`chatrecord timeline` (the default `--inputs 20`) in a process of its own `--runs` times per
tree, the trees taking turns: median wall clock and CPU seconds (user + system of the process,
its start included).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flat_lines import bulk_fill
from bench_flat_support import PG_URL, Postgres

from adapters.api import Chatrecord
from adapters.backends.settings import sqlite_env
from adapters.bootstrap import build_store
from adapters.pages import overview_svg

ROOT = Path(__file__).resolve().parents[1]


def filled(env: dict[str, str], conv: str, segments: int, fresh: bool) -> None:
    chat = Chatrecord(build_store(env))
    try:
        if fresh:
            bulk_fill(chat.store, conv, segments)
        chat.turn_input(conv)
        chat.overview_drawn(conv, overview_svg)
    finally:
        chat.close()


def written(tree: Path, cli_env: dict[str, str], conv: str, out: Path) -> tuple[float, float]:
    """Returns (wall seconds, CPU seconds) of one `chatrecord timeline` run of the code in `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATRECORD_")}
    subprocess.run(
        [sys.executable, "-m", "adapters.cli", "timeline", conv, "-o", str(out)],
        cwd=tree,
        env={**env, "PYTHONPATH": str(tree), **cli_env},
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another tree of the code, run on the same store")
    args = parser.parse_args()
    conv = f"timeline-file-{args.segments}"
    trees = {"this tree": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    print(f"nproc {os.cpu_count()}, load {Path('/proc/loadavg').read_text().split()[:3]}, Python {sys.version.split()[0]}")
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        pg = Postgres() if backend == "postgres" else None
        try:
            db = Path(f"/tmp/bench_timeline_file_{args.segments}.sqlite")
            fresh = pg is not None or not db.exists()
            # the overview's first fold of 10,000 segments sits in one transaction longer than the
            # library's 5 s idle-in-transaction timeout on a busy machine: the bench allows 120 s
            env = {**pg.env("file"), "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": "120"} if pg is not None else sqlite_env(db)
            cli_env = (
                {"CHATRECORD_DATABASE_URL": f"{PG_URL}?schema={env['POSTGRES_SCHEMA']}"}
                if pg is not None
                else {"CHATRECORD_DB": str(db)}
            )
            filled(env, conv, args.segments, fresh)
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
            sizes: dict[str, int] = {}
            for _ in range(args.runs):
                for name, tree in trees.items():
                    out = Path(f"/tmp/bench_timeline_file_{name.replace(' ', '_')}.html")
                    runs[name].append(written(tree, cli_env, conv, out))
                    sizes[name] = out.stat().st_size
            medians = {}
            for name, done in runs.items():
                wall, cpu = statistics.median(w for w, _ in done), statistics.median(c for _, c in done)
                medians[name] = (wall, cpu)
                print(
                    f"{backend}, {name}: {args.segments:,} segments: timeline -o: {sizes[name] / 1e6:.2f} MB "
                    f"(target 5 MB: {'met' if sizes[name] <= 5e6 else 'NOT met'}), median {wall:.1f} s wall of "
                    f"{', '.join(f'{w:.1f}' for w, _ in done)}, {cpu:.1f} s CPU of {', '.join(f'{c:.1f}' for _, c in done)} "
                    f"(target 5 s: {'met' if wall <= 5 else 'NOT met'} wall, {'met' if cpu <= 5 else 'NOT met'} CPU)"
                )
            if "before" in medians:
                (w0, c0), (w1, c1) = medians["before"], medians["this tree"]
                print(f"{backend}: this tree / before: wall {w1 / w0:.2f}x, CPU {c1 / c0:.2f}x")
        finally:
            if pg is not None:
                pg.close()
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
