"""Helpers of `scripts/bench_flat.py`: the library's bare save, where each backend's stores live,
timing, reporting and profiling; the input lines and writers are in bench_flat_lines.py (named
here too, as the benchmarks import them). Not a test."""

from __future__ import annotations

import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = next((p for p in (ROOT.parent / "shared" / "anchors", Path("/work/shared/anchors")) if p.exists()), None)
sys.path.insert(0, str(ROOT))
if ANCHORS is not None:
    sys.path.insert(0, str(ANCHORS))

import psycopg  # noqa: E402
from bench_flat_lines import (  # noqa: E402, F401 - the benchmarks import them from here
    AT,
    DEMO,
    FIXTURE,
    TOUR,
    MixWriter,
    Writer,
    bulk_fill,
    segment_lines,
    started,
    tour_segments,
)
from eventsourcing.application import Application  # noqa: E402
from eventsourcing.domain import Aggregate, event  # noqa: E402

from adapters.backends.settings import postgres_env, sqlite_env  # noqa: E402

PG_URL = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"
# ------------------------------------------------------------------ the library's bare save


class Counter(Aggregate):
    """A trivial aggregate: one small event per save."""

    @event("Ticked")
    def tick(self, n: int) -> None:
        self.n = n


LIBRARY_MODULES = {
    "adapters.backends.postgres:PostgresFactory": "eventsourcing.postgres",
    "adapters.backends.sqlite:SQLiteFactory": "eventsourcing.sqlite",
}
"""The library's own persistence module for each of ours: the bare save runs on the library's
recorder (no hash chain, no append function, no history index), not on chatrecord's."""


def bare_saver(env: dict[str, str]) -> Callable[[int], None]:
    """Returns `save(i)`: one event of a one-field aggregate saved by an eventsourcing
    `Application` on the library's own recorder, in the database `env` names."""
    app = Application(env={**env, "PERSISTENCE_MODULE": LIBRARY_MODULES[env["PERSISTENCE_MODULE"]]})
    counter = Counter()
    app.save(counter)

    def save(i: int) -> None:
        counter.tick(i)
        app.save(counter)

    return save


# ------------------------------------------------------------------ backends


class Backend:
    """Where one backend's stores live: `env(name)` gives a fresh store env (a schema on
    PostgreSQL, a file on SQLite)."""

    name = ""

    def env(self, part: str) -> dict[str, str]:
        raise NotImplementedError

    def storage(self, env: dict[str, str]) -> tuple[int, dict[str, int]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Postgres(Backend):
    name = "PostgreSQL"

    def __init__(self) -> None:
        self.prefix = f"bench_flat_{uuid.uuid4().hex[:8]}"
        self.admin = psycopg.connect(PG_URL, autocommit=True)
        self.schemas: list[str] = []

    def env(self, part: str) -> dict[str, str]:
        schema = f"{self.prefix}_{part}"
        self.admin.execute(f"CREATE SCHEMA {schema}")
        self.schemas.append(schema)
        return postgres_env(f"{PG_URL}?schema={schema}")

    def storage(self, env: dict[str, str]) -> tuple[int, dict[str, int]]:
        """VACUUMs the schema's tables (plain VACUUM), then returns their total bytes
        (pg_total_relation_size: heap, TOAST, indexes) and the bytes per table."""
        schema = env["POSTGRES_SCHEMA"]
        tables = [r[0] for r in self.admin.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()]
        for table in tables:
            self.admin.execute(f'VACUUM "{schema}"."{table}"')
        sizes = {
            t: self.admin.execute("SELECT pg_total_relation_size(%s::regclass)", (f'"{schema}"."{t}"',)).fetchone()[0]
            for t in tables
        }
        return sum(sizes.values()), sizes

    def close(self) -> None:
        for schema in self.schemas:
            self.admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        self.admin.close()


class SQLite(Backend):
    name = "SQLite"

    def __init__(self) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="bench_flat_")

    def env(self, part: str) -> dict[str, str]:
        return sqlite_env(Path(self.folder.name) / f"{part}.sqlite")

    def storage(self, env: dict[str, str]) -> tuple[int, dict[str, int]]:
        """VACUUMs the file, then returns its size (one entry: the file)."""
        import sqlite3

        path = env["SQLITE_DBNAME"]
        with sqlite3.connect(path) as conn:
            conn.execute("VACUUM")
        size = os.path.getsize(path)
        return size, {"file": size}

    def close(self) -> None:
        self.folder.cleanup()


# ------------------------------------------------------------------ timing and reporting


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_time(fn: Callable[[], object], calls: int) -> float:
    return statistics.median(timed(fn) for _ in range(calls))


class Figures:
    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = {}
        self.units: dict[str, str] = {}

    def add(self, name: str, value: float, unit: str) -> float:
        self.samples.setdefault(name, []).append(value)
        self.units[name] = unit
        return value

    def median(self, name: str) -> float:
        return statistics.median(self.samples[name])

    def print(self, title: str) -> None:
        print(f"\n### {title}\n")
        print("| figure | median | min | max | runs | unit |")
        print("|---|---:|---:|---:|---:|---|")
        for name, xs in self.samples.items():
            print(
                f"| {name} | {fmt(statistics.median(xs))} | {fmt(min(xs))} | {fmt(max(xs))} | {len(xs)} | {self.units[name]} |",
                flush=True,
            )


def fmt(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.3f}"


TARGETS: list[tuple[str, str, str, bool]] = []


def target(backend: str, what: str, value: float, goal: str, met: bool) -> None:
    TARGETS.append((backend, what, f"{fmt(value)} ({goal})", met))


def say(text: str) -> None:
    print(text, flush=True)


def rss_kb() -> int:
    """Returns this process's resident set size now (VmRSS), in KB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def tree_memory_kb() -> int:
    """Returns the memory of this process and its child processes (a rebuild's workers) now,
    in KB: the sum of their proportional set sizes (Pss of /proc/PID/smaps_rollup: a page that
    a forked worker shares with its parent counts half in each, so the sum is what they hold
    together; summed RSS would count it twice)."""
    pids = ["self"]
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.extend((task / "children").read_text().split())
        except OSError:  # the thread ended meanwhile (a sampler's, a pool's)
            continue
    total = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:  # ended meanwhile
            continue
        total += next((int(line.split()[1]) for line in lines if line.startswith("Pss:")), 0)
    return total


def _waits(stats: pstats.Stats) -> tuple[int, float]:
    """Returns how many times the profiled code waited on the server, and the seconds it
    waited: the calls of psycopg's `Connection.wait` (psycopg/connection.py), one per
    statement, fetch, commit or pipeline sync that waits for the server's answer."""
    calls, seconds = 0, 0.0
    for (path, _, name), (_, ncalls, _tot, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if name == "wait" and path.endswith(("psycopg/connection.py", "psycopg\\connection.py")):
            calls, seconds = calls + ncalls, seconds + cum
    return calls, seconds


class Counted:
    """Counts, over the calls of `fn` under cProfile, the SQL statements sent (`_statements`:
    the calls of psycopg's and sqlite3's execute and executemany) and the waits on the
    server (`_waits`), and the share of the time spent waiting."""

    def __init__(self, fn: Callable[[], object], calls: int) -> None:
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        for _ in range(calls):
            fn()
        prof.disable()
        self.seconds = time.perf_counter() - t0
        stats = pstats.Stats(prof)
        self.statements = _statements(stats)
        self.waits, self.waited = _waits(stats)


def _statements(stats: pstats.Stats) -> int:
    """Returns how many SQL statements the profiled code sent (psycopg or sqlite3 execute*)."""
    total = 0
    for (path, _, name), (_, calls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
        if (path.endswith("psycopg/cursor.py") and name in ("execute", "executemany")) or (
            "sqlite3.Cursor" in name and ("'execute'" in name or "'executemany'" in name)
        ):
            total += calls
    return total


def _profile(title: str, fn: Callable[[], object], calls: int, unit: str = "call") -> None:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    elapsed = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    print(
        f"\n{title}: {1000 * elapsed / calls:.2f} ms per {unit} under cProfile, "
        f"{_statements(stats) / calls:.1f} SQL statements per {unit}; most own time:"
    )
    print_top(stats, calls, 12)
    sys.stdout.flush()


def print_top(stats: pstats.Stats, calls: int, top: int, by: int = 2) -> None:
    """Prints the `top` functions of `stats` by own time (`by` 2) or cumulative time (`by` 3),
    each with its own and cumulative ms and its calls per one of `calls` calls."""
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][by])[:top]  # type: ignore[attr-defined]
    for (path, line, name), (_, ncalls, tottime, cumtime, _) in rows:
        where = "/".join(Path(path).parts[-2:]) if path != "~" else ""
        print(
            f"  {1000 * tottime / calls:8.3f} ms own {1000 * cumtime / calls:8.3f} ms cum "
            f"{ncalls / calls:7.1f} calls  {where}:{line} {name}"
        )


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    import platform
    from importlib.metadata import version

    with psycopg.connect(PG_URL) as conn:
        server = conn.execute("SHOW server_version").fetchone()[0].split()[0]
        settings = {
            s: conn.execute(f"SHOW {s}").fetchone()[0] for s in ("synchronous_commit", "fsync", "shared_buffers", "autovacuum")
        }
    return (
        f"nproc {os.cpu_count()}, {cpu}, Python {platform.python_version()}, eventsourcing "
        f"{version('eventsourcing')}, psycopg {version('psycopg')}, PostgreSQL {server} "
        + ", ".join(f"{k}={v}" for k, v in settings.items())
    )


def ensure_anchors_database() -> None:
    """Creates the database the anchors measure in (ANCHORS_DSN, default `anchors` on the test
    server) where it is missing, as `../shared/anchors/README.md` asks."""
    from psycopg.conninfo import conninfo_to_dict

    dsn = os.environ.get("ANCHORS_DSN", "postgresql://postgres@127.0.0.1:5432/anchors")
    name = conninfo_to_dict(dsn).get("dbname", "anchors")
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


@contextmanager
def backend(name: str) -> Iterator[Backend]:
    b: Backend = Postgres() if name == "pg" else SQLite()
    try:
        yield b
    finally:
        b.close()
