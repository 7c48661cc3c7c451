"""Benchmark: the conversation page's tools (issue 39 item 4) against opening the page itself,
on a conversation of 10,000 segments and one of 100, on SQLite and PostgreSQL, in one run.

Each is a `GET` through the FastAPI app in process: the page (`/ui/conversations/ID`, the
newest 20 turns, the overview inline), the jump to user message 1 (which reads the log to its
end: the last posting of a number wins) and to the newest segment (which stops after it), the
events as stored (the first page and the newest), the rule sets compared (the first 20 turns:
the whole log folded under two rule sets) and two turns compared (the first and the last: one
fold). Each conversation is filled in bulk as `scripts/bench_timeline.py` fills it.

Prints per backend and size the median of each in ms and its ratio to the page. Example:

    python3 scripts/bench_page_tools.py --small 100 --large 10000 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import Postgres, SQLite, bulk_fill

from adapters.api import Chatrecord
from adapters.bootstrap import build_store
from adapters.http.app import HttpSettings, create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


def timed(client: TestClient, path: str, status: int = 200) -> float:
    t0 = time.perf_counter()
    response = client.get(path)
    elapsed = time.perf_counter() - t0
    assert response.status_code == status, (path, response.status_code, response.text[:300])
    return elapsed


def run(backend_cls: type, sizes: dict[str, int], runs: int) -> dict[str, dict[str, float]]:
    backend = backend_cls()
    try:
        env = {**backend.env("tools"), "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT": "120"}
        store = build_store(env)
        for name, segments in sizes.items():
            bulk_fill(store, f"conv-{name}", segments)
        chatrecord = Chatrecord(store)
        chatrecord.read_models.catch_up()
        for name in sizes:
            chatrecord.turn_input(f"conv-{name}")
        app = create_app(lambda: chatrecord, HttpSettings(token=None))
        figures: dict[str, dict[str, float]] = {}
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
            for name, segments in sizes.items():
                base = f"/ui/conversations/conv-{name}"
                asks = {
                    "page": (base, 200),
                    "jump to message 1": (f"{base}?jump=1", 303),
                    "jump to the newest segment": (f"{base}?jump=conv-{name}-run{segments}/1", 303),
                    "events as stored, first page": (f"{base}/events?from=1", 200),
                    "events as stored, newest page": (f"{base}/events?from={2 * segments + 1}", 200),
                    "rule sets compared, first 20 turns": (f"{base}/rules?other=transcript-only", 200),
                    "turns 1 and last compared": (f"{base}/compare?first=1&second={segments}", 200),
                }
                for path, status in asks.values():
                    timed(client, path, status)  # warm: the overview folded, templates compiled
                figures[name] = {
                    what: statistics.median(timed(client, path, status) for _ in range(runs)) * 1000
                    for what, (path, status) in asks.items()
                }
        chatrecord.close()
        return figures
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = {"small": args.small, "large": args.large}
    for backend_cls in (SQLite, Postgres):
        figures = run(backend_cls, sizes, args.runs)
        print(f"\n{backend_cls.name}: median ms of {args.runs} runs (ratio to the page)")
        print(f"{'':38}" + "".join(f"{f'{n} ({s:,} segments)':>30}" for n, s in sizes.items()))
        for what in figures["small"]:
            cells = "".join(f"{figures[n][what]:>20,.1f} ({figures[n][what] / figures[n]['page']:>5.1f}x)" for n in sizes)
            print(f"{what:38}{cells}")


if __name__ == "__main__":
    main()
