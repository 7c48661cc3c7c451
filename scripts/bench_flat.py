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

Not a test: timings vary with the machine and its load.

    PYTHONPATH=. python scripts/bench_flat.py            # the full run (15-20 minutes on 2 cores)
    PYTHONPATH=. python scripts/bench_flat.py --quick    # small sizes, about 3 minutes
    PYTHONPATH=. python scripts/bench_flat.py --backends sqlite --sections append,flat
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import (
    TARGETS,
    Backend,
    Chatrecord,
    Counted,
    Figures,
    MixWriter,
    Writer,
    _profile,
    backend,
    bare_saver,
    bulk_fill,
    ensure_anchors_database,
    loadavg,
    machine,
    median_time,
    say,
    target,
    tree_memory_kb,
)

from adapters.bootstrap import build_store, read_models

# ------------------------------------------------------------------ sections


def section_append(b: Backend, args: argparse.Namespace) -> None:
    import bench_state_row as A
    import common as C

    conn = C.connect()
    A.reset_conversation(conn, "flat-row-1")
    chat = Chatrecord(build_store(b.env("append")))
    ours = Writer(chat, "steady")
    for _ in range(200):  # the state row holds 200 entries: start ours from a steady state too
        ours.append()
    bare = bare_saver(b.env("bare"))
    numbers = iter(range(10**9))
    row_append = lambda i: (
        A.append_segment(conn, "flat-row-1", C.segment(next(numbers), "flat-row-1")[0]),
        A.read_turn(conn, "flat-row-1"),
    )
    fig, s = Figures(), args.seconds
    for r in range(args.rounds):
        pairs = [
            ("ours", lambda i: ours.append_and_read()),
            ("row", row_append),
            ("lines", lambda i: ours.append()),
            ("bare", bare),
        ]
        if r % 2:
            pairs.reverse()
        rates = {name: C.rate_for(fn, s) for name, fn in pairs}
        fig.add("ours: segment (2 lines) + turn_notes", rates["ours"], "segments/s")
        fig.add("state row: append + read (PostgreSQL)", rates["row"], "segments/s")
        fig.add("ratio ours / state row", rates["ours"] / rates["row"], "x")
        fig.add("ours: record, per line (no read)", 1000 / (2 * rates["lines"]), "ms")
        fig.add("library: bare one-event save", 1000 / rates["bare"], "ms")
        fig.add("ratio ours per line / bare save", rates["bare"] / (2 * rates["lines"]), "x")
        say(
            f"  round {r + 1}: ours {rates['ours']:.1f}/s row {rates['row']:.1f}/s "
            f"lines {2 * rates['lines']:.1f}/s bare {rates['bare']:.1f}/s"
        )
    fig.print(f"{b.name}: append a segment, then the turn read ({s:g} s per figure per round)")
    ratio = fig.median("ratio ours / state row")
    target(b.name, "append + turn_notes / state-row append + read", ratio, ">= 1.0x", ratio >= 1.0)
    ratio = fig.median("ratio ours per line / bare save")
    target(b.name, "per line / library bare save", ratio, "<= 1.5x", ratio <= 1.5)


def _langgraph(conn_string: str) -> tuple[Callable[[int], object], Callable[[], None]] | None:
    """Returns (one segment: LangGraph's invoke of `bench_langgraph.py` then its get_state, the
    next turn's read; close), on a thread filled with 200 segments first; None where
    LangGraph is not installed (`pip install -e '.[bench]'`)."""
    try:
        import bench_langgraph as LG
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        return None
    import common as C

    saver_cm = PostgresSaver.from_conn_string(conn_string)
    saver = saver_cm.__enter__()
    saver.setup()
    graph = LG.build_graph(saver)
    thread = f"bench-flat-{time.time_ns()}"
    LG.run_segments(graph, thread, 0, C.RECORD_CAP)  # its record at steady state, as the state row's
    numbers = iter(range(C.RECORD_CAP, 10**9))

    def segment(i: int) -> object:
        entry, answer = C.segment(next(numbers), thread)
        graph.invoke({"segment": entry, "answer": answer}, LG.config(thread))
        return graph.get_state(LG.config(thread))

    return segment, lambda: saver_cm.__exit__(None, None, None)


def section_mix(b: Backend, args: argparse.Namespace) -> None:
    """The chat's real mix: the demo tour's segments cycled (a user message, a question and its
    answer, six cards decided, the tour's end: 2.125 lines a segment), each segment's lines
    recorded one by one through `Chatrecord.record` and followed by `turn_notes`; beside the
    2-line segment, the state row (append + read, PostgreSQL) and LangGraph's PostgresSaver
    (invoke + get_state, PostgreSQL), all in the same rounds, in alternating order; the ratios
    are taken inside each round and their medians reported. Statements and waits on the
    server per line are counted under cProfile over whole tours (8 segments each), as
    `_profile` counts them: the append alone, and the append with its turn read."""
    import bench_state_row as A
    import common as C

    conn = C.connect()
    A.reset_conversation(conn, "flat-mix-row")
    chat = Chatrecord(build_store(b.env("mix")))
    mix, two = MixWriter(chat, "mix"), Writer(chat, "two")
    for _ in range(200):  # steady state: the record holds 200 entries, as the state row's
        mix.append_and_read()
        two.append()
    numbers = iter(range(10**9))
    row = lambda i: (
        A.append_segment(conn, "flat-mix-row", C.segment(next(numbers), "flat-mix-row")[0]),
        A.read_turn(conn, "flat-mix-row"),
    )
    lg = _langgraph(C.DSN)
    if lg is None:
        say("  LangGraph is not installed (pip install -e '.[bench]'): its figures are left out")
    fig, s = Figures(), args.seconds
    for r in range(args.rounds):
        lines_before = mix.lines
        pairs: list[tuple[str, Callable[[int], object]]] = [
            ("mix", lambda i: mix.append_and_read()),
            ("row", row),
            ("two", lambda i: two.append_and_read()),
        ]
        if lg is not None:
            pairs.append(("lg", lg[0]))
        if r % 2:
            pairs.reverse()
        rates, counts = {}, {}
        for name, fn in pairs:
            before = mix.segments
            rates[name] = C.rate_for(fn, s)
            counts[name] = mix.segments - before
        lines_per_segment = (mix.lines - lines_before) / max(counts["mix"], 1)
        fig.add("ours, real mix: segment (its lines) + turn_notes", rates["mix"], "segments/s")
        fig.add("ours, real mix: lines", rates["mix"] * lines_per_segment, "lines/s")
        fig.add("ours, 2-line segment + turn_notes", rates["two"], "segments/s")
        fig.add("state row: append + read (PostgreSQL)", rates["row"], "segments/s")
        fig.add("ratio real mix / state row", rates["mix"] / rates["row"], "x")
        fig.add("ratio 2-line / state row", rates["two"] / rates["row"], "x")
        line = f"  round {r + 1}: mix {rates['mix']:.1f}/s two {rates['two']:.1f}/s row {rates['row']:.1f}/s"
        if lg is not None:
            fig.add("LangGraph PostgresSaver: invoke + get_state", rates["lg"], "segments/s")
            fig.add("ratio real mix / LangGraph", rates["mix"] / rates["lg"], "x")
            line += f" langgraph {rates['lg']:.1f}/s"
        say(line)
        tour = mix.lines
        appended = Counted(mix.append, 8)  # one whole tour: 17 lines
        lines = mix.lines - tour
        read = Counted(mix.read, 8)
        plain = Counted(two.append, 8)
        fig.add("real mix: statements per line (append)", appended.statements / lines, "statements")
        fig.add("real mix: waits on the server per line (append)", appended.waits / lines, "waits")
        fig.add(
            "real mix: statements per segment (append + turn_notes)", (appended.statements + read.statements) / 8, "statements"
        )
        fig.add("real mix: waits per segment (append + turn_notes)", (appended.waits + read.waits) / 8, "waits")
        fig.add(
            "real mix: share of the append's time waiting on the server (under cProfile)",
            100 * appended.waited / appended.seconds,
            "%",
        )
        fig.add("2-line segment: statements per line (append)", plain.statements / 16, "statements")
    if lg is not None:
        lg[1]()
    fig.print(f"{b.name}: the real mix ({s:g} s per figure per round)")
    ratio = fig.median("ratio real mix / state row")
    target(
        b.name,
        "real mix (segment + turn_notes) / state-row append + read",
        ratio,
        ">= 1.2x" if b.name == "PostgreSQL" else ">= 1.0x",
        ratio >= (1.2 if b.name == "PostgreSQL" else 1.0),
    )
    if lg is not None and b.name == "PostgreSQL":
        ratio = fig.median("ratio real mix / LangGraph")
        target(b.name, "real mix / LangGraph PostgresSaver (invoke + get_state)", ratio, ">= 5x", ratio >= 5)
    if b.name == "PostgreSQL":
        per_line = fig.median("real mix: statements per line (append)")
        target(b.name, "real mix: statements per line", per_line, "<= 1.2", per_line <= 1.2)


def section_turn_input(b: Backend, args: argparse.Namespace) -> None:
    """`ReadModels.turn_input` (the latest turn's whole model input, from the rows) at 10,
    1,000 and BIG segments, against the fold of the log up to that turn it replaced
    (`scripts/bench_turn_input.py --store`); target: at most 0.05 ms per message it builds."""
    import bench_turn_input as T

    print(f"\n### {b.name}: turn_input (median of 5 calls)\n")
    print(T.TABLE_HEAD)
    found = T.store_rows(b, [10, 1_000, args.big])
    worst = max(ms / count for _, _, count, ms, _ in found)
    target(
        b.name,
        f"turn_input, ms per message of the input (10 to {args.big:,} segments, the worst)",
        worst,
        "<= 0.05",
        worst <= 0.05,
    )


def _client_of(env: dict[str, str]) -> Callable[[int], Callable[[int], object]]:
    # The tables exist already: clients that all run the library's CREATE OR REPLACE
    # FUNCTION at once fail with "tuple concurrently updated" on PostgreSQL.
    env = {**env, "CREATE_TABLE": "n"}

    def setup(k: int) -> Callable[[int], object]:
        writer = Writer(Chatrecord(build_store(env)), f"client-{k}")
        return lambda i: writer.append_and_read()

    return setup


def section_clients(b: Backend, args: argparse.Namespace) -> None:
    import bench_state_row as A
    import common as C

    env = b.env("clients")
    first = Chatrecord(build_store(env))  # creates the tables once
    for k in range(4):
        Writer(first, f"client-{k}")  # and starts the conversations
    setup = _client_of(env)
    conn = C.connect()
    for k in range(4):
        A.reset_conversation(conn, f"state-{k}")
    fig, s = Figures(), args.seconds
    for r in range(args.rounds):
        one, four = C.rate_clients(setup, 1, s), C.rate_clients(setup, 4, s)
        row1, row4 = C.rate_clients(A.state_client, 1, s), C.rate_clients(A.state_client, 4, s)
        fig.add("ours, 1 client", one, "segments/s")
        fig.add("ours, 4 clients on 4 conversations", four, "segments/s")
        fig.add("ratio ours 4 / 1", four / one, "x")
        fig.add("state row append (no read), 1 client", row1, "segments/s")
        fig.add("state row append (no read), 4 clients", row4, "segments/s")
        fig.add("ratio state row 4 / 1", row4 / row1, "x")
        say(f"  round {r + 1}: ours 1: {one:.1f}/s 4: {four:.1f}/s; state row 1: {row1:.0f}/s 4: {row4:.0f}/s")
    fig.print(f"{b.name}: clients (processes; segment + turn_notes each; {s:g} s per figure per round)")
    ratio = fig.median("ratio ours 4 / 1")
    target(b.name, "4 clients / 1 client", ratio, ">= 1.5x", ratio >= 1.5)


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
    stored = Chatrecord(build_store(stored_env))  # its read models' tables made with it, before the empty store is measured
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


def measure(env: dict[str, str], what: str) -> dict[str, float]:
    """Runs `what` (rebuild | rebuild1 | read) in a fresh interpreter; returns its events,
    seconds, workers and memory."""
    out = subprocess.run(
        [sys.executable, __file__, "_measure", what, json.dumps(env)], check=True, capture_output=True, text=True
    )
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
    store = build_store(env)  # its read models make the pointer and the first (empty) generation
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


def section_profile(b: Backend, args: argparse.Namespace) -> None:
    """Where the time goes: cProfile of recording a segment, of turn_notes on a conversation
    of 200 segments, and of a rebuild of its log."""
    chat = Chatrecord(build_store(b.env("profile")))
    writer = Writer(chat, "profile")
    for _ in range(200):
        writer.append()
    _profile(f"{b.name}: record a segment (2 lines)", writer.append, 30, "segment")
    mix = MixWriter(chat, "profile-mix")
    for _ in range(200):
        mix.append_and_read()
    lines = mix.lines
    _profile(f"{b.name}: record a real-mix segment (the demo tour's, {17 / 8:g} lines on average)", mix.append, 32, "segment")
    say(f"  ({(mix.lines - lines) / 32:.3f} lines per segment)")
    if b.name == "PostgreSQL":
        _statements_per_line(b, mix)
        _statements_per_kind(b)
    _profile(f"{b.name}: turn_notes at {writer.message} segments", writer.read, 30)
    events = chat.store.max_notification_id()
    _profile(
        f"{b.name}: rebuild of {events:,} events", lambda: chat.read_models.rebuild(chat.read_models.active_rules()), 1, "rebuild"
    )


def _statements_per_line(b: Backend, mix: MixWriter) -> None:
    """Prints the statements each line of one demo tour sends on PostgreSQL (the start of each
    statement's text), counted by wrapping psycopg's cursor `execute` and `executemany`."""
    import psycopg

    sent: list[str] = []

    def text(query: object, conn: object) -> str:
        as_string = getattr(query, "as_string", None)
        return " ".join((as_string(conn) if as_string else str(query)).split())[:110]

    originals = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def execute(self: psycopg.Cursor, query: object, *a: object, **k: object) -> object:
        sent.append(text(query, self.connection))
        return originals[0](self, query, *a, **k)  # type: ignore[arg-type]

    def executemany(self: psycopg.Cursor, query: object, *a: object, **k: object) -> object:
        sent.append("(many) " + text(query, self.connection))
        return originals[1](self, query, *a, **k)  # type: ignore[arg-type]

    psycopg.Cursor.execute, psycopg.Cursor.executemany = execute, executemany  # type: ignore[method-assign]
    print(f"\n{b.name}: the statements of each line of one demo tour (after 200 segments)")
    total = lines = 0
    try:
        for _ in range(8):
            if not mix._queue:
                mix._queue = __import__("bench_flat_support").tour_segments(mix.conv, mix.segments // 8)
            group = mix._queue.pop(0)
            for line in group:
                sent.clear()
                mix.chat.record(line)
                statements = list(sent)
                total, lines = total + len(statements), lines + 1
                print(f"  {line['type']}: {len(statements)}")
                for q in statements:
                    print(f"      {q}")
            mix.segments += 1
            mix.lines += len(group)
            mix.read()
    finally:
        psycopg.Cursor.execute, psycopg.Cursor.executemany = originals  # type: ignore[method-assign]
    print(f"  {total} statements for {lines} lines: {total / lines:.2f} per line")
    sys.stdout.flush()


def _statements_per_kind(b: Backend) -> None:
    """Prints the statements of the kinds of line the tour has not (a card left undecided, a
    failed segment, a retry, an edit, a replaced transcript), each after three 2-line segments
    of a conversation of a store of its own, counted as `_statements_per_line` counts them."""
    import psycopg
    from bench_flat_support import AT, DEMO

    chat = Chatrecord(build_store(b.env("kinds")))
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(curs: psycopg.Cursor, query: object, *a: object, **k: object) -> object:
        sent.append(str(query))
        return execute(curs, query, *a, **k)  # type: ignore[arg-type]

    def seg(s: str, run: str, trigger: str = "turn", outcome: str = "completed", card: bool = False) -> dict:
        line = {
            **DEMO[1],
            "segment": s,
            "run": run,
            "trigger": trigger,
            "outcome": outcome,
            "conversation": "k",
            "at": AT,
            "answer": "Ok.",
        }
        if not card:
            line.pop("pending", None)
        return line

    def user(n: int) -> dict:
        return {"type": "user_message", "at": AT, "message": n, "text": f"m{n}", "page": 42, "skill": None, "conversation": "k"}

    def count(line: dict, label: str) -> None:
        sent.clear()
        psycopg.Cursor.execute = counted  # type: ignore[method-assign]
        try:
            chat.record(line)
        finally:
            psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        print(f"  {label}: {len(sent)}")

    chat.record({"type": "conversation_started", "at": AT, "kind": "chat", "owner": 7, "conversation": "k"})
    for n in range(1, 4):
        chat.record(user(n))
        chat.record(seg(f"r{n}/1", f"r{n}"))
        chat.read_models.turn_notes("k")
    print(f"\n{b.name}: the statements of the other kinds of line (after three 2-line segments)")
    count(user(4), "user_message")
    count(seg("r4/1", "r4", outcome="awaiting_approval", card=True), "segment_returned with a card")
    chat.read_models.turn_notes("k")
    count(user(5), "user_message while the card waits (the card left undecided)")
    count(seg("r5/1", "r5", outcome="failed"), "segment_returned, failed")
    count({"type": "turn_retried", "message": 5, "at": AT, "conversation": "k"}, "turn_retried")
    count(seg("r5/2", "r5", trigger="retry"), "segment_returned of the retry")
    count({"type": "message_edited", "message": 5, "text": "anders", "at": AT, "conversation": "k"}, "message_edited")
    chat.record({"type": "conversation_started", "at": AT, "kind": "alt_text", "owner": 7, "conversation": "a"})
    chat.record({"type": "transcript_replaced", "messages": [{"role": "user", "text": "x"}], "at": AT, "conversation": "a"})
    count(
        {
            "type": "transcript_replaced",
            "messages": [{"role": "user", "text": "y"}, {"role": "assistant", "text": "z"}],
            "at": AT,
            "conversation": "a",
        },
        "transcript_replaced (alt_text)",
    )
    sys.stdout.flush()


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
    if len(sys.argv) > 1 and sys.argv[1] == "_measure":
        _measure(sys.argv[2], json.loads(sys.argv[3]))
        return
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
