"""The replicated deployment of docs/scaling.md from its first step (issue 35, item 5): a fresh
primary and streaming standby (`tests.pg_servers.start_replicated`), no table on either, with
CHATRECORD_DATABASE_URL naming both and CHATRECORD_READ_DATABASE_URL the standby. `init` (and a
write) never opens the reading store, so it works before the standby has the tables; a command
that reads there says in one line that they are missing, and works once the standby replayed
`init`. The servers are this module's own; a missing initdb fails, never skips."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import StoreUnusable
from tests.e2e.conftest import cli_env
from tests.pg_servers import Replicated, start_replicated, wait_replayed

AT = "2026-10-28T09:00:00Z"
NO_TABLES = (
    "error: the reading store (PostgreSQL postgres@127.0.0.1:{port}/test (schema public), "
    'CHATRECORD_READ_DATABASE_URL) has no chatrecord tables (relation "public.chatrecord_master" '
    "does not exist): run `chatrecord init` against the primary (CHATRECORD_DATABASE_URL) and let "
    "the standby replay it\n"
)


@pytest.fixture(scope="module")
def fresh() -> Iterator[Replicated]:
    """Yields a primary and its hot standby with no chatrecord table on either."""
    servers = start_replicated()
    try:
        yield servers
    finally:
        servers.stop()


def chatrecord(servers: Replicated, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=cwd,
        env=cli_env(CHATRECORD_DATABASE_URL=servers.url, CHATRECORD_READ_DATABASE_URL=servers.standby.url),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_init_on_a_fresh_pair_works_and_a_read_on_a_standby_without_tables_says_so(
    fresh: Replicated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for read in (["list"], ["audit", "conv-1"], ["export", "conv-1"]):  # before init: the standby has no table
        done = chatrecord(fresh, tmp_path, *read)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", NO_TABLES.format(port=fresh.standby.port)), read
    monkeypatch.setenv("CHATRECORD_DATABASE_URL", fresh.url)
    monkeypatch.setenv("CHATRECORD_READ_DATABASE_URL", fresh.standby.url)
    record = Chatrecord(reading=True)  # the primary is not opened (which would make its tables)
    try:
        with pytest.raises(StoreUnusable, match=r"^the reading store .* has no chatrecord tables"):
            record.conversations(10)
    finally:
        record.close()

    made = chatrecord(fresh, tmp_path, "init")
    assert (made.returncode, made.stderr) == (0, ""), made.stderr
    assert made.stdout.startswith("created the store: PostgreSQL postgres@127.0.0.1:")

    # a write never opens the reading store; a read given the write's position is answered even
    # by a standby that has not replayed the tables yet (the primary answers it then)
    record = Chatrecord()
    try:
        lines = [
            {"type": "conversation_started", "conversation": "conv-1", "at": AT, "kind": "chat", "owner": 7},
            {"type": "user_message", "conversation": "conv-1", "at": AT, "message": 1, "text": "SEO", "page": 42},
        ]
        wrote = record.record_lines([orjson.dumps(line) for line in lines], "test")
        assert (wrote.version, wrote.read_after is not None, record._opened_standby) == (2, True, None)
        assert record.turn_notes("conv-1", after=wrote.read_after).version == 2
    finally:
        record.close()

    wait_replayed(fresh.primary, fresh.standby)
    listed = chatrecord(fresh, tmp_path, "list", "--json")
    assert (listed.returncode, listed.stderr) == (0, ""), listed.stderr
    assert [row["conversation"] for row in orjson.loads(listed.stdout)["conversations"]] == ["conv-1"]
