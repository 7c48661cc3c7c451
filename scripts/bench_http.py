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

The anchors (issue 37, item 3; on PostgreSQL by default, `--anchors both` on SQLite as well,
`--anchors off` for none): in the same rounds, after the two phases above, four more phases with
the same number of client threads, each counting **segments of the real mix with their turn
read**, the unit of `scripts/bench_flat.py --sections mix` (`MixWriter.append_and_read`): a
segment is one group of `tour_segments` (its lines up to its `segment_returned`, the last also the
tour's end: 17 lines in 8 segments, 2.125 lines a segment) and one turn read after it;

- http: the segment's lines one request each (`POST /v1/lines`), then `GET …/turn`;
- api: the same calls in-process, `Chatrecord.record_lines` per line, then `turn_notes`;
- row: the state row, `../shared/anchors/bench_state_row.py`'s append of the tour's next segment entry,
  then its turn read (`bench_flat_writes.state_row_segment`, as bench_flat's mix drives it), one
  connection and one row a client, on PostgreSQL (database `anchors`, ANCHORS_DSN) whatever the
  backend measured;
- langgraph: LangGraph's `PostgresSaver`, an invoke of `bench_langgraph.py`'s graph with the
  segment's entry and answer, then `get_state` (`bench_flat_writes.langgraph_segment`), one saver
  (connection) and one thread a client; left out where LangGraph is not installed
  (`pip install -e '.[bench]'`).

As in bench_flat's mix, every record starts at steady state: the state row holds 200 entries,
each LangGraph thread 200 segments, and ours (a conversation a client and way, kept across the
rounds) 200 segments of the tour recorded in-process before the clock runs (`--anchor-fill`).
These phases alternate their order per round; the ratios the issue names are taken inside each
round and their medians printed (HTTP segments/s over the state row's and over LangGraph's, the
API's over the state row's).

Loopback only; bounded by --seconds per phase. Not a test: timings vary by machine and load.

Example:
    python3 scripts/bench_http.py --clients 1,8,32 --rounds 3 --seconds 5 --backend both
    python3 scripts/bench_http.py --serve-arg=--workers=1     # serve with one process
    python3 scripts/bench_http.py --rounds 1 --seconds 2 --clients 8 --backend postgres  # a short check
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
from bench_flat_lines import ANCHORS, started, tour_segments  # noqa: E402
from bench_flat_support import ensure_anchors_database  # noqa: E402
from bench_http_anchors import ANCHOR_TARGETS, SEGMENT_WAYS, Anchors, Client, Read, Segment, SegmentCut, Send  # noqa: E402
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
    done: int = 0
    """Lines (or, in the anchors' phases, segments with their turn read) done."""
    appended: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


Loop = Callable[[threading.Event], Phase]
"""A client's work until the event is set; returns what it did."""


def line_loop(send: Send, read: Read, conversation: str) -> Loop:
    """The demo tour's lines, one at a time, the turn read after every user message."""
    source = tour_lines(conversation)

    def loop(stop: threading.Event) -> Phase:
        part = Phase()
        while not stop.is_set():
            raw, user = next(source)
            t0 = time.perf_counter()
            try:
                part.appended += send(raw)
                part.done += 1
            except Exception as error:  # noqa: BLE001 - counted and shown once
                part.errors += 1
                if part.errors == 1:
                    print(f"    error: {error}", flush=True)
            t1 = time.perf_counter()
            part.latencies.append(t1 - t0)
            if user:
                read()
                part.latencies.append(time.perf_counter() - t1)
        return part

    return loop


def segment_loop(segment: Segment) -> Loop:
    """Segments, one after the other, each timed whole (its lines and its turn read)."""

    def loop(stop: threading.Event) -> Phase:
        part = Phase()
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                part.appended += segment()
                part.done += 1
            except Exception as error:  # noqa: BLE001 - counted and shown once
                part.appended += error.appended if isinstance(error, SegmentCut) else 0  # its lines stored before
                part.errors += 1
                if part.errors == 1:
                    print(f"    error: {error}", flush=True)
            part.latencies.append(time.perf_counter() - t0)
        return part

    return loop


def run_threads(loops: list[Loop], seconds: float) -> tuple[Phase, float]:
    """Runs one thread per loop for `seconds`, all starting at once; returns what they did
    together and the wall time."""
    phase, barrier, stop = Phase(), threading.Barrier(len(loops) + 1), threading.Event()

    def client(loop: Loop) -> None:
        barrier.wait()
        part = loop(stop)
        with phase.lock:
            phase.done += part.done
            phase.appended += part.appended
            phase.errors += part.errors
            phase.latencies.extend(part.latencies)

    threads = [threading.Thread(target=client, args=(loop,)) for loop in loops]
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
    """A phase's figures, per line (or per segment in the anchors' phases)."""

    lines_per_s: float
    server_ms: float
    client_ms: float
    p50: float
    p99: float
    lines: int
    errors: int


def measure(loops: list[Loop], server: int, seconds: float) -> tuple[Figures, int]:
    """Runs `loops` for `seconds`, with the CPU of the server's processes and of this one;
    returns the figures and the events the responses said they appended."""
    server0, client0 = tree_cpu(server), time.process_time()
    phase, wall = run_threads(loops, seconds)
    server_cpu, client_cpu = tree_cpu(server) - server0, time.process_time() - client0
    done = max(phase.done, 1)
    figures = Figures(
        phase.done / wall,
        1000 * server_cpu / done,
        1000 * client_cpu / done,
        1000 * percentile(phase.latencies, 0.5),
        1000 * percentile(phase.latencies, 0.99),
        phase.done,
        phase.errors,
    )
    return figures, phase.appended


def run_phase(way: str, n: int, chatrecord: Chatrecord, port: int, server: int, seconds: float) -> tuple[Figures, list[str], int]:
    tag = uuid.uuid4().hex[:8]
    conversations = [f"bench-{way}-{tag}-{c}" for c in range(n)]
    for conversation in conversations:
        chatrecord.record(started(conversation))
    clients = [http_client(port, c) if way == "http" else api_client(chatrecord, c) for c in conversations]
    figures, appended = measure([line_loop(*c) for c in clients], server, seconds)
    return figures, conversations, appended


def run_backend(
    backend: str, settings: dict[str, str], args: argparse.Namespace, folder: Path, with_anchors: bool = False
) -> dict[str, list[float]]:
    process, port = start_server(settings, args.serve_arg, folder / f"serve-{backend}.log")
    chatrecord = Chatrecord(open_store(settings))
    ratios: dict[str, list[float]] = {}
    anchor_ratios: dict[str, list[float]] = {}
    anchors = None
    if with_anchors:
        ensure_anchors_database()
        anchors = Anchors(chatrecord, args.anchor_fill)
    acked = stored = 0
    written: list[str] = []
    print(f"\n{backend}: serve {' '.join(args.serve_arg) or '(defaults)'}, {args.seconds:g} s a phase", flush=True)
    print(
        f"  {'round':>5} {'clients':>7} {'way':4} {'lines/s':>8} {'server ms CPU/line':>18} {'client ms CPU/line':>18} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'lines':>6} {'errors':>6}  load",
        flush=True,
    )
    if anchors is not None:
        print(
            "  (ways 'seg …': segments of the real mix with their turn read, 2.125 lines and one turn read a segment; "
            "the state row and LangGraph on PostgreSQL)",
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
                if anchors is not None:
                    segments = run_anchors(anchors, round_, n, port, process.pid, args.seconds)
                    for name, top, bottom, _ in ANCHOR_TARGETS:
                        if top in segments and bottom in segments:
                            value = segments[top].lines_per_s / max(segments[bottom].lines_per_s, 1e-9)
                            anchor_ratios.setdefault(f"{n} clients: {name}", []).append(value)
        if anchors is not None:
            acked += anchors.acked
            written += anchors.written
        stored = sum(len(chatrecord.store.events(c)) for c in written)
    finally:
        if anchors is not None:
            anchors.close()
        chatrecord.close()
        process.terminate()
        process.wait(timeout=30)
    print(f"  events acknowledged {acked}, stored {stored}: lost {max(0, acked - stored)}, doubled {max(0, stored - acked)}")
    print(f"  medians of the ratios taken inside the {args.rounds} rounds ({backend}):")
    for name, values in ratios.items():
        print(f"    {name:48} {statistics.median(values):5.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    if anchor_ratios:
        print(
            f"  medians of the ratios against the anchors, segments of the real mix with their turn read, "
            f"taken inside the {args.rounds} rounds ({backend}; the anchors on PostgreSQL; targets on PostgreSQL):"
        )
        for name, values in anchor_ratios.items():
            median, target = statistics.median(values), next(t for label, _, _, t in ANCHOR_TARGETS if name.endswith(label))
            print(
                f"    {name:48} {median:5.2f}  ({', '.join(f'{v:.2f}' for v in values)})  "
                f"target >= {target:.1f}x: {'met' if median >= target else 'not met'}"
            )
    return ratios


def our_client(way: str, port: int, chatrecord: Chatrecord) -> Client:
    """The calls of one client of ours, over HTTP or in-process, as the lines' phases make them."""
    if way == "http":
        return lambda conversation: http_client(port, conversation)[:2]
    return lambda conversation: api_client(chatrecord, conversation)[:2]


def run_anchors(anchors: Anchors, round_: int, n: int, port: int, server: int, seconds: float) -> dict[str, Figures]:
    """One round's anchors' phases with `n` clients (their order alternating per round); prints
    each, returns their figures by way."""
    seen: dict[str, Figures] = {}
    for way in SEGMENT_WAYS if round_ % 2 else SEGMENT_WAYS[::-1]:
        segments = anchors.segments(way, n, our_client(way, port, anchors.chatrecord))
        if segments is None:
            continue
        figures, appended = measure([segment_loop(segment) for segment in segments], server, seconds)
        anchors.acked += appended
        seen[way] = figures
        print(
            f"  {round_:>5} {n:>7} seg {way:9} {figures.lines_per_s:8.1f} segments/s, CPU ms a segment: "
            f"server {figures.server_ms:.2f}, this process {figures.client_ms:.2f}; p50 {figures.p50:.1f} ms, "
            f"p99 {figures.p99:.1f} ms; {figures.lines} segments, {figures.errors} errors  {load()}",
            flush=True,
        )
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", default="1,8,32", help="Client counts, comma-separated (default 1,8,32).")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="Each phase's length.")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--serve-arg", action="append", default=[], help="An argument for `chatrecord serve` (repeatable).")
    parser.add_argument(
        "--anchors",
        choices=("postgres", "both", "off"),
        default="postgres",
        help="Where the state row and LangGraph run beside ours, segments with their turn read (default: on PostgreSQL).",
    )
    parser.add_argument(
        "--anchor-fill", type=int, default=200, help="Segments our conversations of the anchors' phases hold first (default 200)."
    )
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    if not (all(1 <= c <= 64 for c in args.clients) and 1 <= args.rounds <= 20 and 0.5 <= args.seconds <= 120):
        raise SystemExit("--clients 1..64, --rounds 1..20 and --seconds 0.5..120 keep the run bounded")
    if args.anchors != "off" and ANCHORS is None:
        print("the anchors (../shared/anchors) are not here: their phases are left out", flush=True)
        args.anchors = "off"
    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}; load average before: {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.backend in ("sqlite", "both"):
            run_backend("sqlite", {"CHATRECORD_DB": str(folder / "bench.sqlite")}, args, folder, args.anchors == "both")
        if args.backend in ("postgres", "both"):
            schema = f"chatrecord_bench_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            try:
                run_backend(
                    "postgres", {"CHATRECORD_DATABASE_URL": f"{PG_URL}?schema={schema}"}, args, folder, args.anchors != "off"
                )
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
