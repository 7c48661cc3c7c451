"""Benchmark: the chat's real path, the demo tour's lines over HTTP (`chatrecord serve` on
loopback, with its defaults) beside the same work through the Python API in the same rounds,
on SQLite and PostgreSQL (issue 37, item 5).

Each client (a thread) has its own conversation, started before the clock runs, and records the
demo tour's lines cycled (`bench_flat_lines.tour_segments`: a user message, a question and its
answer, cards decided, the tour's end; 2.125 lines a segment) one line at a time, reading the
next turn's notes after every user message, as the chat does: over HTTP `POST /v1/lines` and
`GET /v1/conversations/ID/turn` (stdlib `http.client`, one keep-alive connection a client),
in-process `Chatrecord.record_lines` and `Chatrecord.turn_notes` on one Chatrecord shared by the
threads. Each phase runs `--seconds`; HTTP and the API alternate which goes first per round.

Per phase: lines/s, CPU per line of the server (every process of `serve`, from /proc) and of
this process (the client threads over HTTP; the API's whole work in-process), p50/p99 of a
request (a line's POST, a turn's GET; in-process the same calls). The ratios the issue's targets
name are taken inside each round (HTTP lines/s over the API's, the server's CPU per line over
the API's, p99 over p50) and their medians printed. Afterwards the events stored are counted
against those the responses said they appended: 0 lost, 0 doubled.

Loopback only; bounded by --seconds per phase. Not a test: timings vary by machine and load.

Example:
    python3 scripts/bench_http.py --clients 1,8,32 --rounds 3 --seconds 5 --backend both
    python3 scripts/bench_http.py --serve-arg=--workers=1     # serve with one process
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import orjson  # noqa: E402
import psycopg  # noqa: E402
from bench_flat_lines import started, tour_segments  # noqa: E402
from psycopg import sql  # noqa: E402

from adapters.api import Chatrecord  # noqa: E402
from adapters.bootstrap import open_store  # noqa: E402

TOKEN = "bench-token-0123456789"
PG_URL = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"
TICKS = os.sysconf("SC_CLK_TCK")


def tour_lines(conversation: str) -> Any:
    """Yields the demo tour's lines of `conversation`, cycled without end, as JSON bytes with
    whether each is a user message."""
    cycle = 0
    while True:
        for group in tour_segments(conversation, cycle):
            for line in group:
                yield orjson.dumps(line), line["type"] == "user_message"
        cycle += 1


@dataclass
class Phase:
    lines: int = 0
    appended: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


Send = Callable[[bytes], int]
"""Records one line, returns the events it appended (raises on an error)."""
Read = Callable[[], object]


def drive(clients: list[tuple[Send, Read, str]], seconds: float) -> tuple[Phase, float]:
    """Runs one thread per client for `seconds`; returns what they did and the wall time."""
    phase, barrier, stop = Phase(), threading.Barrier(len(clients) + 1), threading.Event()

    def client(send: Send, read: Read, conversation: str) -> None:
        latencies, lines, appended, errors = [], 0, 0, 0
        source = tour_lines(conversation)
        barrier.wait()
        while not stop.is_set():
            raw, user = next(source)
            t0 = time.perf_counter()
            try:
                appended += send(raw)
                lines += 1
            except Exception as error:  # noqa: BLE001 - counted and shown once
                errors += 1
                if errors == 1:
                    print(f"    error: {error}", flush=True)
            t1 = time.perf_counter()
            latencies.append(t1 - t0)
            if user:
                read()
                latencies.append(time.perf_counter() - t1)
        with phase.lock:
            phase.lines += lines
            phase.appended += appended
            phase.errors += errors
            phase.latencies.extend(latencies)

    threads = [threading.Thread(target=client, args=c) for c in clients]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return phase, time.perf_counter() - start


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` and its descendants now alive."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICKS
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += cpu.get(current, 0.0)
        todo.extend(child for child, parent in parents.items() if parent == current)
    return total


def start_server(settings: dict[str, str], extra: list[str], log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATRECORD_")}
    env.update(
        settings, CHATRECORD_API_TOKEN=TOKEN, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *extra],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    for _ in range(300):
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/v1/healthz")
            if connection.getresponse().status == 200:
                time.sleep(1.0)  # the other workers
                return process, port
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the server did not start: {log.read_text()}")


def http_client(port: int, conversation: str) -> tuple[Send, Read, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    turn = f"/v1/conversations/{urllib.parse.quote(conversation, safe='')}/turn"

    def send(raw: bytes) -> int:
        connection.request("POST", "/v1/lines", raw, headers)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"POST /v1/lines: {response.status} {body[:200]!r}")
        appended: int = orjson.loads(body)["appended"]
        return appended

    def read() -> object:
        connection.request("GET", turn, headers=headers)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET turn: {response.status} {body[:200]!r}")
        return body

    return send, read, conversation


def api_client(chatrecord: Chatrecord, conversation: str) -> tuple[Send, Read, str]:
    def send(raw: bytes) -> int:
        return chatrecord.record_lines([raw], "bench").appended

    return send, lambda: chatrecord.turn_notes(conversation), conversation


@dataclass
class Figures:
    lines_per_s: float
    server_ms: float
    client_ms: float
    p50: float
    p99: float
    lines: int
    errors: int


def run_phase(way: str, n: int, chatrecord: Chatrecord, port: int, server: int, seconds: float) -> tuple[Figures, list[str], int]:
    tag = uuid.uuid4().hex[:8]
    conversations = [f"bench-{way}-{tag}-{c}" for c in range(n)]
    for conversation in conversations:
        chatrecord.record(started(conversation))
    clients = [http_client(port, c) if way == "http" else api_client(chatrecord, c) for c in conversations]
    server0, client0 = tree_cpu(server), time.process_time()
    phase, wall = drive(clients, seconds)
    server_cpu, client_cpu = tree_cpu(server) - server0, time.process_time() - client0
    lines = max(phase.lines, 1)
    figures = Figures(
        phase.lines / wall,
        1000 * server_cpu / lines,
        1000 * client_cpu / lines,
        1000 * percentile(phase.latencies, 0.5),
        1000 * percentile(phase.latencies, 0.99),
        phase.lines,
        phase.errors,
    )
    return figures, conversations, phase.appended


def run_backend(backend: str, settings: dict[str, str], args: argparse.Namespace, folder: Path) -> dict[str, list[float]]:
    process, port = start_server(settings, args.serve_arg, folder / f"serve-{backend}.log")
    chatrecord = Chatrecord(open_store(settings))
    ratios: dict[str, list[float]] = {}
    acked = stored = 0
    written: list[str] = []
    print(f"\n{backend}: serve {' '.join(args.serve_arg) or '(defaults)'}, {args.seconds:g} s a phase", flush=True)
    print(
        f"  {'round':>5} {'clients':>7} {'way':4} {'lines/s':>8} {'server ms CPU/line':>18} {'client ms CPU/line':>18} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'lines':>6} {'errors':>6}  load",
        flush=True,
    )
    try:
        for round_ in range(1, args.rounds + 1):
            for n in args.clients:
                seen: dict[str, Figures] = {}
                for way in ("http", "api") if round_ % 2 else ("api", "http"):
                    figures, conversations, appended = run_phase(way, n, chatrecord, port, process.pid, args.seconds)
                    seen[way] = figures
                    acked += appended + len(conversations)  # each conversation_started: one event
                    written += conversations
                    print(
                        f"  {round_:>5} {n:>7} {way:4} {figures.lines_per_s:8.1f} {figures.server_ms:18.2f} "
                        f"{figures.client_ms:18.2f} {figures.p50:7.1f} {figures.p99:7.1f} {figures.lines:6} "
                        f"{figures.errors:6}  {load()}",
                        flush=True,
                    )
                http_, api = seen["http"], seen["api"]
                for name, value in (
                    (f"{n} clients: HTTP lines/s / API lines/s", http_.lines_per_s / max(api.lines_per_s, 1e-9)),
                    (f"{n} clients: server CPU/line / API CPU/line", http_.server_ms / max(api.client_ms, 1e-9)),
                    (f"{n} clients: HTTP p99 / p50", http_.p99 / max(http_.p50, 1e-9)),
                ):
                    ratios.setdefault(name, []).append(value)
        stored = sum(len(chatrecord.store.events(c)) for c in written)
    finally:
        chatrecord.close()
        process.terminate()
        process.wait(timeout=30)
    print(f"  events acknowledged {acked}, stored {stored}: lost {max(0, acked - stored)}, doubled {max(0, stored - acked)}")
    print(f"  medians of the ratios taken inside the {args.rounds} rounds ({backend}):")
    for name, values in ratios.items():
        print(f"    {name:48} {statistics.median(values):5.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", default="1,8,32", help="Client counts, comma-separated (default 1,8,32).")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="Each phase's length.")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--serve-arg", action="append", default=[], help="An argument for `chatrecord serve` (repeatable).")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    if not (all(1 <= c <= 64 for c in args.clients) and 1 <= args.rounds <= 20 and 0.5 <= args.seconds <= 120):
        raise SystemExit("--clients 1..64, --rounds 1..20 and --seconds 0.5..120 keep the run bounded")
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
