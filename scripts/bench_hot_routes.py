"""Benchmark: the HTTP app's own CPU per line, with the hot path and without it (issue 37 item 1).

The demo tour's lines (`bench_flat_lines.tour_segments`, cycled) on a store in memory, one line a
request and the turn read after every user message, as `scripts/bench_http.py` sends them, three
ways in the same rounds, taking turns: the in-process API (`Chatrecord.record_lines`,
`turn_notes`), the ASGI app of `create_app` called directly (`POST /v1/lines`, `GET …/turn`:
no server, no socket, no parser), once with the hot path (`hot_routes`) and once without it
(FastAPI's routing and middleware). Each way has its own conversation. CPU per line is this
process's (`time.process_time`); what an app's way costs beyond the API's is the app's own work:
the framework, the request and response objects, the hop to a thread and back. Printed per round,
then the medians and the ratio of the two apps' own CPU per line.

Not a test: timings vary by machine and load; the ratio inside a round is what compares.

Example:
    python3 scripts/bench_hot_routes.py --rounds 5 --lines 2000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import orjson  # noqa: E402
from bench_flat_lines import started, tour_segments  # noqa: E402

from adapters.api import Chatrecord  # noqa: E402
from adapters.bootstrap import open_store  # noqa: E402
from adapters.http.app import HttpSettings, create_app  # noqa: E402

TOKEN = "bench-token-0123456789"


def tour_lines(conversation: str, count: int) -> list[tuple[bytes, bool]]:
    """The first `count` of the demo tour's lines of `conversation`, cycled, with whether each is a
    user message."""
    lines: list[tuple[bytes, bool]] = []
    cycle = 0
    while len(lines) < count:
        for group in tour_segments(conversation, cycle):
            lines += [(orjson.dumps(line), line["type"] == "user_message") for line in group]
        cycle += 1
    return lines[:count]


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": method,
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
    }


async def call(app: Any, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """Calls the ASGI `app` as uvicorn would for one request; returns the status and the body."""
    headers = [(b"host", b"127.0.0.1:8000"), (b"authorization", f"Bearer {TOKEN}".encode())]
    if method == "POST":
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        else:
            chunks.append(message.get("body", b""))

    await app(scope(method, path, headers), receive, send)
    return status, b"".join(chunks)


async def through_app(app: Any, conversation: str, lines: list[tuple[bytes, bool]]) -> None:
    turn = f"/v1/conversations/{urllib.parse.quote(conversation, safe='')}/turn"
    turn = urllib.parse.unquote(turn)  # the path as uvicorn hands it on: decoded
    for raw, user in lines:
        status, body = await call(app, "POST", "/v1/lines", raw)
        if status != 200:
            raise SystemExit(f"POST /v1/lines: {status} {body[:300]!r}")
        if user:
            status, body = await call(app, "GET", turn)
            if status != 200:
                raise SystemExit(f"GET turn: {status} {body[:300]!r}")


def through_api(chatrecord: Chatrecord, conversation: str, lines: list[tuple[bytes, bool]]) -> None:
    for raw, user in lines:
        chatrecord.record_lines([raw], "bench")
        if user:
            chatrecord.turn_notes(conversation)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lines", type=int, default=2000, help="Lines a way records in a round.")
    args = parser.parse_args()
    if not (1 <= args.rounds <= 50 and 10 <= args.lines <= 100_000):
        raise SystemExit("--rounds 1..50 and --lines 10..100000 keep the run bounded")
    print(f"machine: {os.cpu_count()} CPUs; load average before: {load()}", flush=True)
    chatrecord = Chatrecord(open_store(memory=True))
    settings = HttpSettings(token=TOKEN)
    apps = {"hot": create_app(lambda: chatrecord, settings), "fastapi": create_app(lambda: chatrecord, settings, hot=False)}
    for app in apps.values():
        app.state.chatrecord = chatrecord  # no lifespan: the apps share the store
    loop = asyncio.new_event_loop()
    ways = ["api", "hot", "fastapi"]
    figures: dict[str, list[float]] = {way: [] for way in ways}
    print(f"  {'round':>5} " + " ".join(f"{way + ' ms/line':>16}" for way in ways) + "  load", flush=True)
    for round_ in range(1, args.rounds + 1):
        order = ways if round_ % 2 else ways[::-1]
        for way in order:
            conversation = f"bench-{way}-{round_}"
            chatrecord.record(started(conversation))
            lines = tour_lines(conversation, args.lines)
            before = time.process_time()
            if way == "api":
                through_api(chatrecord, conversation, lines)
            else:
                loop.run_until_complete(through_app(apps[way], conversation, lines))
            figures[way].append(1000 * (time.process_time() - before) / args.lines)
        print(f"  {round_:>5} " + " ".join(f"{figures[way][-1]:16.3f}" for way in ways) + f"  {load()}", flush=True)
    own = {way: [f - a for f, a in zip(figures[way], figures["api"], strict=True)] for way in ("hot", "fastapi")}
    ratios = [h / f for h, f in zip(own["hot"], own["fastapi"], strict=True) if f > 0]
    print("medians:")
    for way in ways:
        print(f"  {way:8} {statistics.median(figures[way]):.3f} ms CPU/line")
    for way in ("hot", "fastapi"):
        print(f"  {way:8} app's own (beyond the API's) {statistics.median(own[way]):.3f} ms CPU/line")
    print(f"  hot / fastapi, the app's own CPU per line, median of the rounds: {statistics.median(ratios):.2f}")
    print(f"load average after: {load()}")
    loop.close()
    chatrecord.close()


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
