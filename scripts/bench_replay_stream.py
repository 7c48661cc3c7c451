"""Benchmark: the bytes `replay --conversation ID --json` and `--changes` write, and the peak
memory of the process writing them, at 100, 1,000 and 10,000 segments (issue 39, item 1;
docs/benchmarks.md).

    python3 scripts/bench_replay_stream.py [--sizes 100,1000,10000] [--whole-max 1000] [--dir /tmp]

Fills a SQLite store per size (one conversation of that many segments of the demo tour's steps,
`bench_flat_lines.bulk_fill`, kept in `--dir` and reused), reads its latest turn once (the read
models catch up), then runs each form in a process of its own (`--child`), its standard output a
file: the bytes are that file's size, the peak memory the child's `ru_maxrss`, the time its wall
clock. The whole form grows with the square of the history, so above `--whole-max` segments only
the last 100 turns are written whole (`--from`), the changes form always every turn.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flat_lines import bulk_fill

from adapters.api import Chatrecord
from adapters.backends.settings import sqlite_env
from adapters.bootstrap import build_store

ROOT = Path(__file__).resolve().parents[1]


def child(db: str, args: list[str]) -> None:
    """Runs `chatrecord replay ARGS` in this process (stdout: the file the parent gave) and
    writes this process's peak memory (KiB) to stderr's last line."""
    os.environ["CHATRECORD_DB"] = db
    from adapters.cli import main

    sys.argv = ["chatrecord", "replay", *args]
    try:
        main()
    except SystemExit as done:
        if done.code not in (0, None):
            raise
    sys.stdout.flush()
    print(f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr)


def measured(db: Path, args: list[str], out: Path) -> tuple[int, int, float]:
    """Returns (bytes written, peak memory KiB, seconds) of `replay ARGS` in a child process."""
    started = time.perf_counter()
    with out.open("wb") as sink:
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(db), "--", *args],
            stdout=sink,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            check=True,
        )
    took = time.perf_counter() - started
    rss = int(done.stderr.strip().splitlines()[-1].split()[1])
    return out.stat().st_size, rss, took


def filled(folder: Path, size: int) -> tuple[Path, str]:
    db, conv = folder / f"bench_replay_stream_{size}.sqlite", f"replay-stream-{size}"
    if not db.exists():
        chat = Chatrecord(build_store(sqlite_env(db)))
        try:
            bulk_fill(chat.store, conv, size)
            chat.turn_input(conv)  # the read models catch up, as a served store's are
        finally:
            chat.close()
    return db, conv


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[4:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--whole-max", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    args = parser.parse_args()
    print(f"nproc {os.cpu_count()}, load {Path('/proc/loadavg').read_text().split()[:3]}, Python {sys.version.split()[0]}")
    for size in (int(s) for s in args.sizes.split(",")):
        db, conv = filled(args.dir, size)
        forms = [("changes", ["--conversation", conv, "--changes"])]
        if size <= args.whole_max:
            forms.insert(0, ("whole", ["--conversation", conv, "--json"]))
        else:
            forms.insert(0, ("whole, last 100 turns", ["--conversation", conv, "--json", "--from", str(size - 99)]))
        for name, cli_args in forms:
            written, rss, took = measured(db, cli_args, args.dir / "bench_replay_stream.out")
            print(
                f"{size:>6,} segments  {name:<22} {written / 1e6:>10.2f} MB written  peak {rss / 1024:>7.0f} MiB  {took:>6.1f} s"
            )
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
