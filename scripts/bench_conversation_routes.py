"""Benchmark: routing a conversation's request on the raw path (`adapters.http.conversation_paths`)
against routing it on the decoded path, as before, in one run.

Each request is a `GET` through the FastAPI app in process, on a memory store holding one short
conversation, to cheap operations, so that routing is a large part of it: `GET /v1/conversations/
ID/reproductions` (an empty list), `…/activity`, and the UI's `…/chain`. The two ways alternate in
rounds (the raw path's `ConversationRoute.matches` and APIRoute's own, each first in every other round); the script prints the
median of each in microseconds and their ratio, for the whole request and for the time spent in the
routes' `matches` alone (summed over the routes a request is matched against). Example:

    python3 scripts/bench_conversation_routes.py --rounds 7 --requests 300
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.routing import APIRoute

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.http.app import HttpSettings, create_app
from adapters.http.conversation_paths import ConversationRoute

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

DEMO = Path(__file__).resolve().parent.parent / "tests" / "data" / "demo_seo_tour.jsonl"
ID = "conv-7/chain"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=300, help="requests of each path in a round")
    args = parser.parse_args()
    chatrecord = Chatrecord(open_store(memory=True))
    lines = [json.loads(line) for line in DEMO.read_bytes().splitlines()][:5]
    chatrecord.ingest([json.dumps({**line, "conversation": ID}).encode() for line in lines], "bench")
    base = quote(ID, safe="")
    paths = [f"/v1/conversations/{base}/reproductions", f"/v1/conversations/{base}/activity", f"/ui/conversations/{base}/chain"]
    raw_matches = ConversationRoute.matches
    spent = [0.0]

    def timed(way: Any) -> Any:
        def matches(self: Any, scope: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return way(self, scope)
            finally:
                spent[0] += time.perf_counter() - t0

        return matches

    ways = {"raw path": timed(raw_matches), "decoded path": timed(APIRoute.matches)}
    app = create_app(lambda: chatrecord, HttpSettings(token=None))
    whole: dict[str, list[float]] = {way: [] for way in ways}
    matching: dict[str, list[float]] = {way: [] for way in ways}
    count = args.requests * len(paths)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for round_ in range(args.rounds):
            order = list(ways.items()) if round_ % 2 == 0 else list(reversed(ways.items()))  # neither always first
            for way, matches in order:
                ConversationRoute.matches = matches  # type: ignore[method-assign]
                spent[0] = 0.0
                t0 = time.perf_counter()
                for _ in range(args.requests):
                    for path in paths:
                        response = client.get(path)
                        assert response.status_code == 200, (path, response.status_code)
                whole[way].append((time.perf_counter() - t0) / count * 1e6)
                matching[way].append(spent[0] / count * 1e6)
    ConversationRoute.matches = raw_matches  # type: ignore[method-assign]
    for title, figures in (("a request", whole), ("matching it", matching)):
        medians = {way: statistics.median(values) for way, values in figures.items()}
        for way, median in medians.items():
            print(f"{title:>12}, {way:>12}: {median:9.1f} µs (median of {args.rounds} rounds)")
        print(f"{title:>12}: raw path / decoded path = {medians['raw path'] / medians['decoded path']:.3f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
