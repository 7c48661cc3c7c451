"""Benchmark: what the keyed chain (HMAC-SHA256, `adapters.store.chain_key`) costs per append.

An A/B in one run: two stores of each backend, one opened without a master key (unkeyed chain:
SHA-256 links) and one with one (keyed chain: HMAC-SHA256 links), each holding one conversation of
SIZE segments first; then ROUNDS rounds, alternating which store goes first, each appending BATCH
more turns (a user message and its segment: two lines) line by line through the service layer.
Prints the median ms per line of each and their ratio, per backend and size, and the µs of one link
of each kind (the hash alone, over the demo's events). Both stores encrypt texts (the keyed one also
wraps its one data key); the difference between them is the link. Not a test: timings vary.

Example:
    PYTHONPATH=. python scripts/bench_chain_key.py --sizes 10,10000 [--postgres URL]
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.api import Chatrecord, demo_lines
from adapters.backends.settings import postgres_env
from adapters.bootstrap import open_store
from adapters.store.chain import GENESIS, link
from adapters.store.chain_key import derive_chain_key
from scripts.bench_chain import lines

MASTER = base64.b64encode(bytes(range(32))).decode()


def turn(n: int) -> list[bytes]:
    """Returns turn `n` of the bench conversation: a user message and its segment (after `lines`')."""
    made = [orjson.loads(line) for line in lines("bench", 1)[1:]]
    made[0]["message"], made[1]["segment"], made[1]["run"] = n, f"s{n}", f"r{n}"
    return [orjson.dumps(line) for line in made]


def stores(backend: str, url: str | None, folder: str) -> dict[str, Any]:
    """Returns the envs of the two stores of `backend`: unkeyed and keyed."""
    if backend == "sqlite":
        return {k: {"CHATRECORD_DB": os.path.join(folder, f"{k}.sqlite")} for k in ("unkeyed", "keyed")}
    assert url is not None
    import psycopg

    made = {}
    for k in ("unkeyed", "keyed"):
        schema = f"bench_{k}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        made[k] = {**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "1", "_schema": schema}
    return made


def run(backend: str, size: int, batch: int, rounds: int, url: str | None) -> tuple[float, float]:
    """Returns the median ms per appended line of the unkeyed and the keyed store."""
    with tempfile.TemporaryDirectory() as folder:
        envs = stores(backend, url, folder)
        opened = {}
        for kind, env in envs.items():
            extra = {"CHATRECORD_MASTER_KEY": MASTER if kind == "keyed" else ""}
            base = {k: v for k, v in env.items() if not k.startswith("_")}
            store = open_store(base, **extra) if backend == "sqlite" else open_store(None, **base, **extra)
            chat = Chatrecord(store)
            chat.ingest(lines("bench", size), "bench")
            opened[kind] = chat
        timings: dict[str, list[float]] = {"unkeyed": [], "keyed": []}
        n = size
        for r in range(rounds):
            order = ("unkeyed", "keyed") if r % 2 == 0 else ("keyed", "unkeyed")
            block = [line for k in range(n + 1, n + batch + 1) for line in turn(k)]
            n += batch
            for kind in order:
                chat = opened[kind]
                start = time.perf_counter()
                for line in block:
                    chat.record(orjson.loads(line))
                timings[kind].append((time.perf_counter() - start) / len(block) * 1e3)
        for chat in opened.values():
            chat.close()
        if backend == "postgres":
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:  # type: ignore[arg-type]
                for env in envs.values():
                    conn.execute(f'DROP SCHEMA "{env["_schema"]}" CASCADE')
    return statistics.median(timings["unkeyed"]), statistics.median(timings["keyed"])


def link_costs() -> tuple[float, float]:
    """Returns the µs of one link, SHA-256 and HMAC-SHA256, over the demo's stored events."""
    store = open_store(memory=True)
    Chatrecord(store).ingest(demo_lines(), "demo")
    stored = [store.mapper.to_stored_event(e) for e in store.events("conv-demo-seo")]
    key = derive_chain_key(bytes(range(32)))
    costs = []
    for chain_key in (None, key):
        passes = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(50):
                digest = GENESIS
                for s in stored:
                    digest = link(digest, s.originator_id, s.originator_version, s.topic, s.state, chain_key)
            passes.append((time.perf_counter() - start) / (50 * len(stored)) * 1e6)
        costs.append(statistics.median(passes))
    return costs[0], costs[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,10000")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL: the same A/B there too")
    args = parser.parse_args()
    sha, mac = link_costs()
    print(f"one link: SHA-256 {sha:.2f} µs, HMAC-SHA256 {mac:.2f} µs")
    for backend in ("sqlite", *(("postgres",) if args.postgres else ())):
        for size in (int(s) for s in args.sizes.split(",")):
            plain, keyed = run(backend, size, args.batch, args.rounds, args.postgres)
            print(f"{backend} at {size} segments: unkeyed {plain:.3f} ms/line, keyed {keyed:.3f} ms/line, x{keyed / plain:.3f}")


if __name__ == "__main__":
    main()
