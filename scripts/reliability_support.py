"""The reliability harness's set-up and helpers (`scripts/reliability.py`): which checkout runs
(--root), the stores it makes, the CLI and API it drives, the figure tables and the figures that
must be 0 (`FAILED`)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
from bench_http import cpu_model, load  # noqa: E402, F401 - the machine facts every benchmark prints (reliability.py)
from bench_ingest import demo_export  # noqa: E402, F401 - the demo's export (the sections)

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
