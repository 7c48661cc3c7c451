"""Sections of `scripts/bench_flat.py` that write: `append` (a segment's lines and the read after,
against the state row and the library's bare save; LangGraph's checkpointer beside them where it
is installed), `mix` (the demo tour's real mix of lines), `turn_input` and `clients` (4 processes
on 4 conversations against 1)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import (
    Backend,
    Counted,
    Figures,
    MixWriter,
    Writer,
    bare_saver,
    say,
    target,
)

from adapters.api import Chatrecord
from adapters.bootstrap import build_store


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
    row_append = state_row_segment(conn, "flat-row-1")
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


def state_row_segment(conn: object, cid: str) -> Callable[[int], object]:
    """Returns one segment of the state row (`../shared/anchors/bench_state_row.py`) on row `cid`
    through `conn` (the row already reset): the append of the demo tour's next segment entry
    (`common.segment`), then the turn read. The unit the real mix's segment and its
    `turn_notes` are measured against (here and in `scripts/bench_http.py`)."""
    import bench_state_row as A
    import common as C

    numbers = iter(range(10**9))
    return lambda i: (
        A.append_segment(conn, cid, C.segment(next(numbers), cid)[0]),
        A.read_turn(conn, cid),
    )


def langgraph_segment(conn_string: str) -> tuple[Callable[[int], object], Callable[[], None]] | None:
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
    row = state_row_segment(conn, "flat-mix-row")
    lg = langgraph_segment(C.DSN)
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

    print(f"\n### {b.name}: turn_input (median of {T.READS} reads; the fold: median of 5)\n")
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
