"""A cut newest event is never shown as verified, and no look clears a found cut (issue 35,
the tester's F3), on each backend: every look, full or not, that finds the chain ending below a
version the store once held (its verified position, or a stored `deleted`/`cut_off` break)
says `cut_off` at that version and keeps it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from domain.events import conversation_uuid
from tests.e2e.conftest import DATA, DEMO, Run, runner

Cut = Callable[[], None]
Broken = Callable[[], list[tuple[int, str]]]
CUT_LINE = "conv-demo-seo: broken at version 20 (cut_off): "


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Run, Cut, Broken]:
    """The CLI on a store of each backend; `cut()` deletes the demo's event 20 and its chain row
    by hand; `broken()` reads the demo's stored breaks as (version, problem)."""
    key = conversation_uuid("conv-demo-seo")
    if request.param == "sqlite":
        path = tmp_path / "store.sqlite"

        def cut_sqlite() -> None:
            with sqlite3.connect(path) as conn:
                for table in ("stored_events", "chatrecord_chain"):
                    conn.execute(f"DELETE FROM {table} WHERE originator_id = ? AND originator_version = 20", (key.hex,))

        def broken_sqlite() -> list[tuple[int, str]]:
            with sqlite3.connect(path) as conn:
                where = "WHERE originator_id = ?"
                return list(conn.execute(f"SELECT version, problem FROM chatrecord_chain_broken {where}", (key.hex,)))

        return runner(tmp_path, CHATRECORD_DB=str(path)), cut_sqlite, broken_sqlite
    url = request.getfixturevalue("postgres_url")
    schema = request.getfixturevalue("postgres_schema")

    def cut_postgres() -> None:
        with psycopg.connect(url) as conn:
            for table in ("conversationstore_events", "chatrecord_chain"):
                where = sql.SQL(" WHERE originator_id = %s AND originator_version = 20")
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, table)) + where, (key,))

    def broken_postgres() -> list[tuple[int, str]]:
        with psycopg.connect(url) as conn:
            query = sql.SQL("SELECT version, problem FROM {} WHERE originator_id = %s")
            return [tuple(r) for r in conn.execute(query.format(sql.Identifier(schema, "chatrecord_chain_broken")), (key,))]

    joiner = "&" if "?" in url else "?"
    return runner(tmp_path, CHATRECORD_DATABASE_URL=f"{url}{joiner}schema={schema}"), cut_postgres, broken_postgres


def test_a_found_cut_is_not_cleared_by_a_plain_audit(store: tuple[Run, Cut, Broken], tmp_path: Path) -> None:
    """The tester's steps: `audit` said "chain: verified, 19 events", exit 0, after
    `verify --against` had found the cut, cleared the stored break and stored 19 as verified."""
    run, cut, broken = store
    assert run("ingest", DEMO, DATA / "behalten_tour.jsonl").returncode == 0
    (tmp_path / "heads.txt").write_text(run("verify", "--heads").stdout)
    assert run("verify").returncode == 0
    cut()
    against = run("verify", "--against", "heads.txt")
    audit = run("audit", "conv-demo-seo")
    again = run("audit", "conv-demo-seo")
    full = run("verify", "conv-demo-seo")
    assert (against.returncode, against.stdout.splitlines()[1].startswith(CUT_LINE)) == (1, True)
    assert audit.returncode == 1 and audit.stdout.splitlines()[-1].startswith("chain: BROKEN at version 20 (cut_off)")
    assert again.returncode == 1 and again.stdout.splitlines()[-1].startswith("chain: BROKEN at version 20 (cut_off)")
    assert (full.returncode, full.stdout.splitlines()[0].startswith(CUT_LINE + "the heads file records version 20 (hash ")) == (
        1,
        True,
    )  # the stored cut as the heads file's look found it
    assert full.stdout.splitlines()[0].endswith("); the store ends at version 19")
    assert broken() == [(20, "cut_off")]


def test_a_fresh_cut_is_shown_by_every_look(store: tuple[Run, Cut, Broken], tmp_path: Path) -> None:
    """The tester's fresh copy: verify, audit and timeline -o all said verified, 19 events,
    though the store held a verified position at 20 and its guard had stored 'deleted'."""
    run, cut, broken = store
    assert run("ingest", DEMO).returncode == 0
    assert run("verify").returncode == 0
    cut()
    assert broken() == [(20, "deleted")]  # the guard's
    full = run("verify")
    audit = run("audit", "conv-demo-seo")
    written = run("timeline", "conv-demo-seo", "-o", tmp_path / "t.html")
    html = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert (full.returncode, full.stdout.splitlines()[0].startswith(CUT_LINE)) == (1, True)
    assert audit.returncode == 1 and audit.stdout.splitlines()[-1].startswith("chain: BROKEN at version 20 (cut_off)")
    assert written.returncode == 1 and "broken at version 20 (cut_off)" in written.stderr
    assert "Chain verified" not in html
    assert broken() == [(20, "cut_off")]


def test_replay_of_a_cut_store_advises_verify_not_rebuild(store: tuple[Run, Cut, Broken]) -> None:
    """A rebuild would throw away the read models that still remember the cut event."""
    run, cut, _ = store
    assert run("ingest", DEMO).returncode == 0
    cut()
    done = run("replay", "--conversation", "conv-demo-seo")
    assert "broken at version 20 (cut_off)" in done.stderr
    assert "Run: chatrecord verify" in done.stderr and "chatrecord rebuild" not in done.stderr.replace("do not rebuild", "")


def test_a_wrong_heads_file_says_what_it_claimed_and_a_right_one_clears_its_cut(
    store: tuple[Run, Cut, Broken], tmp_path: Path
) -> None:
    """Found by a fresh user: a heads file claiming version 25 marked a healthy conversation
    broken for good, "version 21 was stored", which nothing was, and a line for a conversation
    the store does not hold stored a break for it. The cut is said as the file claimed it, a line
    of a conversation the store lacks stores nothing, and a heads file that matches the chain
    clears a cut a heads file claimed; a plain verify keeps it."""
    run, _, broken = store
    assert run("ingest", DEMO).returncode == 0
    (tmp_path / "good.txt").write_text(run("verify", "--heads").stdout)
    (tmp_path / "bad.txt").write_text(f"conv-demo-seo 25 {'0' * 64}\nconv-ghost 5 {'1' * 64}\n")
    bad = run("verify", "--against", "bad.txt")
    claim = f"the heads file records version 25 (hash {'0' * 64}); the store ends at version 20"
    assert (bad.returncode, bad.stdout.splitlines()[:2]) == (
        1,
        [
            f"conv-demo-seo: broken at version 21 (cut_off): {claim}",
            f"conv-ghost: broken at version 1 (cut_off): not in the store: the heads file records version 5 (hash {'1' * 64}); "
            "the store holds no event of it",
        ],
    )
    plain = run("verify")
    assert (plain.returncode, plain.stdout.splitlines()[0]) == (1, f"conv-demo-seo: broken at version 21 (cut_off): {claim}")
    assert broken() == [(21, "cut_off")]
    good = run("verify", "--against", "good.txt")
    assert (good.returncode, good.stdout.splitlines()[0]) == (0, "conv-demo-seo: ok, 20 events")
    assert broken() == []
    assert run("verify").returncode == 0
