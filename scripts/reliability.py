"""The reliability harness of issue 20 (docs/reliability.md): fuzz, concurrent writers, reads
during writes, kill -9 and serve on SQLite, each printing a figure table.

    python3 scripts/reliability.py [SECTION ...] [--root DIR] [--backends sqlite,postgres] [counts]

SECTION is one or more of fuzz, writers, reads, kill, serve (default: all). --root DIR runs
another checkout's code (its `adapters`, `domain`, `projections`; the CLI as
`python3 -m adapters.cli` with PYTHONPATH=DIR), so the same harness measures main before and
after a merge. PostgreSQL is CHATRECORD_TEST_DATABASE_URL (default
postgresql://postgres@127.0.0.1:5432/test); each section works in a fresh schema it drops at the
end, SQLite in a temp folder. Loopback only; every count is bounded and every wait has a timeout.

- fuzz: scripts/fuzz_input.py --keep-going on each backend (--fuzz-inputs, default 5,000):
  inputs, accepted, refused, crashes (errors outside ChatrecordError), reads failed afterwards.
- writers: --writers processes (8) append lines of the demo's shapes through the API, (a) all
  to one conversation (each writer its own segments, every 5th line a segment every writer sends)
  and (b) to four conversations (each conversation's demo export, cards decided, sent by two
  writers): raw errors (outside ChatrecordError), errors, lines acked, events stored against a
  sequential ingest of the same lines into a fresh store: lost, doubled.
- reads: one writer process appends one conversation's demo export line by line while --readers
  processes (3) read `turn_input`; every distinct read is compared with the latest turn of each
  prefix of the final log (`replay_turns` over events[:k]): reads, distinct, mismatches.
- kill: `ingest --batch-lines 20` of a long file killed with SIGKILL at random points
  (--kill-rounds, 5), then run to the end: events stored against a fresh ingest (lost, doubled),
  `verify` exit status, read models equal to the fold (`replay(...).differs` false and
  turn_input equal to the fresh store's); then `rebuild --rules 2026-11-01` killed the same way:
  the live turn inputs unchanged, the next rebuild exits 0.
- serve: scripts/bench_http.py of the checkout (8 clients, --http-seconds a way, SQLite, one
  server): its requests that failed, p50/p99, and the events lost or doubled.

Exit status 1 when any figure that must be 0 is not.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reliability_kill import kill
from reliability_support import (
    FAILED,
    HERE,
    ROOT,
    cli_env,
    cpu_model,
    load,
    must_be_zero,
    table,
)
from reliability_writers import reads, writers

# ---------------------------------------------------------------- fuzz


def fuzz(backends: list[str], inputs: int) -> None:
    rows = []
    for backend in backends:
        started = time.perf_counter()
        run = subprocess.run(
            [
                sys.executable,
                str(HERE / "scripts" / "fuzz_input.py"),
                str(inputs),
                "--keep-going",
                "--root",
                str(ROOT),
                "--backend",
                backend,
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        last = [t for t in run.stdout.splitlines() if t.startswith("inputs: ")]
        m = re.search(
            r"inputs: (\d+), accepted: (\d+), refused: (\d+), crashes: (\d+), reads failed afterwards: (\d+)",
            last[-1] if last else "",
        )
        if not m:
            print(f"fuzz on {backend}: no figures\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
            FAILED.append(f"fuzz {backend}: no figures")
            continue
        n = [int(x) for x in m.groups()]
        must_be_zero(f"fuzz {backend} crashes", n[3])
        must_be_zero(f"fuzz {backend} reads failed", n[4])
        rows.append([backend, *n, f"{time.perf_counter() - started:.0f} s"])
        for text in run.stdout.splitlines():
            if text.startswith(("  crash: ", "  unreadable: ")):
                print(f"  {backend}{text}")
    table(
        "fuzz (scripts/fuzz_input.py --keep-going)",
        ["backend", "inputs", "accepted", "refused", "crashes", "reads failed afterwards", "time"],
        rows,
    )


# ---------------------------------------------------------------- serve


def serve(clients: int, seconds: float) -> None:
    """Runs scripts/bench_http.py of the checkout on SQLite (one server process, no anchors) for one
    round of `seconds` a phase, and checks its rows: no request failed, no event lost or doubled."""
    script = ROOT / "scripts" / "bench_http.py"
    if not script.exists():
        script = HERE / "scripts" / "bench_http.py"
    command = [sys.executable, str(script), "--backend", "sqlite", "--clients", str(clients), "--rounds", "1"]
    command += ["--seconds", str(seconds), "--serve-arg=--workers=1", "--anchors", "off"]
    run = subprocess.run(command, cwd=ROOT, env=cli_env({}), capture_output=True, text=True, timeout=seconds * 10 + 300)
    rows = []
    phase = re.compile(r"^\s+\d+\s+\d+\s+(http|api)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s")
    counted = re.compile(r"^\s+events acknowledged (\d+), stored (\d+): lost (\d+), doubled (\d+)")
    for text in run.stdout.splitlines():
        if m := phase.match(text):
            way, rate, p50, p99, acked, errors = m.groups()
            must_be_zero(f"serve {way} errors", int(errors))
            rows.append([way, acked, errors, f"{p50} ms", f"{p99} ms", rate, "", ""])
        elif m := counted.match(text):
            _acked, _stored, lost, doubled = m.groups()
            must_be_zero("serve lost", int(lost))
            must_be_zero("serve doubled", int(doubled))
            rows.append(["both ways", f"{_stored} events stored", "", "", "", "", lost, doubled])
    if not rows or run.returncode != 0:
        print(f"serve: no figures\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
        FAILED.append("serve: no figures")
    table(
        f"serve on SQLite ({clients} clients, {seconds:g} s a way, scripts/bench_http.py, one server process)",
        ["way", "lines acked", "errors", "p50", "p99", "lines/s", "lost", "doubled"],
        rows,
    )


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sections", nargs="*", default=["fuzz", "writers", "reads", "kill", "serve"])
    parser.add_argument("--root", default=str(HERE))
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--fuzz-inputs", type=int, default=5000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writer-lines", type=int, default=60, help="Lines each writer sends.")
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--read-lines", type=int, default=120)
    parser.add_argument("--kill-rounds", type=int, default=5)
    parser.add_argument("--kill-lines", type=int, default=3000)
    parser.add_argument("--http-clients", type=int, default=8)
    parser.add_argument("--http-seconds", type=float, default=20.0, help="Each way's time in the serve section.")
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    if not (
        1 <= args.writers <= 32
        and 1 <= args.readers <= 16
        and args.fuzz_inputs <= 50_000
        and args.kill_lines <= 50_000
        and args.kill_rounds <= 50
    ):
        raise SystemExit("counts out of bounds: --writers 1..32, --readers 1..16, --fuzz-inputs/--kill-lines <= 50,000")
    unknown = set(args.sections) - {"fuzz", "writers", "reads", "kill", "serve"}
    if unknown:
        raise SystemExit(f"unknown section(s): {', '.join(sorted(unknown))}")
    backends = args.backends.split(",")
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "--oneline", "-1"], capture_output=True, text=True).stdout.strip()
    print(f"code: {ROOT} ({commit}); machine: {os.cpu_count()} CPUs, {cpu_model()}; load average before: {load()}", flush=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chatrecord-reliab-") as tmp:
        folder = Path(tmp)
        for section in args.sections:
            t0 = time.perf_counter()
            if section == "fuzz":
                fuzz(backends, args.fuzz_inputs)
            elif section == "writers":
                writers(backends, args.writers, args.writer_lines, folder)
            elif section == "reads":
                reads(backends, args.readers, args.read_lines, folder)
            elif section == "kill":
                kill(backends, args.kill_rounds, args.kill_lines, folder, args.seed)
            elif section == "serve":
                serve(args.http_clients, args.http_seconds)
            print(f"({section}: {time.perf_counter() - t0:.0f} s, load average {load()})", flush=True)
    print(f"load average after: {load()}; {time.perf_counter() - started:.0f} s in all")
    if FAILED:
        print("FAILED:\n  " + "\n  ".join(FAILED))
        return 1
    print("every figure that must be 0 is 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
