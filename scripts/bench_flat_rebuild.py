"""The `rebuild` section of `scripts/bench_flat.py`: events/s of `ReadModels.rebuild` against the
library's read and decode of the same events, and peak memory, each measured in a fresh
interpreter (`measure` runs this file with `_measure`)."""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import (
    Backend,
    Figures,
    bulk_fill,
    say,
    target,
    tree_memory_kb,
)

from adapters.bootstrap import build_store, read_models


def measure(env: dict[str, str], what: str) -> dict[str, float]:
    """Runs `what` (rebuild | rebuild1 | read) in a fresh interpreter; returns its events,
    seconds, workers and memory."""
    out = subprocess.run([sys.executable, __file__, "_measure", what, json.dumps(env)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{what} failed in its subprocess (exit {out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _measure(what: str, env: dict[str, str]) -> None:
    """In a fresh interpreter: rebuild the read models (`rebuild`: as `chatrecord rebuild`
    does, its workers chosen by `ReadModels.rebuild_workers`; `rebuild1`: in this one process),
    or read and decode every notification as the rebuild does (pages of 500); prints events,
    seconds, workers, the memory before and the highest memory sampled after each page (KB:
    `tree_memory_kb`, this process and its workers) and ru_maxrss of this process and of its
    largest child."""
    store = build_store(env)
    models = read_models(store)
    base = peak = tree_memory_kb()
    done = threading.Event()

    def sample(*_: object) -> None:
        nonlocal peak
        peak = max(peak, tree_memory_kb())

    def sampling() -> None:  # also while this process waits for its workers, which have no progress
        while not done.wait(0.02):
            sample()

    sampler = threading.Thread(target=sampling, daemon=True)
    sampler.start()
    workers = 1
    t0 = time.perf_counter()
    if what.startswith("rebuild"):
        report = models.rebuild(models.active_rules(), progress=sample, workers=1 if what == "rebuild1" else None)
        events, workers = report.events, report.workers
    else:
        events, start = 0, 0
        while True:
            page = store.recorder.select_notifications(start, 500, inclusive_of_start=False)
            for notification in page:
                store.mapper.to_domain_event(notification)
            events += len(page)
            sample()
            if len(page) < 500:
                break
            start = page[-1].id
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    sample()
    print(
        json.dumps(
            {
                "events": events,
                "seconds": seconds,
                "workers": workers,
                "peak_kb": peak,
                "base_kb": base,
                "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                "child_maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
            }
        )
    )


def section_rebuild(b: Backend, args: argparse.Namespace) -> None:
    env = b.env("rebuild")
    store = build_store(env)
    per_conv = args.rebuild[0] // 2  # segments (2 events each) per conversation
    fig, saved, conv, reached = Figures(), 0, 0, []
    for size in args.rebuild:
        t0 = time.perf_counter()
        while saved < size:
            saved += bulk_fill(store, f"rebuild-{conv}", min(per_conv, (size - saved) // 2 or 1))
            conv += 1
        reached.append(saved)
        say(f"  filled to {saved:,} events ({conv} conversations) in {time.perf_counter() - t0:.0f} s")
        for r in range(args.rebuild_rounds):
            order = ("rebuild", "read", "rebuild1") if r % 2 == 0 else ("rebuild1", "read", "rebuild")
            got = {what: measure(env, what) for what in order}
            ours, lib, one = got["rebuild"], got["read"], got["rebuild1"]
            assert ours["events"] == lib["events"] == one["events"] == saved, (ours, lib, one, saved)
            fig.add(f"rebuild at {saved:,} events", saved / ours["seconds"], "events/s")
            fig.add(f"rebuild worker processes at {saved:,} events", ours["workers"], "processes")
            fig.add(f"library read + decode at {saved:,} events", saved / lib["seconds"], "events/s")
            fig.add(f"ratio rebuild / read at {saved:,}", lib["seconds"] / ours["seconds"], "x")
            fig.add(f"rebuild in one process at {saved:,} events", saved / one["seconds"], "events/s")
            fig.add(f"ratio rebuild in one process / read at {saved:,}", lib["seconds"] / one["seconds"], "x")
            fig.add(f"rebuild peak memory at {saved:,} events", ours["peak_kb"] / 1024, "MB")
            fig.add(f"rebuild memory growth at {saved:,} events", (ours["peak_kb"] - ours["base_kb"]) / 1024, "MB")
            fig.add(f"rebuild in one process peak memory at {saved:,} events", one["peak_kb"] / 1024, "MB")
            fig.add(f"library read peak memory at {saved:,} events", lib["peak_kb"] / 1024, "MB")
            say(
                f"  {saved:,} events round {r + 1}: rebuild {saved / ours['seconds']:,.0f}/s in {ours['workers']} "
                f"process(es), in one process {saved / one['seconds']:,.0f}/s, read {saved / lib['seconds']:,.0f}/s; "
                f"memory before {ours['base_kb'] / 1024:.0f} MB, peak during rebuild {ours['peak_kb'] / 1024:.0f} MB "
                f"(ru_maxrss {ours['maxrss_kb'] / 1024:.0f} MB, largest worker {ours['child_maxrss_kb'] / 1024:.0f} MB), "
                f"in one process {one['peak_kb'] / 1024:.0f} MB"
            )
    # for information: a log of many conversations, as a store's usually is, where each worker has its share
    many = b.env("rebuild_many")
    store_many = build_store(many)
    spread = sum(bulk_fill(store_many, f"many-{k}", 500) for k in range(20))
    for r in range(args.rebuild_rounds):
        got = {
            what: measure(many, what)
            for what in (("rebuild", "read", "rebuild1") if r % 2 == 0 else ("rebuild1", "read", "rebuild"))
        }
        fig.add(f"many: rebuild of {spread:,} events in 20 conversations", spread / got["rebuild"]["seconds"], "events/s")
        fig.add("many: rebuild worker processes", got["rebuild"]["workers"], "processes")
        fig.add("many: rebuild in one process", spread / got["rebuild1"]["seconds"], "events/s")
        fig.add("many: library read + decode", spread / got["read"]["seconds"], "events/s")
        fig.add("many: ratio rebuild / read", got["read"]["seconds"] / got["rebuild"]["seconds"], "x")
        fig.add("many: ratio rebuild in one process / read", got["read"]["seconds"] / got["rebuild1"]["seconds"], "x")
    fig.print(
        f"{b.name}: rebuild (a fresh subprocess per measurement; memory: Pss of it and its workers, sampled after each page)"
    )
    small, large = reached[0], reached[-1]
    workers = fig.median(f"rebuild worker processes at {large:,} events")
    ratio = fig.median(f"ratio rebuild / read at {large:,}")
    target(
        b.name,
        f"rebuild / library read+decode at {large:,} events (as chatrecord rebuild runs it: "
        f"{workers:.0f} process{'es' if workers > 1 else ''})",
        100 * ratio,
        ">= 50 %",
        ratio >= 0.5,
    )
    ratio = fig.median(f"ratio rebuild in one process / read at {large:,}")
    target(b.name, f"rebuild in one process / library read+decode at {large:,} events", 100 * ratio, ">= 50 %", ratio >= 0.5)
    peak = fig.median(f"rebuild in one process peak memory at {large:,} events") / fig.median(
        f"rebuild in one process peak memory at {small:,} events"
    )
    target(
        b.name, f"rebuild (one process) peak memory at {large:,} / at {small:,} events", peak, "1.0 +- 10 %: flat", peak <= 1.1
    )


if __name__ == "__main__":
    _measure(sys.argv[2], json.loads(sys.argv[3]))
