"""The reliability harness's `writers` and `reads` sections (`scripts/reliability.py`): concurrent
writer processes on one and on four conversations, and readers of `turn_input` during writes."""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from reliability_support import (
    AT,
    STEP,
    chat,
    conversations_of,
    demo_export,
    event_counts,
    fresh_store,
    must_be_zero,
    reference_counts,
    table,
)

from domain.errors import ChatrecordError

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
