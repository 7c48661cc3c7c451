"""Benchmark: what the hash chain and the text encryption cost per append, and how fast verify runs.

Appending: the same lines (a conversation of user messages, each answered by a segment with a
text answer and a write step) are handled one by one into two fresh SQLite files, in one run,
alternating, three rounds: the store as configured (chain rows in the same transaction, texts
encrypted with the conversation's data key) and the same store without either (the library's
application recorder, no data keys). Prints the median time per appended event of each and
the ratio; then the same in memory, where no disk write hides the CPU cost. Verifying: `verify` over every conversation of the sealed store, in events per
second, with the peak memory Python allocated while it ran (tracemalloc), for a quarter of the
conversations and for all of them (501 events each): flat memory shows as about the same peak. Not a test: timings vary by machine.

Example:
    PYTHONPATH=. python scripts/bench_chain.py 1000 24
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
from eventsourcing.sqlite import SQLiteApplicationRecorder
from eventsourcing.sqlite import SQLiteFactory as LibrarySQLiteFactory

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.backends.sqlite import SQLiteFactory
from adapters.bootstrap import open_store
from adapters.ingest import read_lines
from adapters.store.chain import GENESIS, link
from adapters.store.verify import verdicts


class PlainSQLiteFactory(SQLiteFactory):
    """The store's SQLite factory without the chain and without data keys."""

    application_recorder_class = SQLiteApplicationRecorder

    def mapper(self, transcoder: Any = None, mapper_class: Any = None) -> Any:
        return LibrarySQLiteFactory.mapper(self, transcoder, mapper_class)


def lines(conversation: str, turns: int) -> list[bytes]:
    """Returns a conversation of `turns` user messages, each answered by a segment."""
    at = "2026-10-28T09:00:00Z"
    write = {
        "kind": "tool_write",
        "round": 1,
        "durationMs": 12.5,
        "toolName": "update_page_metadata",
        "writeTargetTable": "pages",
        "writeTargetUid": 42,
        "writeCompleteness": "complete",
    }
    out: list[dict[str, Any]] = [
        {"type": "conversation_started", "conversation": conversation, "at": at, "kind": "chat", "owner": 7}
    ]
    for n in range(1, turns + 1):
        out.append(
            {
                "type": "user_message",
                "conversation": conversation,
                "at": at,
                "message": n,
                "text": f"Bitte den Titel von Seite 42 prüfen, Runde {n}.",
                "page": 42,
            }
        )
        out.append(
            {
                "type": "segment_returned",
                "conversation": conversation,
                "at": at,
                "segment": f"s{n}",
                "run": f"r{n}",
                "trigger": "turn",
                "outcome": "completed",
                "answer": f"Der Titel ist jetzt „Unser Team – Runde {n}“.",
                "steps": [write],
                "pending": [],
            }
        )
    return [orjson.dumps(line) for line in out]


def append(path: str | None, data: list[bytes], plain: bool) -> float:
    """Returns the seconds per event of handling `data` line by line into a fresh store at
    `path`, or in memory when `path` is None."""
    if path is None:
        overrides = {"PERSISTENCE_MODULE": "eventsourcing.popo"} if plain else {}
        store = open_store(memory=True, **overrides)
    else:
        overrides = {"PERSISTENCE_MODULE": "__main__:PlainSQLiteFactory"} if plain else {}
        store = open_store({"CHATRECORD_DB": path}, **overrides)
    start = time.perf_counter()
    for line in read_lines(data, "bench"):
        store.handle(line)
    seconds = time.perf_counter() - start
    events = store.max_notification_id()
    store.close()
    return seconds / events


def encode_costs(data: list[bytes]) -> tuple[tuple[float, float], float]:
    """Returns the µs per event of the mapper's encoding with and without text encryption
    (median of 5 passes over the conversation's events), and of one hash link."""
    store = open_store(memory=True)
    for line in read_lines(data, "bench"):
        store.handle(line)
    events = store.events("bench")
    keys = store.mapper.keys  # type: ignore[attr-defined]
    timings = []
    for with_keys in (keys, None):
        store.mapper.keys = with_keys  # type: ignore[attr-defined]
        passes = []
        for _ in range(5):
            start = time.perf_counter()
            stored = [store.mapper.to_stored_event(e) for e in events]
            passes.append((time.perf_counter() - start) / len(events) * 1e6)
        timings.append(statistics.median(passes))
    start = time.perf_counter()
    digest = GENESIS
    for s in stored:
        digest = link(digest, s.originator_id, s.originator_version, s.topic, s.state)
    hashing = (time.perf_counter() - start) / len(stored) * 1e6
    return (timings[0], timings[1]), hashing


def verify_rate(path: str) -> tuple[int, float, int]:
    """Returns (events, events per second, peak KiB allocated) of verifying the store at `path`."""
    store = open_store({"CHATRECORD_DB": path})
    tracemalloc.start()
    start = time.perf_counter()
    found = list(verdicts(store))
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert all(v.ok for v in found)
    events = sum(v.events for v in found)
    store.close()
    return events, events / seconds, peak // 1024


def main() -> None:
    turns, conversations = (int(a) for a in (sys.argv[1:] or ["1000", "24"]))
    data = lines("bench", turns)
    sealed, plain = [], []
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(3):
            sealed.append(append(f"{folder}/sealed{round_}.sqlite", data, plain=False))
            plain.append(append(f"{folder}/plain{round_}.sqlite", data, plain=True))
        with_chain, without = statistics.median(sealed), statistics.median(plain)
        print(f"append, {len(data)} lines ({len(data)} events) handled one by one into SQLite, median of 3:")
        print(f"  chain + encryption {with_chain * 1e6:8.1f} µs/event")
        print(f"  neither            {without * 1e6:8.1f} µs/event")
        print(f"  ratio              {with_chain / without:8.2f}")
        sealed, plain = [], []
        for _ in range(3):
            sealed.append(append(None, data, plain=False))
            plain.append(append(None, data, plain=True))
        with_chain, without = statistics.median(sealed), statistics.median(plain)
        print("the same in memory (no disk: the CPU cost alone), median of 3:")
        print(f"  chain + encryption {with_chain * 1e6:8.1f} µs/event")
        print(f"  neither            {without * 1e6:8.1f} µs/event")
        print(f"  ratio              {with_chain / without:8.2f}")
        encode, hashing = encode_costs(data)
        print(
            "the parts alone, per event: encoding with text encryption "
            f"{encode[0]:.1f} µs, without {encode[1]:.1f} µs; one hash link {hashing:.1f} µs"
        )
        for count in (conversations // 4, conversations):
            path = f"{folder}/verify{count}.sqlite"
            store = open_store({"CHATRECORD_DB": path})
            for c in range(count):
                for line in read_lines(lines(f"conv-{c}", 250), "bench"):
                    store.handle(line)
            store.close()
            events, rate, peak = verify_rate(path)
            print(f"verify {count:3d} conversations, {events:6d} events: {rate:9.0f} events/s, peak {peak} KiB")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
