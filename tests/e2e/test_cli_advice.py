"""Issue 20, item 12: advice that points the right way. On a store whose chain is broken,
`replay --conversation` points to verify (not to rebuild, which would fold the changed events
in) and `audit` exits 1, as verify does, --json or not; a refused PostgreSQL connection reads as
sentences; a decision for a card left undecided says so, in the CLI and over HTTP."""

from __future__ import annotations

import json
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from adapters.api import Chatrecord
from adapters.backends import one_line
from adapters.bootstrap import open_store
from adapters.http.app import HttpSettings, create_app
from tests.e2e.conftest import DEMO, Run, runner
from tests.http.conftest import free_port

with warnings.catch_warnings():  # starlette's TestClient warns, at import, that it prefers httpx2
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

DEMO_ID = "5d91b7e3ea14590fbbd7a5f872bc7e3d"  # conversation_uuid("conv-demo-seo").hex
AT = "2026-10-28T09:00:00Z"
PENDING = [{"toolName": "update_page_metadata", "table": "pages", "uid": 42, "fields": ["title"]}]


@pytest.fixture(params=["sqlite", "postgres"])
def tampering(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Run, Callable[[], None]]:
    """Returns a CLI runner on each backend and `tamper()`, which changes the stored bytes of
    the demo's event 8 behind the store's back (a page id 42 made 7)."""
    if request.param == "sqlite":
        path = tmp_path / "store.sqlite"

        def tamper() -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(
                    "UPDATE stored_events SET state = replace(state, '\"uid\":42}', '\"uid\":7}') "
                    "WHERE originator_id = ? AND originator_version = 8",
                    (DEMO_ID,),
                )

        return runner(tmp_path, CHATRECORD_DB=str(path)), tamper
    url = request.getfixturevalue("postgres_url")
    schema = request.getfixturevalue("postgres_schema")

    def tamper() -> None:
        with psycopg.connect(url) as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {} SET state = convert_to(replace(convert_from(state, 'UTF8'), %s, %s), 'UTF8') "
                    "WHERE originator_id = %s AND originator_version = 8"
                ).format(sql.Identifier(schema, "conversationstore_events")),
                ('"uid":42}', '"uid":7}', DEMO_ID),
            )

    return runner(tmp_path, CHATRECORD_DATABASE_URL=f"{url}{'&' if '?' in url else '?'}schema={schema}"), tamper


def test_replay_of_a_broken_chain_points_to_verify_not_to_rebuild(tampering: tuple[Run, Callable[[], None]]) -> None:
    run, tamper = tampering
    run("ingest", DEMO)
    tamper()
    done = run("replay", "--conversation", "conv-demo-seo", "--json")
    assert done.returncode == 0
    assert done.stderr == (
        "warning: the log's hash chain is broken at version 8 (changed), so the read models "
        "differ from it; the log's turns are shown as they read now. Run: chatrecord verify "
        "(do not rebuild: it would fold the changed events in)\n"
    )


def test_audit_of_a_broken_chain_exits_1_with_or_without_json(tampering: tuple[Run, Callable[[], None]]) -> None:
    run, tamper = tampering
    run("ingest", DEMO)
    intact = run("audit", "conv-demo-seo", "--json")
    tamper()
    text, as_json = run("audit", "conv-demo-seo"), run("audit", "conv-demo-seo", "--json")

    assert intact.returncode == 0
    assert (text.returncode, as_json.returncode) == (1, 1)
    assert text.stdout.splitlines()[-1].startswith("chain: BROKEN at version 8 (changed)") and text.stderr == ""
    rows = json.loads(as_json.stdout)
    assert [r["version"] for r in rows if not r["verified"]] == [r["version"] for r in rows if r["version"] >= 8] != []


def test_a_refused_postgresql_connection_reads_as_sentences(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/test")
    done = run("audit", "conv-demo-seo")
    assert done.returncode == 1
    assert "Connection refused. Is the server running on that host" in done.stderr, done.stderr
    assert (
        one_line("failed: Connection refused\n\tIs the server running?") == "failed: Connection refused. Is the server running?"
    )
    assert one_line("first line\n  second line:\nThird.") == "first line; second line: Third."


def card_left_undecided(conversation: str) -> list[dict[str, object]]:
    def line(line_type: str, **fields: object) -> dict[str, object]:
        return {"type": line_type, "conversation": conversation, "at": AT, **fields}

    return [
        line("conversation_started", kind="chat", owner=7),
        line("user_message", message=1, text="SEO", page=42, skill="3:seo"),
        line(
            "segment_returned",
            segment="r/1",
            run="r",
            trigger="turn",
            outcome="awaiting_approval",
            answer="Titel?",
            pending=PENDING,
        ),
        line("user_message", message=2, text="anders", page=42),
        line("card_decided", segment="r/1", approved=True, answer="Übernehmen"),
    ]


def test_a_decision_for_a_card_left_undecided_says_left_undecided(store_run: Run, tmp_path: Path) -> None:
    (tmp_path / "late.jsonl").write_text("".join(json.dumps(line) + "\n" for line in card_left_undecided("c")))
    done = store_run("ingest", "late.jsonl")
    assert (done.returncode, done.stderr) == (
        1,
        "error: late.jsonl: line 5, segment: the card of segment r/1 was "
        "left undecided by a new user message; a later decision is not recorded\n",
    )

    app = create_app(lambda: Chatrecord(open_store(memory=True)), HttpSettings(token=None))
    with TestClient(app) as client:
        *before, late = card_left_undecided("c")
        for line in before:
            assert client.post("/v1/lines", json=line).status_code == 200
        refused = client.post("/v1/lines", json=late)
    assert refused.status_code == 409
    assert (refused.json()["rule"], refused.json()["detail"]) == (
        "CardLeftUndecidedBefore",
        "request: line 1, segment: refused: a card or question that was left undecided (by "
        "a new user message or the end of the tour) is decided or answered afterwards: the late decision is not recorded",
    )
