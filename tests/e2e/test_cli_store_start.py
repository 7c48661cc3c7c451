"""Starting on a store: `chatrecord init`, processes that start at once, a read-only
PostgreSQL database, a database the server refuses, one very large segment (issue 8, items 2,
6 and 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from tests.e2e.conftest import DEMO, Run, cli_env, runner


def test_init_creates_the_store_once_then_changes_nothing(store_run: Run) -> None:
    first, again = store_run("init"), store_run("init")

    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert first.stdout.startswith("created the store: ")
    assert again.stdout.startswith("the store exists already: ")
    assert store_run("ingest", DEMO).stdout == "demo_seo_tour.jsonl: 20 events appended, 0 lines already recorded\n"


def big_segment(path: Path, steps: int) -> Path:
    c, at = "big", "2026-10-28T09:00:00Z"
    step = {"kind": "tool", "round": 1, "durationMs": 1.5, "toolName": "t", "toolIsError": False}
    lines = [
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
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    return path


def test_a_segment_of_50000_steps_is_ingested(store_run: Run, tmp_path: Path) -> None:
    # on PostgreSQL this hung forever in psycopg's pipeline mode, holding the events table
    done = store_run("ingest", big_segment(tmp_path / "big.jsonl", 50_000))

    assert (done.returncode, done.stdout, done.stderr) == (0, "big.jsonl: 3 events appended, 0 lines already recorded\n", "")
    audit = store_run("audit", "big", "--json")
    assert audit.returncode == 0, audit.stderr
    assert [row["kind"] for row in orjson.loads(audit.stdout)][-1] == "segment"


def test_ingests_started_at_once_on_a_fresh_schema_all_succeed(postgres_url: str, postgres_schema: str, tmp_path: Path) -> None:
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={postgres_schema}"
    files = []
    for n in range(6):
        files.append(tmp_path / f"c{n}.jsonl")
        files[-1].write_bytes(DEMO.read_bytes().replace(b'"conv-demo-seo"', f'"conv-{n}"'.encode()))
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", "ingest", str(f)],
            cwd=tmp_path,
            env=cli_env(CHATRECORD_DATABASE_URL=url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in files
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in processes]

    assert results == [(0, f"c{n}.jsonl: 20 events appended, 0 lines already recorded\n", "") for n in range(6)]


READ_ONLY = "options=-c%20default_transaction_read_only%3Don"
"""The URL parameter that makes every transaction of a connection read-only, as on a hot standby
(the server refuses each write with ReadOnlySqlTransaction, as for `ALTER DATABASE … SET
default_transaction_read_only = on`, without a database of the test's own, whose DROP DATABASE
waits for a checkpoint of the whole server)."""


def test_a_read_only_database_serves_the_reading_commands(postgres_url: str, postgres_schema: str, tmp_path: Path) -> None:
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={postgres_schema}"
    run = runner(tmp_path, CHATRECORD_DATABASE_URL=url)
    assert run("ingest", DEMO).returncode == 0
    replay = run("replay", "--conversation", "conv-demo-seo", "--json")  # brings the read models up to date
    audit = run("audit", "conv-demo-seo", "--json")
    run = runner(tmp_path, CHATRECORD_DATABASE_URL=f"{url}&{READ_ONLY}")

    assert run("audit", "conv-demo-seo", "--json").stdout == audit.stdout
    again = run("replay", "--conversation", "conv-demo-seo", "--json")
    assert (again.returncode, again.stdout, again.stderr) == (0, replay.stdout, "")
    refused = run("ingest", big_segment(tmp_path / "new.jsonl", 1))
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: the store (PostgreSQL ") and refused.stderr.count("\n") == 1
    assert "is read-only (cannot execute INSERT in a read-only transaction)" in refused.stderr


def test_a_missing_database_is_named_by_the_server(postgres_url: str, tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DATABASE_URL=postgres_url.rsplit("/", 1)[0] + "/no_such_db")
    failed = run("audit", "conv-demo-seo")

    assert failed.returncode == 1 and failed.stderr.count("\n") == 1
    assert 'FATAL: database "no_such_db" does not exist' in failed.stderr
    assert "couldn't get a connection" not in failed.stderr
