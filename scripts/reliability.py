"""The reliability harness of issue 20 (docs/reliability.md): fuzz, concurrent writers, reads
during writes, kill -9 and serve on SQLite, each printing a figure table.

    python3 scripts/reliability.py [SECTION ...] [--root DIR] [--backends sqlite,postgres] [counts]

SECTION is one or more of fuzz, writers, reads, kill, serve (default: all). --root DIR runs
another checkout's code (its `adapters`, `domain`, `projections`; the CLI as
`python3 -m adapters.cli` with PYTHONPATH=DIR), so the same harness measures main before and
after a merge. PostgreSQL is CHATRECORD_TEST_DATABASE_URL (default
postgresql://postgres@127.0.0.1:5432/test); each section works in a fresh schema it drops at the
end, SQLite in a temp folder. Loopback only; every count is bounded and every wait has a timeout.

- fuzz: scripts/fuzz_input.py --keep-going on each backend (--fuzz-inputs, default 5,000):
  inputs, accepted, refused, crashes (errors outside ChatrecordError), reads failed afterwards.
- writers: --writers processes (8) append lines of the demo's shapes through the API, (a) all
  to one conversation (each writer its own segments, every 5th line a segment every writer sends)
  and (b) to four conversations (each conversation's demo export, cards decided, sent by two
  writers): raw errors (outside ChatrecordError), errors, lines acked, events stored against a
  sequential ingest of the same lines into a fresh store: lost, doubled.
- reads: one writer process appends one conversation's demo export line by line while --readers
  processes (3) read `turn_input`; every distinct read is compared with the latest turn of each
  prefix of the final log (`replay_turns` over events[:k]): reads, distinct, mismatches.
- kill: `ingest --batch-lines 20` of a long file killed with SIGKILL at random points
  (--kill-rounds, 5), then run to the end: events stored against a fresh ingest (lost, doubled),
  `verify` exit status, read models equal to the fold (`replay(...).differs` false and
  turn_input equal to the fresh store's); then `rebuild --rules 2026-11-01` killed the same way:
  the live turn inputs unchanged, the next rebuild exits 0.
- serve: scripts/bench_http.py of the checkout (8 clients x 500 lines, SQLite, one server):
  its http lines (errors, 503 retries, p50/p99).

Exit status 1 when any figure that must be 0 is not.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if "--root" in sys.argv else HERE
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import psycopg  # noqa: E402

import adapters  # noqa: E402,F401  (ROOT's package, before bench_ingest puts HERE first)
import projections  # noqa: E402,F401  (ROOT's too, before the scripts' folder comes first)
from adapters.api import Chatrecord  # noqa: E402
from adapters.bootstrap import open_store  # noqa: E402
from domain.errors import ChatrecordError  # noqa: E402

sys.path.insert(1, str(HERE / "scripts"))
from bench_http import cpu_model, load  # noqa: E402  (the machine facts every benchmark prints)
from bench_ingest import demo_export  # noqa: E402

sys.path[:] = [p for p in sys.path if p != str(HERE)] if ROOT != HERE else sys.path

PG_URL = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"
AT = "2026-10-28T09:00:00Z"
STEP = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
FAILED: list[str] = []


# ---------------------------------------------------------------- helpers


def table(title: str, header: list[str], rows: list[list[object]]) -> None:
    print(f"\n{title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in row) + " |")
    print(flush=True)


def must_be_zero(what: str, value: int) -> int:
    if value:
        FAILED.append(f"{what}: {value}")
    return value


@contextmanager
def fresh_store(backend: str, folder: Path) -> Iterator[dict[str, str]]:
    """Settings of an empty store: a new SQLite file, or a new PostgreSQL schema dropped after."""
    if backend == "sqlite":
        yield {"CHATRECORD_DB": str(folder / f"{uuid.uuid4().hex}.sqlite")}
        return
    schema = f"reliab_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield {"CHATRECORD_DATABASE_URL": f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema={schema}"}
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def cli_env(settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATRECORD_")}
    env.update(settings, PYTHONPATH=str(ROOT))
    return env


def cli(settings: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=ROOT,
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def chat(settings: dict[str, str]) -> Chatrecord:
    return Chatrecord(open_store(settings))


def event_counts(settings: dict[str, str], conversations: list[str]) -> dict[str, int]:
    c = chat(settings)
    try:
        out = {}
        for conv in conversations:
            try:
                out[conv] = len(c.events(conv))
            except ChatrecordError:
                out[conv] = 0
        return out
    finally:
        c.close()


def conversations_of(lines: list[bytes]) -> list[str]:
    return sorted({orjson.loads(raw)["conversation"] for raw in lines})


def reference_counts(lines: list[bytes], folder: Path) -> dict[str, int]:
    """Events per conversation after a sequential ingest of `lines` into a fresh SQLite store."""
    with fresh_store("sqlite", folder) as settings:
        c = chat(settings)
        try:
            c.ingest(lines, "reference")
        finally:
            c.close()
        return event_counts(settings, conversations_of(lines))


# ---------------------------------------------------------------- fuzz


def fuzz(backends: list[str], inputs: int) -> None:
    rows = []
    for backend in backends:
        started = time.perf_counter()
        run = subprocess.run(
            [
                sys.executable,
                str(HERE / "scripts" / "fuzz_input.py"),
                str(inputs),
                "--keep-going",
                "--root",
                str(ROOT),
                "--backend",
                backend,
            ],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        last = [t for t in run.stdout.splitlines() if t.startswith("inputs: ")]
        m = re.search(
            r"inputs: (\d+), accepted: (\d+), refused: (\d+), crashes: (\d+), reads failed afterwards: (\d+)",
            last[-1] if last else "",
        )
        if not m:
            print(f"fuzz on {backend}: no figures\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
            FAILED.append(f"fuzz {backend}: no figures")
            continue
        n = [int(x) for x in m.groups()]
        must_be_zero(f"fuzz {backend} crashes", n[3])
        must_be_zero(f"fuzz {backend} reads failed", n[4])
        rows.append([backend, *n, f"{time.perf_counter() - started:.0f} s"])
        for text in run.stdout.splitlines():
            if text.startswith(("  crash: ", "  unreadable: ")):
                print(f"  {backend}{text}")
    table(
        "fuzz (scripts/fuzz_input.py --keep-going)",
        ["backend", "inputs", "accepted", "refused", "crashes", "reads failed afterwards", "time"],
        rows,
    )


# ---------------------------------------------------------------- concurrent writers


def _writer(settings: dict[str, str], lines: list[bytes], out: Any) -> None:
    counts = {"acked": 0, "errors": 0, "raw": 0, "retries": 0}
    kinds: dict[str, int] = {}
    c = chat(settings)
    for raw in lines:
        for _attempt in range(20):
            try:
                c.record_lines([raw], "writer")
                counts["acked"] += 1
                break
            except ChatrecordError as error:
                name = type(error).__name__
                if name in ("WriteConflict", "StoreUnusable"):
                    counts["retries"] += 1
                    time.sleep(0.01)
                    continue
                counts["errors"] += 1
                kinds[name] = kinds.get(name, 0) + 1
                break
            except Exception as error:  # noqa: BLE001 - any other failure is a finding, counted by kind
                counts["raw"] += 1
                key = f"{type(error).__name__}: {str(error)[:80]}"
                kinds[key] = kinds.get(key, 0) + 1
                break
        else:
            counts["errors"] += 1
            kinds["still conflicting after 20 tries"] = kinds.get("still conflicting after 20 tries", 0) + 1
    c.close()
    out.put((counts, kinds))


def run_writers(settings: dict[str, str], setup: list[bytes], work: list[list[bytes]]) -> tuple[dict[str, int], dict[str, int]]:
    if setup:
        c = chat(settings)
        c.ingest(setup, "setup")
        c.close()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(settings, lines, out)) for lines in work]
    for p in procs:
        p.start()
    total = {"acked": 0, "errors": 0, "raw": 0, "retries": 0}
    kinds: dict[str, int] = {}
    for _ in procs:
        counts, k = out.get(timeout=900)
        for key, v in counts.items():
            total[key] += v
        for key, v in k.items():
            kinds[key] = kinds.get(key, 0) + v
    for p in procs:
        p.join(timeout=60)
    return total, kinds


def seg(conversation: str, name: str) -> bytes:
    return orjson.dumps(
        {
            "type": "segment_returned",
            "conversation": conversation,
            "at": AT,
            "segment": name,
            "run": name,
            "trigger": "turn",
            "outcome": "completed",
            "answer": "ok",
            "steps": [STEP, STEP],
            "pending": [],
        }
    )


def writers(backends: list[str], n: int, lines: int, folder: Path) -> None:
    rows = []
    for backend in backends:
        for scenario in ("1 conversation", "4 conversations"):
            tag = uuid.uuid4().hex[:6]
            if scenario == "1 conversation":
                conv = f"w1-{tag}"
                setup = [
                    orjson.dumps({"type": "conversation_started", "conversation": conv, "at": AT, "kind": "chat", "owner": 7}),
                    orjson.dumps({"type": "user_message", "conversation": conv, "at": AT, "message": 1, "text": "x", "page": 1}),
                ]
                work = [
                    [seg(conv, f"shared-{i}") if i % 5 == 0 else seg(conv, f"w{w}-{i}") for i in range(lines)] for w in range(n)
                ]
            else:
                export = demo_export(lines * 2, 4)
                per = {c: [raw for raw in export if orjson.loads(raw)["conversation"] == c] for c in conversations_of(export)}
                names = sorted(per)
                setup = []
                work = [per[names[w % len(names)]] for w in range(n)]  # each conversation sent by n/4 writers
            every = setup + [raw for lines_ in work for raw in lines_]
            unique = list(dict.fromkeys(every))
            expected = reference_counts(setup + [raw for raw in unique if raw not in setup], folder)
            with fresh_store(backend, folder) as settings:
                started = time.perf_counter()
                total, kinds = run_writers(settings, setup, work)
                stored = event_counts(settings, sorted(expected))
            exp, got = sum(expected.values()), sum(stored.values())
            lost = sum(max(0, expected[c] - stored[c]) for c in expected)
            doubled = sum(max(0, stored[c] - expected[c]) for c in expected)
            must_be_zero(f"writers {backend} {scenario} raw errors", total["raw"])
            must_be_zero(f"writers {backend} {scenario} lost", lost)
            must_be_zero(f"writers {backend} {scenario} doubled", doubled)
            must_be_zero(f"writers {backend} {scenario} errors", total["errors"])
            rows.append(
                [
                    backend,
                    scenario,
                    sum(len(w) for w in work),
                    total["raw"],
                    total["errors"],
                    total["retries"],
                    total["acked"],
                    exp,
                    got,
                    lost,
                    doubled,
                    f"{time.perf_counter() - started:.0f} s",
                ]
            )
            for key, v in sorted(kinds.items()):
                print(f"  writers {backend} {scenario}: {key}: {v}")
    table(
        f"concurrent writers ({n} processes, the API's record_lines, one line a call)",
        [
            "backend",
            "scenario",
            "lines sent",
            "raw errors",
            "errors",
            "conflict retries",
            "lines acked",
            "events expected",
            "events stored",
            "lost",
            "doubled",
            "time",
        ],
        rows,
    )


# ---------------------------------------------------------------- reads during writes


def _reader(settings: dict[str, str], conv: str, stop: Any, out: Any) -> None:
    seen: dict[bytes, int] = {}
    errors: dict[str, int] = {}
    c = chat(settings)
    reads = 0
    while not stop.is_set():
        try:
            got = orjson.dumps(c.turn_input(conv).to_json())
            seen[got] = seen.get(got, 0) + 1
            c.turn_notes(conv)
        except ChatrecordError as error:  # no turn yet, unknown conversation before its first line
            key = type(error).__name__
            errors[key] = errors.get(key, 0) + 1
        except Exception as error:  # noqa: BLE001 - any other failure is a finding, counted by kind
            key = f"raw {type(error).__name__}: {str(error)[:80]}"
            errors[key] = errors.get(key, 0) + 1
        reads += 1
    c.close()
    out.put((reads, seen, errors))


def _append(settings: dict[str, str], lines: list[bytes]) -> None:
    c = chat(settings)
    for raw in lines:
        c.record_lines([raw], "writer")
    c.close()


def reads(backends: list[str], readers: int, lines: int, folder: Path) -> None:
    from projections.turn import replay_turns

    rows = []
    for backend in backends:
        export = demo_export(lines, 1)
        conv = orjson.loads(export[0])["conversation"]
        with fresh_store(backend, folder) as settings:
            ctx = mp.get_context("spawn")
            stop, out = ctx.Event(), ctx.Queue()
            procs = [ctx.Process(target=_reader, args=(settings, conv, stop, out)) for _ in range(readers)]
            for p in procs:
                p.start()
            time.sleep(1.0)
            writer = ctx.Process(target=_append, args=(settings, export))
            started = time.perf_counter()
            writer.start()
            writer.join(timeout=900)
            stop.set()
            results = [out.get(timeout=120) for _ in procs]
            for p in procs:
                p.join(timeout=60)
            c = chat(settings)
            events = c.events(conv)
            rule_set = c.active_rules()
            c.close()
        valid = set()
        for k in range(1, len(events) + 1):
            turns = replay_turns(events[:k], rule_set)
            if turns:
                valid.add(orjson.dumps(turns[-1].to_json()))
        total = sum(r[0] for r in results)
        seen: dict[bytes, int] = {}
        errors: dict[str, int] = {}
        for _, s, e in results:
            for key, v in s.items():
                seen[key] = seen.get(key, 0) + v
            for key, v in e.items():
                errors[key] = errors.get(key, 0) + v
        bad = {key: v for key, v in seen.items() if key not in valid}
        raw = sum(v for key, v in errors.items() if key.startswith("raw "))
        must_be_zero(f"reads {backend} mismatches", sum(bad.values()))
        must_be_zero(f"reads {backend} raw errors", raw)
        rows.append(
            [
                backend,
                len(export),
                len(events),
                total,
                sum(seen.values()),
                len(seen),
                len(valid),
                sum(bad.values()),
                len(bad),
                raw,
                f"{time.perf_counter() - started:.0f} s",
            ]
        )
        for key, v in sorted(errors.items()):
            print(f"  reads {backend}: {key}: {v}")
        for key, v in list(bad.items())[:5]:
            print(f"  reads {backend}: a mismatched read ({v}x): {describe_mismatch(key, valid)}")
    table(
        f"reads during writes (1 writer, {readers} reader processes, turn_input and turn_notes)",
        [
            "backend",
            "lines written",
            "events",
            "reads",
            "turns read",
            "distinct turns read",
            "valid turns (prefixes)",
            "mismatched reads",
            "distinct mismatches",
            "raw errors",
            "time",
        ],
        rows,
    )


def describe_mismatch(read: bytes, valid: set[bytes]) -> str:
    """The fields of `read` that differ from the valid turn closest to it (fewest fields differ)."""
    got = orjson.loads(read)

    def differing(turn: dict[str, Any]) -> list[str]:
        keys = sorted(set(got) | set(turn))
        return [k for k in keys if got.get(k) != turn.get(k)]

    def shape(value: object) -> str:
        return f"{len(value)} items" if isinstance(value, (list, dict)) else repr(value)[:60]

    best = min((orjson.loads(v) for v in valid), key=lambda t: len(differing(t)), default={})
    return "; ".join(f"{k}: read {shape(got.get(k))}, nearest valid turn {shape(best.get(k))}" for k in differing(best))


# ---------------------------------------------------------------- kill -9


def _kill_at_random(settings: dict[str, str], args: list[str], rounds: int, span: float, rng: random.Random) -> list[str]:
    outcomes = []
    for _ in range(rounds):
        p = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", *args],
            cwd=ROOT,
            env=cli_env(settings),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        delay = rng.uniform(0.5, max(0.6, span))
        try:
            p.wait(timeout=delay)
            outcomes.append(f"ended before the kill ({p.returncode})")
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
            outcomes.append(f"killed at {delay:.1f} s")
    return outcomes


def kill(backends: list[str], rounds: int, lines: int, folder: Path, seed: int) -> None:
    rng = random.Random(seed)
    rows, rebuild_rows = [], []
    export = demo_export(lines)
    path = folder / "long.jsonl"
    path.write_bytes(b"".join(export))
    expected = reference_counts(export, folder)
    convs = sorted(expected)
    for backend in backends:
        with fresh_store(backend, folder) as settings:
            cli(settings, "init")
            with fresh_store(backend, folder) as timing:
                started = time.perf_counter()
                done = cli(timing, "ingest", str(path), "--batch-lines", "20", timeout=1800)
                span = time.perf_counter() - started
                assert done.returncode == 0, done.stderr
                fresh = chat(timing)
                fresh_turns = {c: orjson.dumps(fresh.turn_input(c).to_json()) for c in convs}
                fresh.close()
            outcomes = _kill_at_random(settings, ["ingest", str(path), "--batch-lines", "20"], rounds, span, rng)
            final = cli(settings, "ingest", str(path), "--batch-lines", "20", timeout=1800)
            stored = event_counts(settings, convs)
            verify = cli(settings, "verify")
            c = chat(settings)
            differs = sum(1 for conv in convs if c.replay(conv).differs)
            unequal = sum(1 for conv in convs if orjson.dumps(c.turn_input(conv).to_json()) != fresh_turns[conv])
            c.close()
            lost = sum(max(0, expected[k] - stored[k]) for k in convs)
            doubled = sum(max(0, stored[k] - expected[k]) for k in convs)
            for what, v in (
                ("lost", lost),
                ("doubled", doubled),
                ("read models differ", differs + unequal),
                ("final ingest exit", final.returncode),
                ("verify exit", verify.returncode),
            ):
                must_be_zero(f"kill ingest {backend} {what}", v)
            rows.append(
                [
                    backend,
                    len(export),
                    f"{span:.1f} s",
                    "; ".join(outcomes),
                    final.returncode,
                    sum(expected.values()),
                    sum(stored.values()),
                    lost,
                    doubled,
                    verify.returncode,
                    differs,
                    unequal,
                ]
            )
            if final.returncode:
                print(f"  final ingest {backend}: {final.stderr[-1500:]}")
            if verify.returncode:
                print(f"  verify {backend}: {(verify.stdout + verify.stderr)[-1500:]}")

            # rebuild killed mid-way
            started = time.perf_counter()
            same = cli(settings, "rebuild", "--rules", "2026-11-02", timeout=1800)
            span = time.perf_counter() - started
            c = chat(settings)
            before = {conv: orjson.dumps(c.turn_input(conv).to_json()) for conv in convs}
            rules_before = c.active_rules()
            c.close()
            outcomes = _kill_at_random(settings, ["rebuild", "--rules", "2026-11-01"], rounds, span, rng)
            c = chat(settings)
            changed = sum(1 for conv in convs if orjson.dumps(c.turn_input(conv).to_json()) != before[conv])
            rules_after = c.active_rules()
            differs_killed = sum(1 for conv in convs if c.replay(conv).differs)  # live tables agree with the log
            c.close()
            after = cli(settings, "rebuild", "--rules", "2026-11-01", timeout=1800)
            c = chat(settings)
            differs = sum(1 for conv in convs if c.replay(conv).differs)
            c.close()
            if rules_after == rules_before:  # no kill came after the switch's commit
                must_be_zero(f"kill rebuild {backend} live turns changed", changed)
            must_be_zero(f"kill rebuild {backend} replay differs after the kills", differs_killed)
            must_be_zero(f"kill rebuild {backend} next rebuild exit", after.returncode)
            must_be_zero(f"kill rebuild {backend} read models differ after", differs)
            rebuild_rows.append(
                [
                    backend,
                    f"{span:.1f} s (exit {same.returncode})",
                    "; ".join(outcomes),
                    f"{rules_before} -> {rules_after}",
                    changed,
                    differs_killed,
                    after.returncode,
                    differs,
                ]
            )
            if after.returncode:
                print(f"  rebuild after kills {backend}: {after.stderr[-1500:]}")
    table(
        f"kill -9 of `ingest --batch-lines 20` ({rounds} rounds, then run to the end)",
        [
            "backend",
            "lines",
            "one whole ingest",
            "kills",
            "final ingest exit",
            "events expected",
            "events stored",
            "lost",
            "doubled",
            "verify exit",
            "replay differs",
            "turn_input != fresh store",
        ],
        rows,
    )
    table(
        f"kill -9 of `rebuild --rules 2026-11-01` ({rounds} rounds), then a whole rebuild",
        [
            "backend",
            "one whole rebuild",
            "kills",
            "live rules before -> after the kills",
            "live turns changed by the kills",
            "replay differs after the kills",
            "next rebuild exit",
            "replay differs after it",
        ],
        rebuild_rows,
    )


# ---------------------------------------------------------------- serve


def serve(clients: int, lines: int, max_seconds: float) -> None:
    script = ROOT / "scripts" / "bench_http.py"
    if not script.exists():
        script = HERE / "scripts" / "bench_http.py"
    run = subprocess.run(
        [
            sys.executable,
            str(script),
            "--backend",
            "sqlite",
            "--clients",
            str(clients),
            "--lines",
            str(lines),
            "--max-seconds",
            str(max_seconds),
        ],
        cwd=ROOT,
        env=cli_env({}),
        capture_output=True,
        text=True,
        timeout=max_seconds * 5 + 300,
    )
    rows = []
    pattern = re.compile(
        r"^\s+(http|api)\s+(.+?)\s+(\d+)/(\d+) lines acked in\s+([\d.]+) s:\s+([\d.]+) req/s, p50\s+([\d.]+) ms, "
        r"p99\s+([\d.]+) ms, retries (\d+), errors (\d+); events acked (\d+), stored (\d+): lost (\d+), doubled (\d+)"
    )
    for text in run.stdout.splitlines():
        m = pattern.match(text)
        if m:
            way, scenario, acked, planned, secs, rps, p50, p99, retries, errors, _ea, _es, lost, doubled = m.groups()
            must_be_zero(f"serve {way} {scenario} errors", int(errors))  # the api way: one Chatrecord, 8 threads
            if way == "http":
                must_be_zero(f"serve {scenario} lost", int(lost))
                must_be_zero(f"serve {scenario} doubled", int(doubled))
                if int(acked) < int(planned):
                    FAILED.append(f"serve {scenario}: {acked}/{planned} acked")
            rows.append([way, scenario, f"{acked}/{planned}", errors, retries, f"{p50} ms", f"{p99} ms", rps, lost, doubled])
    if not rows:
        print(f"serve: no figures\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
        FAILED.append("serve: no figures")
    table(
        f"serve on SQLite ({clients} clients x {lines} lines, scripts/bench_http.py, one server process)",
        ["way", "scenario", "lines acked", "errors", "503s (sent again)", "p50", "p99", "req/s", "lost", "doubled"],
        rows,
    )


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sections", nargs="*", default=["fuzz", "writers", "reads", "kill", "serve"])
    parser.add_argument("--root", default=str(HERE))
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--fuzz-inputs", type=int, default=5000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writer-lines", type=int, default=60, help="Lines each writer sends.")
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--read-lines", type=int, default=120)
    parser.add_argument("--kill-rounds", type=int, default=5)
    parser.add_argument("--kill-lines", type=int, default=3000)
    parser.add_argument("--http-clients", type=int, default=8)
    parser.add_argument("--http-lines", type=int, default=500)
    parser.add_argument("--http-max-seconds", type=float, default=180.0)
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    if not (
        1 <= args.writers <= 32
        and 1 <= args.readers <= 16
        and args.fuzz_inputs <= 50_000
        and args.kill_lines <= 50_000
        and args.kill_rounds <= 50
    ):
        raise SystemExit("counts out of bounds: --writers 1..32, --readers 1..16, --fuzz-inputs/--kill-lines <= 50,000")
    unknown = set(args.sections) - {"fuzz", "writers", "reads", "kill", "serve"}
    if unknown:
        raise SystemExit(f"unknown section(s): {', '.join(sorted(unknown))}")
    backends = args.backends.split(",")
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "--oneline", "-1"], capture_output=True, text=True).stdout.strip()
    print(f"code: {ROOT} ({commit}); machine: {os.cpu_count()} CPUs, {cpu_model()}; load average before: {load()}", flush=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chatrecord-reliab-") as tmp:
        folder = Path(tmp)
        for section in args.sections:
            t0 = time.perf_counter()
            if section == "fuzz":
                fuzz(backends, args.fuzz_inputs)
            elif section == "writers":
                writers(backends, args.writers, args.writer_lines, folder)
            elif section == "reads":
                reads(backends, args.readers, args.read_lines, folder)
            elif section == "kill":
                kill(backends, args.kill_rounds, args.kill_lines, folder, args.seed)
            elif section == "serve":
                serve(args.http_clients, args.http_lines, args.http_max_seconds)
            print(f"({section}: {time.perf_counter() - t0:.0f} s, load average {load()})", flush=True)
    print(f"load average after: {load()}; {time.perf_counter() - started:.0f} s in all")
    if FAILED:
        print("FAILED:\n  " + "\n  ".join(FAILED))
        return 1
    print("every figure that must be 0 is 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
