"""The `profile` section of `scripts/bench_flat.py`: cProfile of recording a segment, of
`turn_notes` and of a rebuild, and the statements each line sends on PostgreSQL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import (
    Backend,
    MixWriter,
    Writer,
    _profile,
    say,
)

from adapters.api import Chatrecord
from adapters.bootstrap import build_store


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
