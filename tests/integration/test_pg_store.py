"""The PostgreSQL store's own parts (`adapters.pg_store`): writes that end, a schema made once.

Tests that could hang without the fix run in a subprocess with a timeout, so a regression
fails with a message instead of stopping the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from adapters.pg_store import create_once, lock_key
from adapters.settings import open_store

ROOT = Path(__file__).resolve().parents[2]

LARGE_SEGMENT = textwrap.dedent("""
    import socket, sys
    import orjson
    from adapters.ingest import read_lines
    from adapters.settings import open_store

    url, steps = sys.argv[1], int(sys.argv[2])
    store = open_store({"CHATRECORD_DATABASE_URL": url}, POSTGRES_POOL_SIZE="1", POSTGRES_MAX_OVERFLOW="0")
    with store.recorder.datastore.get_connection() as conn:  # the pool's only connection
        sock = socket.socket(fileno=conn.pgconn.socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # a slow network: short sends
        sock.detach()
    c, at = "big", "2026-10-28T09:00:00Z"
    step = {"kind": "tool", "round": 1, "durationMs": 1.5, "toolName": "t", "toolIsError": False}
    lines = [
        {"type": "conversation_started", "conversation": c, "at": at, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": c, "at": at, "message": 1, "text": "x", "page": 1},
        {"type": "segment_returned", "conversation": c, "at": at, "segment": "s1", "run": "r", "trigger": "turn",
         "outcome": "completed", "answer": "ok", "steps": [step] * steps, "pending": []},
    ]
    for line in read_lines([orjson.dumps(line) for line in lines], "big.jsonl"):
        store.handle(line)
    print(len(store.events(c)), len(store.events(c)[-1].steps))
""")


def schema_url(postgres_url: str, schema: str) -> str:
    return f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={schema}"


def test_a_large_segment_is_stored_when_the_network_sends_it_in_pieces(postgres_url: str, postgres_schema: str) -> None:
    # psycopg's pipeline mode (the library's write path) stopped sending after a short send
    # and waited forever for the reply, holding the events table's lock (issue 8, item 7)
    done = subprocess.run(
        [sys.executable, "-c", LARGE_SEGMENT, schema_url(postgres_url, postgres_schema), "5000"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "5000"]
