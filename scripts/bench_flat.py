"""Benchmark of issue 7: the row read side against the state row it replaces, in one run.

For each backend (PostgreSQL in a fresh schema of CHATRECORD_TEST_DATABASE_URL, default
postgresql://postgres@127.0.0.1:5432/test, dropped at the end; and a SQLite file in a temp
folder) it prints medians over rounds and the ratios the issue asks for, measured side by side:

- append: a segment's lines (user_message, then segment_returned: trigger "turn", outcome
  "completed", the steps of a demo tour segment, a fresh segment id) recorded through
  `adapters.api.Chatrecord.record`, then `turn_notes`; against the state-row append followed by
  its read (`../shared/anchors/bench_state_row.py`, always on PostgreSQL, database `anchors`);
  per line against the library's bare one-event save (an eventsourcing Application with a
  trivial aggregate, in its own schema or file of the same database);
- clients: 4 processes on 4 conversations against 1 (append + turn_notes);
- flat: the append rate at BIG segments against 100, `turn_notes` at BIG segments against 10
  and against the state-row read; the BIG conversation is built once through the Python API;
- storage (PostgreSQL): bytes per segment after a plain VACUUM of the schema's tables, at two
  sizes of the same conversation;
- rebuild: events/s of `ReadModels.rebuild` (its worker processes as `chatrecord rebuild`
  chooses them, and in one process) against the library's notification-log read + decode over
  the same events, and peak memory (Pss of a fresh subprocess and its workers) at two sizes.

Not a test: timings vary with the machine and its load. The sections are in bench_flat_writes.py
(append, mix, turn_input, clients), bench_flat_history.py (flat), bench_flat_rebuild.py and
bench_flat_profile.py; their helpers in bench_flat_support.py.

    PYTHONPATH=. python scripts/bench_flat.py            # the full run (15-20 minutes on 2 cores)
    PYTHONPATH=. python scripts/bench_flat.py --quick    # small sizes, about 3 minutes
    PYTHONPATH=. python scripts/bench_flat.py --backends sqlite --sections append,flat
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_history import section_flat
from bench_flat_profile import section_profile
from bench_flat_rebuild import section_rebuild
from bench_flat_support import (
    TARGETS,
    backend,
    ensure_anchors_database,
    loadavg,
    machine,
    say,
)
from bench_flat_writes import section_append, section_clients, section_mix, section_turn_input

SECTIONS = {
    "mix": section_mix,
    "turn_input": section_turn_input,
    "append": section_append,
    "clients": section_clients,
    "flat": section_flat,
    "rebuild": section_rebuild,
    "profile": section_profile,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, short rounds")
    ap.add_argument("--backends", default="pg,sqlite", help="pg,sqlite (default both, in that order)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="mix,turn_input,append,clients,flat,rebuild,profile")
    ap.add_argument("--rounds", type=int, help="rounds per figure (default 5, quick 3)")
    ap.add_argument("--seconds", type=float, help="seconds per rate per round (default 2, quick 1)")
    ap.add_argument("--big", type=int, help="segments of the long conversation (default 10,000, quick 1,000)")
    ap.add_argument("--rebuild-sizes", help="two event counts (default 20000,100000, quick 4000,20000)")
    ap.add_argument("--rebuild-rounds", type=int, help="measurements per size (default 1, quick 2)")
    args = ap.parse_args()
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.seconds = args.seconds or (1.0 if args.quick else 2.0)
    args.calls = 10 if args.quick else 20
    args.big = args.big or (1_000 if args.quick else 10_000)
    args.storage = (500, 1_000) if args.quick else (1_000, 2_000)
    sizes = args.rebuild_sizes or ("4000,20000" if args.quick else "20000,100000")
    args.rebuild = tuple(int(n) for n in sizes.split(","))
    args.rebuild_rounds = args.rebuild_rounds or (2 if args.quick else 1)
    ensure_anchors_database()
    say(f"machine: {machine()}")
    say(f"load average before: {loadavg()}")
    t0 = time.perf_counter()
    for name in args.backends.split(","):
        with backend(name) as b:
            for section in args.sections.split(","):
                say(f"\n== {b.name}: {section} ({time.strftime('%H:%M:%S')}, load {loadavg()})")
                SECTIONS[section](b, args)
    say(f"\nload average after: {loadavg()}; total {time.perf_counter() - t0:.0f} s")
    print("\n### Targets\n")
    print("| backend | figure | median (target) | met |")
    print("|---|---|---|---|")
    for backend_name, what, value, met in TARGETS:
        print(f"| {backend_name} | {what} | {value} | {'yes' if met else '**no**'} |")


if __name__ == "__main__":
    main()
