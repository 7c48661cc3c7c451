"""Benchmark: ingesting a file in batches against line by line (issue 21, item 5), in one run.

The file is a generated chat export of the demo's shapes (`demo_export`): the demo SEO tour
(a question, six cards decided, the tour's end, a later message) cycled with fresh segment ids
and message numbers, each cycle for the next of four conversations in turn, so their lines are
interleaved as an export of several chats is. For each backend (a SQLite file in a temp folder;
a fresh schema of CHATRECORD_TEST_DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/test,
dropped at the end) it ingests the file into a fresh store twice:

- line by line: each line parsed and handed to the store on its own, one transaction per line
  (`LineWrites.handle(RecordLines([line]))`, the loop `Chatrecord.ingest` ran before batches);
- batched: `Chatrecord.ingest` as `chatrecord ingest` runs it (batches of 500 lines, one
  transaction each);

and prints each one's lines/s and the ratio. Then it measures the peak memory (the maximum
resident set size of a fresh subprocess that ingests the file batched) at two file lengths:
memory must stay flat in the file's length. Not a test: timings vary with the machine and its
load (`uptime` is printed before and after).

    PYTHONPATH=. python scripts/bench_ingest.py                      # 20,000 lines, both backends
    PYTHONPATH=. python scripts/bench_ingest.py --lines 5000 --backends sqlite
    PYTHONPATH=. python scripts/bench_ingest.py cache 50000 200      # the aggregate cache, as before

`cache STEPS MESSAGES` compares line-by-line ingest with the library's aggregate cache against
without it (a segment of STEPS steps, then MESSAGES user messages, SQLite), as this script did
before batches (docs/benchmarks.md, "Ingesting line by line").
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.api import Chatrecord  # noqa: E402
from adapters.bootstrap import open_store  # noqa: E402
from adapters.ingest import read_lines  # noqa: E402
from adapters.service.record_lines import RecordLines, parse  # noqa: E402

DEMO = ROOT / "adapters" / "data" / "demo_seo_tour.jsonl"
CONVERSATIONS = 4
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def demo_export(count: int, conversations: int = CONVERSATIONS) -> list[bytes]:
    """Returns `count` lines of a chat export: the demo tour cycled over `conversations`
    conversations (cycle k for conversation k mod `conversations`), each cycle with its own
    run and segment ids, message numbers after the conversation's last ones and times a week
    after the conversation's cycle before."""
    tour = [orjson.loads(line) for line in DEMO.read_bytes().splitlines() if line.strip()]
    start, cycle = tour[0], tour[1:]
    out: list[bytes] = []
    cycles = [0] * conversations
    k = 0
    while len(out) < count:
        n = k % conversations
        name = f"conv-export-{n}"
        if cycles[n] == 0:
            out.append(orjson.dumps({**start, "conversation": name}))
        run = f"run-{n}-{cycles[n]}"
        offset = 3 * cycles[n]
        for line in cycle:
            at = datetime.fromisoformat(line["at"].replace("Z", "+00:00")) + timedelta(days=7 * cycles[n])
            made = {**line, "conversation": name, "at": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
            if "segment" in made:
                made["segment"] = f"{run}/{made['segment'].rsplit('/', 1)[1]}"
            if "run" in made:
                made["run"] = run
            if isinstance(made.get("message"), int):
                made["message"] += offset
            out.append(orjson.dumps(made))
        cycles[n] += 1
        k += 1
    return [line + b"\n" for line in out[:count]]


@contextmanager
def fresh_store(backend: str, folder: Path) -> Iterator[dict[str, str]]:
    """Yields the settings of an empty store: a new SQLite file, or a new PostgreSQL schema
    (dropped afterwards)."""
    if backend == "sqlite":
        yield {"CHATRECORD_DB": str(folder / f"{uuid.uuid4().hex}.sqlite")}
        return
    import psycopg

    url = os.environ.get("CHATRECORD_TEST_DATABASE_URL", DEFAULT_URL)
    schema = f"bench_ingest_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield {"CHATRECORD_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}schema={schema}"}
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def line_by_line(settings: dict[str, str], path: Path) -> tuple[float, int]:
    """Returns the seconds it takes to store every line of `path` one transaction per line,
    and the events appended."""
    chatrecord = Chatrecord(open_store(settings))
    try:
        appended = 0
        started = time.perf_counter()
        with path.open("rb") as stream:
            for line_no, raw in enumerate(stream, start=1):
                line = parse(raw, line_no, path.name)
                if line is not None:
                    appended += len(chatrecord._writes.handle(RecordLines([line])).appended)
        return time.perf_counter() - started, appended
    finally:
        chatrecord.close()


def batched(settings: dict[str, str], path: Path) -> tuple[float, int]:
    """Returns the seconds `Chatrecord.ingest` takes to store `path`, and the events appended."""
    chatrecord = Chatrecord(open_store(settings))
    try:
        started = time.perf_counter()
        with path.open("rb") as stream:
            report = chatrecord.ingest(stream, path.name)
        assert report.stopped is None, report.stopped
        return time.perf_counter() - started, report.appended
    finally:
        chatrecord.close()


PEAK = """
import sys
sys.path.insert(0, {root!r})
from adapters.api import Chatrecord
from adapters.bootstrap import open_store
chatrecord = Chatrecord(open_store({settings!r}))
with open({path!r}, "rb") as stream:
    report = chatrecord.ingest(stream, "export.jsonl")
chatrecord.close()
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(report.appended, peak)
"""


def peak_memory(backend: str, folder: Path, path: Path) -> tuple[int, int]:
    """Returns the events a fresh subprocess appended ingesting `path` batched into a fresh
    store, and its peak resident set size in KiB (VmHWM: ru_maxrss would count the RSS of
    this process, which the subprocess was forked from, across its exec)."""
    with fresh_store(backend, folder) as settings:
        done = subprocess.run(
            [sys.executable, "-c", PEAK.format(root=str(ROOT), settings=settings, path=str(path))],
            capture_output=True,
            text=True,
            check=True,
        )
    appended, peak = done.stdout.split()
    return int(appended), int(peak)


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    return f"nproc {os.cpu_count()}, {cpu}, Python {platform.python_version()}"


def uptime() -> str:
    return re.sub(r"\s+", " ", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def compare(lines: int, backends: list[str], lengths: list[int]) -> None:
    print(f"machine: {machine()}")
    print(f"load before: {uptime()}")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        path = folder / "export.jsonl"
        path.write_bytes(b"".join(demo_export(lines)))
        print(
            f"file: {lines:,} lines ({path.stat().st_size / 1e6:.1f} MB), the demo tour cycled over "
            f"{CONVERSATIONS} interleaved conversations"
        )
        for backend in backends:
            with fresh_store(backend, folder) as settings:
                by_line, events_by_line = line_by_line(settings, path)
            with fresh_store(backend, folder) as settings:
                in_batches, events_batched = batched(settings, path)
            assert events_by_line == events_batched, (events_by_line, events_batched)
            print(f"{backend}: {events_batched:,} events")
            print(f"  line by line: {by_line:7.2f} s  {lines / by_line:8,.0f} lines/s")
            print(f"  batched:      {in_batches:7.2f} s  {lines / in_batches:8,.0f} lines/s")
            print(f"  ratio batched / line by line: {by_line / in_batches:.1f}x")
        for backend in backends:
            peaks = []
            for length in lengths:
                part = folder / f"export-{length}.jsonl"
                part.write_bytes(b"".join(demo_export(length)))
                _, peak = peak_memory(backend, folder, part)
                peaks.append((length, peak))
            shown = ", ".join(f"{length:,} lines: {peak / 1024:.1f} MiB" for length, peak in peaks)
            print(
                f"{backend}: peak memory of a batched ingest (VmHWM of its process): {shown}; "
                f"ratio {peaks[-1][1] / peaks[0][1]:.2f} for {lengths[-1] / lengths[0]:.0f}x the lines"
            )
    print(f"load after: {uptime()}")


# ------------------------------------------------------------------ the aggregate cache, as before


def cache_lines(steps: int, messages: int) -> list[bytes]:
    """Returns a conversation: a segment of `steps` tool steps, then `messages` user messages."""
    c, at = "bench", "2026-10-28T09:00:00Z"
    step = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
    out: list[dict[str, Any]] = [
        {"type": "conversation_started", "conversation": c, "at": at, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": c, "at": at, "message": 1, "text": "x", "page": 1},
        {
            "type": "segment_returned",
            "conversation": c,
            "at": at,
            "segment": "s1",
            "run": "r",
            "trigger": "turn",
            "outcome": "completed",
            "answer": "ok",
            "steps": [step] * steps,
            "pending": [],
        },
    ]
    out += [
        {"type": "user_message", "conversation": c, "at": at, "message": m, "text": "x", "page": 1}
        for m in range(2, messages + 2)
    ]
    return [orjson.dumps(line) for line in out]


def cache_ingest(data: list[bytes], cache_size: str) -> float:
    """Returns the seconds it takes to ingest `data` line by line into a fresh SQLite store."""
    with tempfile.TemporaryDirectory() as folder:
        store = open_store({"CHATRECORD_DB": f"{folder}/bench.sqlite"}, AGGREGATE_CACHE_MAXSIZE=cache_size)
        start = time.perf_counter()
        for line in read_lines(data, "bench"):
            store.handle(line)
        seconds = time.perf_counter() - start
        store.close()
        return seconds


def compare_cache(steps: int, messages: int) -> None:
    data = cache_lines(steps, messages)
    cached, uncached = cache_ingest(data, "256"), cache_ingest(data, "")  # "" turns the cache off
    print(f"{len(data)} lines, one segment of {steps} steps")
    print(f"with the aggregate cache:    {cached:7.2f} s")
    print(f"without the aggregate cache: {uncached:7.2f} s")
    print(f"ratio without / with: {uncached / cached:.1f}")


def main() -> None:
    if sys.argv[1:2] == ["cache"]:
        steps, messages = (int(a) for a in (sys.argv[2:] or ["50000", "200"]))
        compare_cache(steps, messages)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20_000, help="lines of the export (default 20,000)")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both (default)")
    parser.add_argument("--memory", default="5000,20000", help="the two file lengths of the memory figure")
    args = parser.parse_args()
    compare(args.lines, args.backends.split(","), [int(n) for n in args.memory.split(",")])


if __name__ == "__main__":
    main()
