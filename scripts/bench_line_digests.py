"""Benchmark: what keying the line digests (`adapters.store.line_digests`) costs per line.

An A/B in one run: two stores of each backend, one as this version writes (each line's digest keyed
with its conversation's data key, looked up in both forms) and one with the keying switched off (the
plain digest, as before), each holding one conversation of SIZE turns first; then ROUNDS rounds,
alternating which store goes first, each recording BATCH more turns (a user message and its segment:
two lines) line by line, then resending the same lines (each a repeat). Prints the median ms per
line of each and their ratio, per backend and size, and the µs of one keyed digest. Not a test:
timings vary.

Example:
    PYTHONPATH=. python scripts/bench_line_digests.py --sizes 10,2000 [--postgres URL]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.store.line_digests import digest_keyer
from scripts.bench_chain import lines
from scripts.bench_chain_key import stores, turn


def run(backend: str, size: int, batch: int, rounds: int, url: str | None) -> dict[str, tuple[float, float]]:
    """Returns per store ("plain", "keyed") the median ms per new line and per resent line."""
    with tempfile.TemporaryDirectory() as folder:
        envs = {("plain" if k == "unkeyed" else k): env for k, env in stores(backend, url, folder).items()}
        opened: dict[str, Chatrecord] = {}
        for kind, env in envs.items():
            base = {k: v for k, v in env.items() if not k.startswith("_")}
            store = open_store(base) if backend == "sqlite" else open_store(None, **base)
            if kind == "plain":
                store._key_digests = lambda command, cid: None  # type: ignore[method-assign]  # as before keyed digests
            chat = Chatrecord(store)
            chat.ingest(lines("bench", size), "bench")
            opened[kind] = chat
        timings: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in opened}
        n = size
        for r in range(rounds):
            order = ("plain", "keyed") if r % 2 == 0 else ("keyed", "plain")
            block = [orjson.loads(line) for k in range(n + 1, n + batch + 1) for line in turn(k)]
            n += batch
            for kind in order:
                chat = opened[kind]
                for timed in timings[kind]:
                    start = time.perf_counter()
                    for line in block:
                        chat.record(line)
                    timed.append((time.perf_counter() - start) / len(block) * 1e3)
        for chat in opened.values():
            chat.close()
        if backend == "postgres":
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:  # type: ignore[arg-type]
                for env in envs.values():
                    conn.execute(f'DROP SCHEMA "{env["_schema"]}" CASCADE')
    return {k: (statistics.median(new), statistics.median(again)) for k, (new, again) in timings.items()}


def keyed_cost() -> float:
    """Returns the µs of keying one digest."""
    keyed = digest_keyer(bytes(range(32)))
    assert keyed is not None
    digest = "0123456789abcdef" * 2
    passes = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(20_000):
            keyed(digest)
        passes.append((time.perf_counter() - start) / 20_000 * 1e6)
    return statistics.median(passes)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10,2000")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL: the same A/B there too")
    args = parser.parse_args()
    print(f"one keyed digest: {keyed_cost():.2f} µs")
    for backend in ("sqlite", *(("postgres",) if args.postgres else ())):
        for size in (int(s) for s in args.sizes.split(",")):
            found: dict[str, Any] = run(backend, size, args.batch, args.rounds, args.postgres)
            (plain_new, plain_again), (keyed_new, keyed_again) = found["plain"], found["keyed"]
            print(
                f"{backend} at {size} turns: new lines plain {plain_new:.3f} ms, keyed {keyed_new:.3f} ms, "
                f"x{keyed_new / plain_new:.3f}; resent lines plain {plain_again:.3f} ms, keyed {keyed_again:.3f} ms, "
                f"x{keyed_again / plain_again:.3f}"
            )


if __name__ == "__main__":
    main()
