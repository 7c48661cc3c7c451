"""Benchmark: recording lines over HTTP (`chatrecord serve` on loopback) beside the same work
through the Python API, in one run, on SQLite and PostgreSQL.

Two scenarios, each with CLIENTS threads sending LINES lines one request at a time:
- "8 conversations": each client its own conversation (started, a user message, then segments);
- "1 conversation": every client on one conversation (started and a user message first, then
  each client's own segments), so the writers conflict and the store retries.
A 503 (write conflict after the store's retries) is sent again after a short pause, as the chat
should; the line's digest makes that safe. Afterwards the events stored are counted against
the events the acknowledged responses say they appended: 0 lost, 0 doubled.

Bounded: at most CLIENTS x LINES requests per scenario, and each scenario stops sending after
--max-seconds. Loopback only: the server listens on 127.0.0.1. Not a test: timings vary by machine.

Example:
    PYTHONPATH=. python scripts/bench_http.py --clients 8 --lines 500 --backend both
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.api import Chatrecord  # noqa: E402
from adapters.bootstrap import open_store  # noqa: E402
from domain.errors import ChatrecordError  # noqa: E402

AT = "2026-10-28T09:00:00Z"
STEP = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
TOKEN = "bench-token-0123456789"
PG_URL = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"


def line(line_type: str, conversation: str, **fields: object) -> bytes:
    return orjson.dumps({"type": line_type, "conversation": conversation, "at": AT, **fields})


def opening(conversation: str) -> list[bytes]:
    return [
        line("conversation_started", conversation, kind="chat", owner=7),
        line("user_message", conversation, message=1, text="x", page=1),
    ]


def segment(conversation: str, name: str) -> bytes:
    return line(
        "segment_returned",
        conversation,
        segment=name,
        run=name,
        trigger="turn",
        outcome="completed",
        answer="ok",
        steps=[STEP, STEP],
        pending=[],
    )


def workloads(scenario: str, clients: int, lines: int, tag: str) -> tuple[list[bytes], list[list[bytes]]]:
    """Returns the lines sent before the clients start, and each client's lines."""
    if scenario == "8 conversations":
        out = []
        for c in range(clients):
            conversation = f"{tag}-c{c}"
            out.append([*opening(conversation), *(segment(conversation, f"s{i}") for i in range(lines - 2))])
        return [], out
    conversation = f"{tag}-shared"
    return opening(conversation), [[segment(conversation, f"c{c}-s{i}") for i in range(lines)] for c in range(clients)]


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    acked: int = 0
    appended: int = 0
    retries: int = 0
    errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def drive(send: Callable[[bytes], tuple[str, int]], work: list[list[bytes]], max_seconds: float) -> tuple[Result, float]:
    """Runs one thread per client; `send(line)` returns ("ok", appended), ("retry", 0) or
    ("error", 0). Returns the result and the wall time."""
    result, barrier = Result(), threading.Barrier(len(work) + 1)
    deadline: list[float] = []

    def client(lines: list[bytes]) -> None:
        barrier.wait()
        for raw in lines:
            while time.monotonic() < deadline[0]:
                start = time.perf_counter()
                outcome, appended = send(raw)
                elapsed = time.perf_counter() - start
                with result.lock:
                    result.latencies.append(elapsed)
                    if outcome == "ok":
                        result.acked += 1
                        result.appended += appended
                    elif outcome == "retry":
                        result.retries += 1
                    else:
                        result.errors += 1
                if outcome != "retry":
                    break
                time.sleep(0.01)

    threads = [threading.Thread(target=client, args=(lines,)) for lines in work]
    for thread in threads:
        thread.start()
    deadline.append(time.monotonic() + max_seconds)
    start = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    return result, time.perf_counter() - start


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else 0.0


def report(way: str, scenario: str, result: Result, seconds: float, planned: int, stored: int, before: int) -> None:
    appended = stored - before
    print(
        f"  {way:6} {scenario:16} {result.acked:5}/{planned} lines acked in {seconds:6.2f} s: "
        f"{len(result.latencies) / seconds:7.1f} req/s, p50 {percentile(result.latencies, 0.5) * 1000:6.1f} ms, "
        f"p99 {percentile(result.latencies, 0.99) * 1000:7.1f} ms, retries {result.retries}, errors {result.errors}; "
        f"events acked {result.appended}, stored {appended}: lost {max(0, result.appended - appended)}, "
        f"doubled {max(0, appended - result.appended)}",
        flush=True,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(settings: dict[str, str], workers: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATRECORD_")}
    env.update(settings, CHATRECORD_API_TOKEN=TOKEN, PYTHONPATH=str(ROOT))
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "adapters.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--no-access-log",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/v1/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the server did not start: {log.read_text()}")


def stored_events(settings: dict[str, str], conversations: list[str]) -> int:
    store = open_store(settings)
    try:
        return sum(len(store.events(c)) for c in conversations)
    finally:
        store.close()


def conversations_of(work: list[list[bytes]], setup: list[bytes]) -> list[str]:
    return sorted({orjson.loads(raw)["conversation"] for raw in [*setup, *(lines[0] for lines in work)]})


def run_backend(backend: str, settings: dict[str, str], args: argparse.Namespace, folder: Path) -> None:
    print(f"{backend}: {args.clients} clients x {args.lines} lines, server workers {args.workers}", flush=True)
    process, url = start_server(settings, args.workers, folder / f"serve-{backend}.log")
    local = threading.local()

    def over_http(raw: bytes) -> tuple[str, int]:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        response = local.client.post("/v1/lines", content=raw, headers={"content-type": "application/json"})
        if response.status_code == 200:
            return "ok", response.json()["appended"]
        return ("retry", 0) if response.status_code == 503 else ("error", 0)

    chatrecord = Chatrecord(open_store(settings))

    def through_api(raw: bytes) -> tuple[str, int]:
        try:
            return "ok", chatrecord.record_lines([raw], "bench").appended
        except ChatrecordError as error:
            return ("retry", 0) if type(error).__name__ == "WriteConflict" else ("error", 0)
        except Exception as error:  # noqa: BLE001 - the store's IntegrityError after its retries; any other is counted
            return ("retry", 0) if type(error).__name__ == "IntegrityError" else ("error", 0)

    try:
        for scenario in ("8 conversations", "1 conversation"):
            for way, send in (("http", over_http), ("api", through_api)):
                tag = f"{way}-{uuid.uuid4().hex[:8]}"
                setup, work = workloads(scenario, args.clients, args.lines, tag)
                for raw in setup:
                    chatrecord.record_lines([raw], "setup")
                conversations = conversations_of(work, setup)
                before = stored_events(settings, conversations)
                result, seconds = drive(send, work, args.max_seconds)
                stored = stored_events(settings, conversations)
                report(way, scenario, result, seconds, args.clients * args.lines, stored, before)
    finally:
        chatrecord.close()
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="Each scenario stops sending after this.")
    args = parser.parse_args()
    if not (1 <= args.clients <= 64 and 3 <= args.lines <= 5000):
        raise SystemExit("--clients 1..64 and --lines 3..5000 keep the run bounded")
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}; load average before: {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.backend in ("sqlite", "both"):
            run_backend("sqlite", {"CHATRECORD_DB": str(folder / "bench.sqlite")}, args, folder)
        if args.backend in ("postgres", "both"):
            schema = f"chatrecord_bench_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            try:
                run_backend("postgres", {"CHATRECORD_DATABASE_URL": f"{PG_URL}?schema={schema}"}, args, folder)
            finally:
                with psycopg.connect(PG_URL, autocommit=True) as conn:
                    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    print(f"load average after: {load()}")


def cpu_model() -> str:
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                return text.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
