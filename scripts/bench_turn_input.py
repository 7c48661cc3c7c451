"""Benchmark: building one turn input for conversations of 10 and 10,000 segments.

The read models fold each event once (incrementally) and keep the read models;
a new turn then builds its input from that state. This script times that build — the page
line, selecting and rendering the notes within their budget, placing them in the transcript —
for both sizes and prints the times and their ratio. The one-pass fold of the whole log
(`replay`-like) is printed too, for scale. Not a test: timings vary by machine.

`--store` measures what `replay`, `replay --at N` and the timeline page read instead: the
store's `ReadModels.turn_input` (the latest turn's whole model input, built from the read
models' rows) on conversations of 10, 1,000 and 10,000 segments of the demo tour's steps (a
user message and its segment each, the last segment after the turn started), on SQLite and
PostgreSQL, beside the fold of the log up to that turn it replaced (`build_turn_input`), and
prints milliseconds per message of the input built (target: at most 0.05).

Example:
    PYTHONPATH=. python scripts/bench_turn_input.py
    PYTHONPATH=. python scripts/bench_turn_input.py --store [--sizes 10,1000,10000] [--backends pg,sqlite]
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.events import (
    CardDecided,
    ConversationEvent,
    ConversationStarted,
    SegmentReturned,
    UserMessagePosted,
    conversation_uuid,
)
from domain.values import RecordRef, StepFact, WaitingCall
from projections import turn as turns

T0 = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)
PAGE = RecordRef(table="pages", uid=42)


def _round(r: int) -> list[StepFact]:
    return [
        StepFact(kind="context", round=r, duration_ms=0.0),
        StepFact(kind="request", round=r, duration_ms=0.0),
        StepFact(kind="llm", round=r, duration_ms=2100.0),
    ]


def conversation(segments: int) -> list[ConversationEvent]:
    """Returns the events of a conversation of `segments` segments: each user message starts a
    turn that proposes a card (guided every other turn), the card is approved, and its
    continuation writes the record; every fourth turn reads only (an empty step)."""
    oid = conversation_uuid(f"bench-{segments}")
    events: list[ConversationEvent] = []

    def add(cls, **fields):
        version = len(events) + 1
        events.append(cls(originator_id=oid, originator_version=version, timestamp=T0 + timedelta(seconds=version), **fields))

    add(ConversationStarted, conversation=f"bench-{segments}", kind="chat", owner=7)
    message = outcomes = made = 0
    while made < segments:
        message += 1
        guided = message % 2 == 0
        skill = "3:seo-optimieren" if guided else None
        add(UserMessagePosted, message=message, text=f"Frage {message}", page=42 if message % 3 else 0, skill=skill)
        if message % 4 == 0 or made + 1 == segments:
            add(
                SegmentReturned,
                segment=f"s{made}",
                run=f"r{message}",
                trigger="turn",
                outcome="completed",
                answer=f"Antwort {message}",
                steps=tuple(_round(1)),
                card_outcomes_before=outcomes,
                message=message,
                skill=skill,
            )
            made += 1
            continue
        card = WaitingCall(tool_name="update_page_metadata", target=PAGE, fields=("title",))
        steps = (*_round(1), StepFact(kind="tool", round=1, duration_ms=30.0, tool_name="get_page", tool_is_error=False))
        add(
            SegmentReturned,
            segment=f"s{made}",
            run=f"r{message}",
            trigger="turn",
            outcome="awaiting_approval",
            answer=f"Vorschlag {message}",
            steps=steps,
            waiting=(card,),
            card_outcomes_before=outcomes,
            message=message,
            skill=skill,
        )
        add(CardDecided, segment=f"s{made}", approved=True, answer="Übernehmen")
        outcomes += guided
        opening = (
            StepFact(kind="tool", round=1, duration_ms=40.0, tool_name="update_page_metadata", tool_is_error=False),
            StepFact(
                kind="tool_write",
                round=1,
                duration_ms=0.0,
                tool_name="update_page_metadata",
                write_target=PAGE,
                write_completeness="complete",
            ),
        )
        add(
            SegmentReturned,
            segment=f"s{made + 1}",
            run=f"r{message}",
            trigger="approval",
            outcome="completed",
            answer="Gespeichert.",
            steps=(*opening, *_round(2)),
            card_outcomes_before=outcomes,
            message=message,
            skill=skill,
        )
        made += 2
    message += 1
    add(UserMessagePosted, message=message, text="Was ist hier passiert?", page=0)
    return events


def fold(events: list[ConversationEvent]) -> turns.TurnState:
    state = turns.initial()
    for event in events:
        state = turns.apply(state, event, "2026-11-02")
    return state


def time_turn_input(state: turns.TurnState, message: int, at: datetime, repeat: int = 200) -> float:
    """Returns the median seconds of building the turn input from `state` (after a warm-up)."""
    turns.turn_input(state, message, at, "2026-11-02")
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        turns.turn_input(state, message, at, "2026-11-02")
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


WARM_UP = 20
"""Turn reads made before the timed ones, untimed: a chat's server reads the same conversation's
turn after every segment, on connections that ran the statement before. The first reads of a
conversation in a process are not what a turn costs there: the statement is prepared on its
connection at the first, and PostgreSQL plans a prepared statement afresh at each of its first
five executions (custom plans; 0.26-0.43 ms of planning for this one) before it keeps a generic
plan, and the rows' bodies are decoded into the process's caches once. Measured at 10 segments
on PostgreSQL (6 December 2026): reads 1-6 took 1.5-3.1 ms, reads 7-26 a median of 0.93 ms,
reads 31-60 0.77 ms; after 5 warm-up reads the median of 21 was 0.93-1.2 ms."""


READS = 21
"""Turn reads timed per size (their median): at 10 segments one takes under a millisecond, and
the median of 5 moved by a third between runs of the same code (0.7 and 1.0 ms, 6 December 2026)."""


def store_rows(b, sizes: list[int], calls: int = 5, reads: int = READS) -> list[tuple[str, int, int, float, float]]:
    """Times `ReadModels.turn_input` on backend `b` (`bench_flat_support.Backend`), the median of
    `reads` calls, against the fold of the log it replaced, the median of `calls`; returns
    (backend, segments, messages, ms, fold ms) per size and
    prints a table row for each."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_flat_support import bulk_fill, segment_lines

    from adapters.api import Chatrecord
    from adapters.bootstrap import build_store

    chat = Chatrecord(build_store(b.env("turn_input")))
    store, models = chat.store, chat.read_models
    found = []
    for size in sizes:
        conv = f"turn-input-{size}"
        bulk_fill(store, conv, size - 1)  # saved as they are: the read models catch up at the next read
        models.turn_input(conv)
        for line in segment_lines(conv, size):  # the last turn's user message, then its segment
            chat.record(line)
        built = models.turn_input(conv)
        times, folds = [], []
        # the reads one after the other, as the chat reads a turn after its small append, then the
        # folds: a read timed right after a fold of the whole log (20,000 events at 10,000 segments)
        # paid for the fold's garbage and cold caches, 1.4-2.6x its own cost at 10 segments
        for _ in range(WARM_UP):  # not timed: a serving process has read turns before (see WARM_UP)
            models.turn_input(conv)
        for _ in range(reads):
            t0 = time.perf_counter()
            models.turn_input(conv)
            times.append(time.perf_counter() - t0)
        for _ in range(calls):
            t0 = time.perf_counter()
            folded = turns.build_turn_input(store.events(conv), models.active_rules())
            folds.append(time.perf_counter() - t0)
        assert folded.to_json() == built.to_json()
        ms, fold = 1000 * statistics.median(times), 1000 * statistics.median(folds)
        count = len(built.messages) + 1  # and the system message
        found.append((b.name, size, count, ms, fold))
        print(f"| {b.name} | {size:,} | {count:,} | {ms:.1f} | {ms / count:.4f} | {fold:.0f} | {fold / ms:.1f} |", flush=True)
    return found


TABLE_HEAD = (
    "| backend | segments | messages | turn_input ms | ms per message | fold of the log ms | "
    "ratio fold / rows |\n|---|---:|---:|---:|---:|---:|---:|"
)


def store_main(sizes: list[int], backends: list[str], calls: int = 5) -> None:
    """Times `ReadModels.turn_input` against the fold of the log it replaced, per backend and size."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_flat_support import backend, loadavg, machine

    print(f"machine: {machine()}")
    print(f"load average before: {loadavg()}")
    print(TABLE_HEAD)
    for name in backends:
        with backend(name) as b:
            store_rows(b, sizes, calls)
    print(f"load average after: {loadavg()}")


def main() -> None:
    if "--store" in sys.argv:
        args = sys.argv[1:]

        def option(name: str, default: str) -> str:
            return args[args.index(name) + 1] if name in args else default

        store_main([int(n) for n in option("--sizes", "10,1000,10000").split(",")], option("--backends", "pg,sqlite").split(","))
        return
    results = {}
    for size in (10, 10_000):
        events = conversation(size)
        start = time.perf_counter()
        state = fold(events)
        folded = time.perf_counter() - start
        last = events[-1]
        built = time_turn_input(state, last.message, last.timestamp)
        made = turns.turn_input(state, last.message, last.timestamp)
        results[size] = built
        print(
            f"{size:>6} segments: {len(events):>6} events, fold {folded * 1000:9.1f} ms, "
            f"turn input {built * 1e6:8.1f} µs ({len(made.notes)} notes, "
            f"{sum(len(n) for n in made.notes)} chars, {len(made.messages)} messages, "
            f"{len(made.record)} record entries)"
        )
    print(f"ratio turn input 10,000 / 10 segments: {results[10_000] / results[10]:.2f}")


if __name__ == "__main__":
    main()
