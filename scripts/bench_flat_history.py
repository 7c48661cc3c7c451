"""The `flat` section of `scripts/bench_flat.py`: the append rate and `turn_notes` at a long
conversation against short ones, and bytes per segment (PostgreSQL)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import (
    Backend,
    Figures,
    Writer,
    median_time,
    say,
    target,
)

from adapters.api import Chatrecord
from adapters.bootstrap import build_store


def section_flat(b: Backend, args: argparse.Namespace) -> None:
    import bench_state_row as A
    import common as C

    env = b.env("flat")
    chat = Chatrecord(build_store(env))
    big = Writer(chat, "big")
    fig = Figures()
    storage: list[tuple[int, int, dict[str, int]]] = []
    # storage: a conversation of its own store, built the chat's way (each segment's lines, then
    # the next turn's read), so the read models' rows are written with every append
    stored_env = b.env("storage")
    stored = Chatrecord(build_store(stored_env))
    base = b.storage(stored_env)[0] if b.name == "PostgreSQL" else 0  # the empty store's tables and indexes
    say(f"  storage: building a {max(args.storage):,}-segment conversation the chat's way (turn_notes after each) ...")
    stored_writer, t0 = Writer(stored, "stored"), time.perf_counter()
    while stored_writer.message < max(args.storage):
        stored_writer.append_and_read()
        if stored_writer.message in args.storage:
            total, per_table = b.storage(stored_env)
            storage.append((stored_writer.message, total, per_table))
    say(f"  built in {time.perf_counter() - t0:.0f} s")
    chunk, t0, done = max(args.big // 10, 1), time.perf_counter(), 0
    say(f"  building a {args.big:,}-segment conversation through Chatrecord.record ...")
    while done < args.big:
        t = time.perf_counter()
        for _ in range(min(chunk, args.big - done)):
            big.append()
        done = big.message
        say(f"    {done:>6,} segments: {chunk / (time.perf_counter() - t):.1f} segments/s in the last {chunk:,}")
    say(f"  built in {time.perf_counter() - t0:.0f} s")
    for done, total, per_table in storage:
        print(f"\n{b.name}: storage after VACUUM at {done:,} segments: {total:,} B, {total / done / 1024:.2f} KB per segment")
        for table, size in sorted(per_table.items(), key=lambda kv: -kv[1]):
            print(f"  {table:<32} {size:>12,} B")
    if b.name == "PostgreSQL" and storage:
        first = storage[0][1] / storage[0][0]
        target(b.name, f"storage at {storage[0][0]:,} segments", first / 1024, "<= 6.8 KB per segment", first <= 6.8 * 1024)
        if len(storage) > 1:
            (n1, t1, _), (n2, t2, _) = storage[0], storage[1]
            first_part, next_part = (t1 - base) / n1, (t2 - t1) / (n2 - n1)
            print(
                f"\n{b.name}: the empty store takes {base:,} B; the first {n1:,} segments take "
                f"{first_part / 1024:.2f} KB each, the next {n2 - n1:,} {next_part / 1024:.2f} KB each "
                "(the run record keeps 200 entries, so its table stops growing)"
            )
            grow = next_part / first_part
            target(
                b.name,
                f"bytes per segment of the segments {n1 + 1:,}-{n2:,} / of the first {n1:,} (net of the empty store)",
                grow,
                "<= 1.05: no faster than linear",
                grow <= 1.05,
            )
    tiny = Writer(chat, "tiny")
    for _ in range(10):
        tiny.append()
    smalls = []
    for r in range(args.rounds):
        small = Writer(chat, f"small-{r}")
        for _ in range(100):
            small.append()
        smalls.append(small)
    conn = C.connect()
    A.reset_conversation(conn, "flat-row-2")
    for label, writer in (("10", tiny), ("100", smalls[0]), (f"{args.big:,}", big)):
        notes = writer.read().notes
        say(f"  turn_notes at {label} segments: {len(notes)} notes, {sum(len(n.text) for n in notes):,} characters")
    for r in range(args.rounds):
        at_small = median_time(smalls[r].append_and_read, args.calls)
        at_big = median_time(big.append_and_read, args.calls)
        fig.add("append + turn_notes at 100 segments", 1 / at_small, "segments/s")
        fig.add(f"append + turn_notes at {args.big:,} segments", 1 / at_big, "segments/s")
        fig.add(f"ratio rate at {args.big:,} / at 100", at_small / at_big, "x")
        reads = {"tiny": tiny.read, "small": smalls[r].read, "big": big.read, "row": lambda: A.read_turn(conn, "flat-row-2")}
        times = {k: median_time(fn, args.calls) for k, fn in (reversed(reads.items()) if r % 2 else reads.items())}
        fig.add("turn_notes at 10 segments", 1000 * times["tiny"], "ms")
        fig.add("turn_notes at about 100 segments", 1000 * times["small"], "ms")
        fig.add(f"turn_notes at {args.big:,} segments", 1000 * times["big"], "ms")
        fig.add("state row read (PostgreSQL)", 1000 * times["row"], "ms")
        fig.add(f"ratio turn_notes at {args.big:,} / at 10", times["big"] / times["tiny"], "x")
        fig.add(f"ratio turn_notes at {args.big:,} / state row read", times["big"] / times["row"], "x")
        cold_tiny = median(first_read_after_append(chat, f"cold-{r}", 10, args.calls))
        cold_small = median(first_read_after_append(chat, None, 0, args.calls, smalls[r]))
        cold_big = median(first_read_after_append(chat, None, 0, args.calls, big))
        fig.add("first turn_notes after an append, at 10 segments", 1000 * cold_tiny, "ms")
        fig.add("first turn_notes after an append, at about 100 segments", 1000 * cold_small, "ms")
        fig.add(f"first turn_notes after an append, at {args.big:,} segments", 1000 * cold_big, "ms")
        fig.add(f"ratio first turn_notes after an append, at {args.big:,} / at 10", cold_big / cold_tiny, "x")
        fig.add(f"ratio first turn_notes after an append, at {args.big:,} / at about 100", cold_big / cold_small, "x")
    fig.print(f"{b.name}: flat (median of {args.calls} calls per round)")
    ratio = fig.median(f"ratio rate at {args.big:,} / at 100")
    target(b.name, f"append rate at {args.big:,} / at 100 segments", ratio, ">= 0.8x", ratio >= 0.8)
    ratio = fig.median(f"ratio turn_notes at {args.big:,} / at 10")
    target(b.name, f"turn_notes at {args.big:,} / at 10 segments", ratio, "<= 1.5x", ratio <= 1.5)
    ratio = fig.median(f"ratio turn_notes at {args.big:,} / state row read")
    target(b.name, f"turn_notes at {args.big:,} / state-row read", ratio, "<= 1.0x", ratio <= 1.0)
    ratio = fig.median(f"ratio first turn_notes after an append, at {args.big:,} / at 10")
    target(
        b.name,
        f"first turn_notes after an append, at {args.big:,} / at 10 segments (no kept answer)",
        ratio,
        "<= 1.5x",
        ratio <= 1.5,
    )


def first_read_after_append(
    chat: Chatrecord, prefix: str | None, segments: int, calls: int, writer: Writer | None = None
) -> list[float]:
    """Returns `calls` times (s) of the first `turn_notes` after an append: the chat's own read,
    which no kept answer serves. With `writer`, its conversation grows by one segment per call;
    else each call appends the `segments`-th segment to a new conversation of its own."""
    times = []
    for n in range(calls):
        if writer is None:
            one = Writer(chat, f"{prefix}-{n}")
            for _ in range(segments):
                one.append()
            one.read()  # warm the process for this conversation's statements, as a running chat is
            one.append()
            t = time.perf_counter()
            one.read()
        else:
            writer.append()
            t = time.perf_counter()
            writer.read()
        times.append(time.perf_counter() - t)
    return times
