"""Benchmark: opening the timeline page of a conversation of 10,000 segments against one of 100
(issue 21: no slower by more than 2x), on SQLite and PostgreSQL, in one run.

The page is `GET /ui/conversations/ID` through the FastAPI app (in process, routing, the
service layer and the templates included): the newest 20 turns, read from the log's tail, and
the latest turn's model input from the read models. The browser then asks for the overview
picture (`…/overview.svg`) and the chain's verdict (`…/chain`): "open" is the three requests
one after the other. The first of each in the process folds, or verifies, the whole log
("first"); a later one draws the kept overview and verifies from the kept head ("kept"). A
full recomputation of the chain (`?full=1`) and a turn's model input asked for (`?turn=N`,
which replays the log up to that turn) are timed too. Each conversation is filled in bulk (as
`scripts/bench_flat.py` does: one user message and one segment of the demo's steps per turn),
and its read models caught up by one turn read before the timing.

Prints a table per backend and the ratios. Example:

    python3 scripts/bench_timeline.py --small 100 --large 10000 --runs 15
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import Postgres, SQLite, bulk_fill
from psycopg.sql import SQL, Composed

from adapters.api import Chatrecord
from adapters.bootstrap import build_store
from adapters.http.app import HttpSettings, create_app
from adapters.store.application import ConversationStore
from adapters.store.chain_checks import VERIFIED_TABLE

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


def timed_get(client: TestClient, path: str) -> float:
    t0 = time.perf_counter()
    response = client.get(path)
    elapsed = time.perf_counter() - t0
    assert response.status_code == 200, (path, response.status_code, response.text[:300])
    return elapsed


def forget_positions(store: ConversationStore) -> None:
    """Deletes every stored verified position of the chain (`chatrecord_chain_verified`): as a store
    no `chatrecord verify` and no full chain verdict has run on."""
    recorder = store.recorder
    table = getattr(recorder, "verified_table", VERIFIED_TABLE)  # PostgreSQL: schema-qualified
    with recorder.datastore.transaction(commit=True) as curs:  # type: ignore[attr-defined]
        curs.execute(SQL("DELETE FROM {}").format(table) if isinstance(table, SQL | Composed) else f"DELETE FROM {table}")


def first_open(env: dict[str, str], sizes: dict[str, int], forget: bool) -> dict[str, float]:
    """A server started anew on the store (a new store object, a new Chatrecord and app): warmed up
    on a small third conversation, then for each conversation the first page, the first overview
    and the first chain's verdict, as a browser opening it for the first time after the start.
    With `forget`, the chain's stored positions are deleted first (the chain recomputes all)."""
    store = build_store(env)
    if forget:
        forget_positions(store)
    chatrecord = Chatrecord(store)
    app = create_app(lambda: chatrecord, HttpSettings(token=None))
    figures: dict[str, float] = {}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for path in ("", "/overview.svg", "/chain"):
            timed_get(client, "/ui/conversations/conv-warm" + path)
        for name in sizes:
            page = f"/ui/conversations/conv-{name}"
            parts = [timed_get(client, page), timed_get(client, page + "/overview.svg"), timed_get(client, page + "/chain")]
            figures[f"{name}:first page"], figures[f"{name}:first overview"], figures[f"{name}:first chain"] = parts
            figures[f"{name}:open (first)"] = sum(parts)
    chatrecord.close()
    return figures


def run(backend_cls: type, small: int, large: int, runs: int) -> dict[str, float]:
    backend = backend_cls()
    try:
        # a turn read of the 10,000-segment conversation's whole transcript (the warm-up below) can sit
        # longer than the library's 5 s between its statements on a busy machine: the bench allows 120 s
        env = {**backend.env("timeline"), "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": "120"}
        store = build_store(env)
        sizes = {"small": small, "large": large}
        for name, segments in {"warm": 10, **sizes}.items():
            bulk_fill(store, f"conv-{name}", segments)
        chatrecord = Chatrecord(store)
        chatrecord.read_models.catch_up()  # the rows written in write transactions (a busy server ends a long read's)
        for name in ("warm", *sizes):
            chatrecord.turn_input(f"conv-{name}")  # the read models catch up once, as after a live append
        app = create_app(lambda: chatrecord, HttpSettings(token=None))
        figures: dict[str, float] = {}
        with TestClient(app, base_url="http://127.0.0.1") as client:
            for name, segments in {"warm": 10, **sizes}.items():
                page = f"/ui/conversations/conv-{name}"
                timed_get(client, page)  # warm: templates compiled, connections open
                # the first requests ever: the overview read model folded from the whole log and written,
                # every hash recomputed (and the position stored)
                first = {"overview": timed_get(client, page + "/overview.svg"), "chain": timed_get(client, page + "/chain")}
                if name == "warm":
                    continue
                samples: dict[str, list[float]] = {
                    "page": [],
                    "open": [],
                    "overview (kept)": [],
                    "chain (kept)": [],
                    "chain (full)": [],
                    "turn 1 input": [],
                }
                for _ in range(runs):  # a later open: the page and its two requests, as the browser makes them
                    parts = [
                        timed_get(client, page),
                        timed_get(client, page + "/overview.svg"),
                        timed_get(client, page + "/chain"),
                    ]
                    samples["page"].append(parts[0])
                    samples["overview (kept)"].append(parts[1])
                    samples["chain (kept)"].append(parts[2])
                    samples["open"].append(sum(parts))
                for _ in range(max(3, runs // 5)):
                    samples["chain (full)"].append(timed_get(client, page + "/chain?full=1"))
                    samples["turn 1 input"].append(timed_get(client, page + "?turn=1"))
                figures[f"{name}:overview (first fold)"] = first["overview"]
                figures[f"{name}:chain (first, every hash)"] = first["chain"]
                for what, xs in samples.items():
                    figures[f"{name}:{what}"] = statistics.median(xs)
                figures[f"{name}:segments"] = segments
            assert all(v.ok for v in chatrecord.verify(record="chatrecord verify"))  # the positions, as `chatrecord verify`
        chatrecord.close()
        # the first open after a start, several starts each: with the positions `verify` stored, and with none
        for label, forget in (("verified", False), ("no position", True)):
            starts = [first_open(env, sizes, forget) for _ in range(max(3, runs // 5))]
            for key in starts[0]:
                name, what = key.split(":")
                figures[f"{name}:{what}, {label}"] = statistics.median(s[key] for s in starts)
        return figures
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    print(
        f"# bench_timeline: {args.small} vs {args.large} segments, {args.runs} page opens each; "
        f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}, "
        f"Python {sys.version.split()[0]}"
    )
    backends = {"sqlite": [SQLite], "postgres": [Postgres], "both": [SQLite, Postgres]}[args.backend]
    for backend_cls in backends:
        f = run(backend_cls, args.small, args.large, args.runs)
        print(f"\n### {backend_cls.name}\n")
        print(f"| request (median) | {args.small} segments | {args.large:,} segments | ratio |")
        print("|---|---:|---:|---:|")
        for what in (
            "open (first), verified",
            "first page, verified",
            "first overview, verified",
            "first chain, verified",
            "open (first), no position",
            "first chain, no position",
            "open",
            "page",
            "overview (kept)",
            "chain (kept)",
            "overview (first fold)",
            "chain (first, every hash)",
            "chain (full)",
            "turn 1 input",
        ):
            a, b = f[f"small:{what}"], f[f"large:{what}"]
            print(f"| {what} | {a * 1000:.1f} ms | {b * 1000:.1f} ms | {b / a:.2f}x |")
        ratio = f["large:open"] / f["small:open"]
        print(
            f"\nopen ratio, the page and its two requests ({args.large:,} / {args.small} segments): {ratio:.2f}x "
            f"({'met' if ratio <= 2 else 'NOT met'}: at most 2x); load average now "
            f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        for label in ("verified", "no position"):
            first = f[f"large:open (first), {label}"] / f[f"small:open (first), {label}"]
            print(
                f"first open ratio after a start ({label}: the first page, overview and chain): {first:.2f}x "
                f"({'met' if first <= 2 else 'NOT met'}: at most 2x)",
                flush=True,
            )
            took = f[f"large:open (first), {label}"]
            print(
                f"first open after a start of {args.large:,} segments ({label}): {took * 1000:.0f} ms "
                f"({'met' if took <= 1 else 'NOT met'}: issue 39 asks at most 1 s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
