"""Flat without vacuum (issue 37 item 4): the append rate of one conversation at 100 segments
against the rate at 10,000, on PostgreSQL with autovacuum off on the store's tables, and how many
of the head rows' and list rows' updates were HOT (pg_stat_user_tables.n_tup_hot_upd).

Each segment is two lines (a user message, then its segment), recorded through the Python API
one line at a time, each stamped a second after the one before (so the chat's time of last
activity, which the list table keeps and indexes, moves with every line as it does in the
chat). The conversation is filled through the same API to the far point: every head update of
the way leaves what it leaves, with nothing to vacuum it.

Usage: python3 scripts/bench_hot.py [--segments 10000] [--window 100] [--rounds 3]

Prints the machine, the load, the rates (segments/s, median of the rounds' windows) and the
ratio far/near (target >= 0.9), and the tables' updates, HOT updates and dead rows. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from bench_flat_support import PG_URL, loadavg, machine, say, segment_lines, started

from adapters.api import Chatrecord
from adapters.backends.settings import postgres_env
from adapters.bootstrap import build_store

START = datetime(2026, 11, 1, 9, 0, 0)


def stamped(line: dict[str, Any], second: int) -> dict[str, Any]:
    """Returns `line` stamped `second` seconds after START."""
    return {**line, "at": (START + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ")}


class Filler:
    """Records segments of one conversation, line by line, each a second after the last."""

    def __init__(self, chat: Chatrecord, conv: str) -> None:
        self.chat, self.conv, self.message, self.second = chat, conv, 0, 0
        chat.record(stamped(started(conv), 0))

    def segments(self, count: int) -> float:
        """Records `count` segments; returns the seconds it took."""
        began = time.perf_counter()
        for _ in range(count):
            self.message += 1
            for line in segment_lines(self.conv, self.message):
                self.second += 1
                self.chat.record(stamped(line, self.second))
        return time.perf_counter() - began


def no_autovacuum(admin: psycopg.Connection[Any], schema: str) -> list[str]:
    """Turns autovacuum off on every table of `schema`; returns their names."""
    tables = [r[0] for r in admin.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()]
    for table in tables:
        admin.execute(f'ALTER TABLE "{schema}"."{table}" SET (autovacuum_enabled = false)')
    return tables


def updates(admin: psycopg.Connection[Any], schema: str) -> dict[str, tuple[int, int, int]]:
    """Returns (updates, HOT updates, dead rows) of the views' heads and list tables."""
    time.sleep(1.2)  # the server flushes a backend's table counts about once a second
    rows = admin.execute(
        "SELECT relname, n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables "
        "WHERE schemaname = %s AND (relname LIKE 'views_g%%_heads' OR relname LIKE 'views_g%%_listing')",
        (schema,),
    ).fetchall()
    return {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=10_000, help="the far point (segments)")
    parser.add_argument("--near", type=int, default=100, help="the near point (segments)")
    parser.add_argument("--window", type=int, default=100, help="segments timed per round")
    parser.add_argument("--rounds", type=int, default=3, help="windows timed at each point")
    args = parser.parse_args()

    say(f"machine: {machine()}")
    say(f"load before: {loadavg()}")
    schema = f"bench_hot_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(PG_URL, autocommit=True)
    admin.execute(f"CREATE SCHEMA {schema}")
    try:
        chat = Chatrecord(build_store(postgres_env(f"{PG_URL}?schema={schema}")))
        filler = Filler(chat, "hot")
        filler.segments(1)
        say(f"autovacuum off on {len(no_autovacuum(admin, schema))} tables of schema {schema}")
        filler.segments(args.near - 1 - args.rounds * args.window // 2)
        near = [args.window / filler.segments(args.window) for _ in range(args.rounds)]
        done = filler.message
        began = time.perf_counter()
        filler.segments(args.segments - done - args.rounds * args.window // 2)
        say(f"filled {filler.message} segments in {time.perf_counter() - began:.0f} s; load: {loadavg()}")
        far = [args.window / filler.segments(args.window) for _ in range(args.rounds)]
        stats = updates(admin, schema)
        chat.close()
    finally:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()
    at_near, at_far = statistics.median(near), statistics.median(far)
    say(f"near {args.near} segments: {at_near:.1f} segments/s (rounds: {', '.join(f'{r:.1f}' for r in near)})")
    say(f"far {args.segments} segments: {at_far:.1f} segments/s (rounds: {', '.join(f'{r:.1f}' for r in far)})")
    ratio = at_far / at_near
    say(f"far/near: {ratio:.2f}x (target >= 0.9: {'met' if ratio >= 0.9 else 'NOT met'})")
    for table, (upd, hot, dead) in sorted(stats.items()):
        say(f"{table}: {upd} updates, {hot} HOT ({100 * hot / max(upd, 1):.1f} %), {dead} dead rows")
    say(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
