"""Benchmark: ingesting line by line with the aggregate cache against without it.

The chat sends one line at a time; each line loads its conversation, decides, saves. Without
the library's aggregate cache every line reloads the conversation from its last snapshot and
replays the events since, so one large segment (here STEPS steps) is decoded again for every
later line until the next snapshot. With the cache (the store's default) the state is kept and
only the events stored since are folded in. Both runs ingest the same file into a fresh SQLite
file and print their times and the ratio. Not a test: timings vary by machine.

Example:
    PYTHONPATH=. python scripts/bench_ingest.py 50000 200
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.ingest import read_lines  # noqa: E402
from adapters.store.settings import open_store  # noqa: E402


def lines(steps: int, messages: int) -> list[bytes]:
    """Returns a conversation: a segment of `steps` tool steps, then `messages` user messages."""
    c, at = "bench", "2026-10-28T09:00:00Z"
    step = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
    out = [
        {"type": "conversation_started", "conversation": c, "at": at, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": c, "at": at, "message": 1, "text": "x", "page": 1},
        {"type": "segment_returned", "conversation": c, "at": at, "segment": "s1", "run": "r", "trigger": "turn",
         "outcome": "completed", "answer": "ok", "steps": [step] * steps, "pending": []},
    ]
    out += [{"type": "user_message", "conversation": c, "at": at, "message": m, "text": "x", "page": 1}
            for m in range(2, messages + 2)]
    return [orjson.dumps(line) for line in out]


def ingest(data: list[bytes], cache_size: str) -> float:
    """Returns the seconds it takes to ingest `data` into a fresh SQLite store."""
    with tempfile.TemporaryDirectory() as folder:
        store = open_store({"CHATRECORD_DB": f"{folder}/bench.sqlite"}, AGGREGATE_CACHE_MAXSIZE=cache_size)
        start = time.perf_counter()
        for line in read_lines(data, "bench"):
            store.handle(line)
        seconds = time.perf_counter() - start
        store.close()
        return seconds


def main() -> None:
    steps, messages = (int(a) for a in (sys.argv[1:] or ["50000", "200"]))
    data = lines(steps, messages)
    cached, uncached = ingest(data, "256"), ingest(data, "")  # "" turns the cache off
    print(f"{len(data)} lines, one segment of {steps} steps")
    print(f"with the aggregate cache:    {cached:7.2f} s")
    print(f"without the aggregate cache: {uncached:7.2f} s")
    print(f"ratio without / with: {uncached / cached:.1f}")


if __name__ == "__main__":
    main()
