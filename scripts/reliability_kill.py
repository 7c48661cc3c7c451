"""The reliability harness's `kill` section (`scripts/reliability.py`): an ingest and a rebuild
killed with SIGKILL at random points, then run to the end."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
from reliability_support import (
    ROOT,
    chat,
    cli,
    cli_env,
    demo_export,
    event_counts,
    fresh_store,
    must_be_zero,
    reference_counts,
    table,
)

# ---------------------------------------------------------------- kill -9


def _kill_at_random(settings: dict[str, str], args: list[str], rounds: int, span: float, rng: random.Random) -> list[str]:
    outcomes = []
    for _ in range(rounds):
        p = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", *args],
            cwd=ROOT,
            env=cli_env(settings),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        delay = rng.uniform(0.5, max(0.6, span))
        try:
            p.wait(timeout=delay)
            outcomes.append(f"ended before the kill ({p.returncode})")
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
            outcomes.append(f"killed at {delay:.1f} s")
    return outcomes


def kill(backends: list[str], rounds: int, lines: int, folder: Path, seed: int) -> None:
    rng = random.Random(seed)
    rows, rebuild_rows = [], []
    export = demo_export(lines)
    path = folder / "long.jsonl"
    path.write_bytes(b"".join(export))
    expected = reference_counts(export, folder)
    convs = sorted(expected)
    for backend in backends:
        with fresh_store(backend, folder) as settings:
            cli(settings, "init")
            with fresh_store(backend, folder) as timing:
                started = time.perf_counter()
                done = cli(timing, "ingest", str(path), "--batch-lines", "20", timeout=1800)
                span = time.perf_counter() - started
                assert done.returncode == 0, done.stderr
                fresh = chat(timing)
                fresh_turns = {c: orjson.dumps(fresh.turn_input(c).to_json()) for c in convs}
                fresh.close()
            outcomes = _kill_at_random(settings, ["ingest", str(path), "--batch-lines", "20"], rounds, span, rng)
            final = cli(settings, "ingest", str(path), "--batch-lines", "20", timeout=1800)
            stored = event_counts(settings, convs)
            verify = cli(settings, "verify")
            c = chat(settings)
            differs = sum(1 for conv in convs if c.replay(conv).differs)
            unequal = sum(1 for conv in convs if orjson.dumps(c.turn_input(conv).to_json()) != fresh_turns[conv])
            c.close()
            lost = sum(max(0, expected[k] - stored[k]) for k in convs)
            doubled = sum(max(0, stored[k] - expected[k]) for k in convs)
            for what, v in (
                ("lost", lost),
                ("doubled", doubled),
                ("read models differ", differs + unequal),
                ("final ingest exit", final.returncode),
                ("verify exit", verify.returncode),
            ):
                must_be_zero(f"kill ingest {backend} {what}", v)
            rows.append(
                [
                    backend,
                    len(export),
                    f"{span:.1f} s",
                    "; ".join(outcomes),
                    final.returncode,
                    sum(expected.values()),
                    sum(stored.values()),
                    lost,
                    doubled,
                    verify.returncode,
                    differs,
                    unequal,
                ]
            )
            if final.returncode:
                print(f"  final ingest {backend}: {final.stderr[-1500:]}")
            if verify.returncode:
                print(f"  verify {backend}: {(verify.stdout + verify.stderr)[-1500:]}")

            # rebuild killed mid-way
            started = time.perf_counter()
            same = cli(settings, "rebuild", "--rules", "2026-11-02", timeout=1800)
            span = time.perf_counter() - started
            c = chat(settings)
            before = {conv: orjson.dumps(c.turn_input(conv).to_json()) for conv in convs}
            rules_before = c.active_rules()
            c.close()
            outcomes = _kill_at_random(settings, ["rebuild", "--rules", "2026-11-01"], rounds, span, rng)
            c = chat(settings)
            changed = sum(1 for conv in convs if orjson.dumps(c.turn_input(conv).to_json()) != before[conv])
            rules_after = c.active_rules()
            differs_killed = sum(1 for conv in convs if c.replay(conv).differs)  # live tables agree with the log
            c.close()
            after = cli(settings, "rebuild", "--rules", "2026-11-01", timeout=1800)
            c = chat(settings)
            differs = sum(1 for conv in convs if c.replay(conv).differs)
            c.close()
            if rules_after == rules_before:  # no kill came after the switch's commit
                must_be_zero(f"kill rebuild {backend} live turns changed", changed)
            must_be_zero(f"kill rebuild {backend} replay differs after the kills", differs_killed)
            must_be_zero(f"kill rebuild {backend} next rebuild exit", after.returncode)
            must_be_zero(f"kill rebuild {backend} read models differ after", differs)
            rebuild_rows.append(
                [
                    backend,
                    f"{span:.1f} s (exit {same.returncode})",
                    "; ".join(outcomes),
                    f"{rules_before} -> {rules_after}",
                    changed,
                    differs_killed,
                    after.returncode,
                    differs,
                ]
            )
            if after.returncode:
                print(f"  rebuild after kills {backend}: {after.stderr[-1500:]}")
    table(
        f"kill -9 of `ingest --batch-lines 20` ({rounds} rounds, then run to the end)",
        [
            "backend",
            "lines",
            "one whole ingest",
            "kills",
            "final ingest exit",
            "events expected",
            "events stored",
            "lost",
            "doubled",
            "verify exit",
            "replay differs",
            "turn_input != fresh store",
        ],
        rows,
    )
    table(
        f"kill -9 of `rebuild --rules 2026-11-01` ({rounds} rounds), then a whole rebuild",
        [
            "backend",
            "one whole rebuild",
            "kills",
            "live rules before -> after the kills",
            "live turns changed by the kills",
            "replay differs after the kills",
            "next rebuild exit",
            "replay differs after it",
        ],
        rebuild_rows,
    )
