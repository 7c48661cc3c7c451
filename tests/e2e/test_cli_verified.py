"""A tampered log is never shown as verified (issue 35, item 1), on each backend: a failed
`verify` is stored and shown until a later full verify passes, `timeline -o` recomputes every
hash itself, and after one stored event is changed since the last verify the word "verified"
appears in no output that speaks of it (the file, `audit`, `verify`)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from domain.events import conversation_uuid
from tests.e2e.conftest import DEMO, Run, runner

Tamper = Callable[[bytes, bytes], None]
VERIFIED = re.compile(r"\bverified\b")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Run, Tamper]:
    """The CLI on a store of each backend, and a way to change the demo's event 8 by hand:
    `tamper(old, new)` replaces bytes of its stored state in the database."""
    key = conversation_uuid("conv-demo-seo")
    if request.param == "sqlite":
        path = tmp_path / "store.sqlite"

        def on_sqlite(old: bytes, new: bytes) -> None:
            with sqlite3.connect(path) as conn:
                where = "WHERE originator_id = ? AND originator_version = 8"
                (state,) = conn.execute(f"SELECT state FROM stored_events {where}", (key.hex,)).fetchone()
                conn.execute(f"UPDATE stored_events SET state = ? {where}", (bytes(state).replace(old, new, 1), key.hex))

        return runner(tmp_path, CHATRECORD_DB=str(path)), on_sqlite
    url = request.getfixturevalue("postgres_url")
    schema = request.getfixturevalue("postgres_schema")
    table = sql.Identifier(schema, "conversationstore_events")

    def on_postgres(old: bytes, new: bytes) -> None:
        with psycopg.connect(url) as conn:
            where = sql.SQL("WHERE originator_id = %s AND originator_version = 8")
            row = conn.execute(sql.SQL("SELECT state FROM {} ").format(table) + where, (key,)).fetchone()
            assert row is not None
            changed = bytes(row[0]).replace(old, new, 1)
            conn.execute(sql.SQL("UPDATE {} SET state = %s ").format(table) + where, (changed, key))

    joiner = "&" if "?" in url else "?"
    return runner(tmp_path, CHATRECORD_DATABASE_URL=f"{url}{joiner}schema={schema}"), on_postgres


def test_a_failed_verify_is_shown_by_the_file_until_a_full_verify_passes(store: tuple[Run, Tamper], tmp_path: Path) -> None:
    """The issue's steps: the file said "✔ Chain verified: 20 events … Every hash up to event 20
    was recomputed", exit 0, after `verify` had found event 8 changed."""
    run, tamper = store
    assert run("ingest", DEMO).returncode == 0
    assert run("verify").returncode == 0
    tamper(b'"uid":42}', b'"uid":7}')
    failed = run("verify")

    written = run("timeline", "conv-demo-seo", "-o", tmp_path / "t.html")

    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert (failed.returncode, failed.stdout.splitlines()[-1]) == (1, "1 conversation checked: 0 ok, 1 broken")
    assert written.returncode == 1 and "broken at version 8 (changed)" in written.stderr
    assert 'id="chain-state">✘ Chain broken at event 8 (changed)' in html
    assert VERIFIED.search(html) is None
    tamper(b'"uid":7}', b'"uid":42}')  # put back: a full verify passes, and the file says so again
    passed = run("verify")
    again = run("timeline", "conv-demo-seo", "-o", tmp_path / "t.html")
    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert (passed.returncode, passed.stdout.splitlines()[-1]) == (0, "1 conversation verified: 1 ok, 0 broken")
    assert again.returncode == 0
    assert 'id="chain-state">✔ Chain verified: 20 events' in html
    assert "every hash, from the first event to event 20, was recomputed when this file was written" in html


def test_an_event_changed_after_the_last_verify_is_never_shown_as_verified(store: tuple[Run, Tamper], tmp_path: Path) -> None:
    """No check ran since the change: the file recomputes every hash itself (it started from the
    position the last verify stored, and said verified), and so do `audit` and `verify`."""
    run, tamper = store
    assert run("ingest", DEMO).returncode == 0
    before = run("audit", "conv-demo-seo")
    assert run("verify").returncode == 0
    tamper(b'"uid":42}', b'"uid":7}')

    written = run("timeline", "conv-demo-seo", "-o", tmp_path / "t.html")
    audit = run("audit", "conv-demo-seo")
    rows = json.loads(run("audit", "conv-demo-seo", "--json").stdout)
    verify = run("verify")

    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert before.stdout.splitlines()[-1].startswith("chain: verified, 20 events, head ")
    assert written.returncode == 1 and VERIFIED.search(html) is None
    assert "written: pages:7" in html or "pages:7" in html
    assert audit.returncode == 1 and VERIFIED.search(audit.stdout) is None
    assert audit.stdout.splitlines()[-1].startswith("chain: BROKEN at version 8 (changed)")
    assert [r["version"] for r in rows if r["verified"]] == list(range(1, 8))
    assert verify.returncode == 1 and VERIFIED.search(verify.stdout) is None


def test_a_trace_of_a_broken_chain_is_written_with_a_warning_and_exit_1(store: tuple[Run, Tamper], tmp_path: Path) -> None:
    """`traces show -o` and `export --format otlp` said nothing and exited 0 while `export`
    warned and exited 1 (issue 35, the tester's F9): both now do as `export` does."""
    run, tamper = store
    assert run("ingest", DEMO).returncode == 0
    intact = run("traces", "show", "conv-demo-seo", "-o", tmp_path / "ok.json")
    tamper(b'"uid":42}', b'"uid":7}')

    shown = run("traces", "show", "conv-demo-seo", "-o", tmp_path / "tr.json")
    exported = run("export", "conv-demo-seo", "--format", "otlp", "-o", tmp_path / "ex.json")

    assert (intact.returncode, "warning" in intact.stderr) == (0, False)
    for done, name in ((shown, "tr.json"), (exported, "ex.json")):
        assert done.returncode == 1
        assert (
            "warning: the hash chain of conversation conv-demo-seo does not verify, broken at version 8 (changed)" in done.stderr
        )
        assert json.loads((tmp_path / name).read_text(encoding="utf-8"))["resourceSpans"]
