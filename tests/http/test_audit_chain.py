"""`GET /v1/conversations/{id}/audit` returns the rows of `chatrecord audit --json`, `verified`
and all, and flags a broken chain with `Chatrecord-Chain: broken` as /export does (issue 35,
the tester's F6), on each backend."""

from __future__ import annotations

import json
import sqlite3

import psycopg
from psycopg import sql

from domain.events import conversation_uuid
from tests.e2e.conftest import ROOT, runner
from tests.http.conftest import Server, unique

AT = "2026-11-02T10:00:00Z"


def tamper(server: Server, conversation: str) -> None:
    """Changes the page of the conversation's version 2 (its user message) in the database."""
    key = conversation_uuid(conversation)
    if server.backend == "sqlite":
        with sqlite3.connect(server.settings["CHATRECORD_DB"]) as conn:
            where = "WHERE originator_id = ? AND originator_version = 2"
            (state,) = conn.execute(f"SELECT state FROM stored_events {where}", (key.hex,)).fetchone()
            changed = bytes(state).replace(b'"page":42', b'"page":43', 1)
            assert changed != bytes(state)
            conn.execute(f"UPDATE stored_events SET state = ? {where}", (changed, key.hex))
        return
    url, schema = server.settings["CHATRECORD_DATABASE_URL"].rsplit("schema=", 1)
    with psycopg.connect(url.rstrip("?&")) as conn:
        table = sql.Identifier(schema, "conversationstore_events")
        where = sql.SQL(" WHERE originator_id = %s AND originator_version = 2")
        row = conn.execute(sql.SQL("SELECT state FROM {}").format(table) + where, (key,)).fetchone()
        assert row is not None
        changed = bytes(row[0]).replace(b'"page":42', b'"page":43', 1)
        assert changed != bytes(row[0])
        conn.execute(sql.SQL("UPDATE {} SET state = %s").format(table) + where, (changed, key))


def test_the_audit_rows_are_the_clis_and_a_broken_chain_is_flagged(server: Server) -> None:
    conversation = unique()
    for line in (
        {"type": "conversation_started", "conversation": conversation, "at": AT, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": conversation, "at": AT, "message": 1, "text": "Hallo", "page": 42},
    ):
        assert server.client.post("/v1/lines", json=line).status_code == 200
    cli = runner(ROOT, **server.settings)

    intact = server.client.get(f"/v1/conversations/{conversation}/audit")
    tamper(server, conversation)
    broken = server.client.get(f"/v1/conversations/{conversation}/audit")
    cli_broken = cli("audit", conversation, "--json")

    assert intact.status_code == 200 and "chatrecord-chain" not in intact.headers
    assert [(r["version"], r["verified"]) for r in intact.json()] == [(1, True), (2, True)]
    assert (broken.status_code, broken.headers.get("chatrecord-chain")) == (200, "broken")
    assert [(r["version"], r["verified"]) for r in broken.json()] == [(1, True), (2, False)]
    assert broken.json() == json.loads(cli_broken.stdout)


def test_the_turn_read_says_a_break_the_store_keeps(server: Server) -> None:
    """Found by a fresh user: GET .../turn on a store whose event was changed by hand carried no
    `Chatrecord-Chain: broken` though .../audit did. The turn read gives the stored verdict (the
    guard's, or a look's), reading it without recomputing a hash."""
    conversation = unique()
    for line in (
        {"type": "conversation_started", "conversation": conversation, "at": AT, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": conversation, "at": AT, "message": 1, "text": "Hallo", "page": 42},
    ):
        assert server.client.post("/v1/lines", json=line).status_code == 200
    intact = server.client.get(f"/v1/conversations/{conversation}/turn")
    tamper(server, conversation)  # the store's guard keeps the break
    broken = server.client.get(f"/v1/conversations/{conversation}/turn")
    assert intact.status_code == 200 and "chatrecord-chain" not in intact.headers
    assert (broken.status_code, broken.headers.get("chatrecord-chain")) == (200, "broken")
    assert broken.json() == intact.json()
