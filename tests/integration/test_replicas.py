"""Reads from a streaming hot standby with read-your-writes (issue 24, items 1, 2 and 4): a
primary and a standby of this module's own (`tests.pg_servers.start_replicated`), the standby
delayed on purpose (`recovery_min_apply_delay`) where a test needs it to lag. A write answers with
its position; a read given it never returns notes older than the write, served by the standby
once it replayed it, else by the primary; a read without it may lag (shown, so the test can fail).
The servers start once for the module (a few seconds); a missing initdb fails, never skips."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from adapters.api import Chatrecord
from adapters.backends.replicas import POSITION, recovery_conflict
from adapters.backends.settings import BadDatabaseURL, BadSetting, StoreUnusable, read_store_env, read_wait, store_env
from adapters.bootstrap import open_read_store, open_store
from adapters.http.app import HttpSettings, create_app
from adapters.http.headers import READ_AFTER
from domain.errors import UnknownConversation
from tests.e2e.conftest import cli_env
from tests.pg_servers import Replicated, free_port, reconfigure, start_replicated, wait_replayed

with warnings.catch_warnings():  # starlette's TestClient warns, at import, that it prefers httpx2
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

AT = "2026-10-28T09:00:00Z"
DELAY = "1500ms"
"""The standby's apply delay where a test needs it behind: longer than a short read wait."""


@pytest.fixture(scope="module")
def pair() -> Iterator[Replicated]:
    """Yields a primary and its hot standby, the store's tables made on the primary."""
    servers = start_replicated()
    try:
        made = Chatrecord(open_store(settings(servers)))
        made.read_models  # noqa: B018 - the views' tables
        made.close()
        wait_replayed(servers.primary, servers.standby)
        yield servers
    finally:
        servers.stop()


def settings(servers: Replicated, **more: str) -> dict[str, str]:
    return {"CHATRECORD_DATABASE_URL": servers.primary.url, "CHATRECORD_READ_DATABASE_URL": servers.standby.url, **more}


@pytest.fixture
def delayed(pair: Replicated) -> Iterator[Replicated]:
    """The pair with the standby applying each commit DELAY after the primary made it."""
    reconfigure(pair.standby, {"recovery_min_apply_delay": DELAY})
    try:
        yield pair
    finally:
        reconfigure(pair.standby, {"recovery_min_apply_delay": "0"})
        wait_replayed(pair.primary, pair.standby)


def chatrecord(servers: Replicated, wait: float) -> Chatrecord:
    given = settings(servers)
    return Chatrecord(open_store(given), read_store=open_read_store(given), read_wait=wait)


def started(conversation: str) -> list[dict[str, Any]]:
    return [
        {"type": "conversation_started", "conversation": conversation, "at": AT, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": conversation, "at": AT, "message": 1, "text": "SEO", "page": 42},
    ]


def segment(conversation: str, name: str) -> dict[str, Any]:
    return {
        "type": "segment_returned",
        "conversation": conversation,
        "at": AT,
        "segment": name,
        "run": name,
        "trigger": "turn",
        "outcome": "completed",
        "answer": "ok",
        "steps": [{"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}],
        "pending": [],
    }


def test_without_the_reading_url_nothing_changes(pair: Replicated) -> None:
    assert read_store_env({"CHATRECORD_DATABASE_URL": pair.primary.url}) is None
    assert read_store_env({"CHATRECORD_DATABASE_URL": pair.primary.url, "CHATRECORD_READ_DATABASE_URL": " "}) is None
    assert read_wait({}) == 1.0
    record = Chatrecord(open_store({"CHATRECORD_DATABASE_URL": pair.primary.url}))
    try:
        conversation = f"plain-{uuid.uuid4().hex[:8]}"
        result = record.record(started(conversation)[0])
        assert (record.position(), result.read_after, record._reader("0/0") is record) == (None, None, True)
        assert record.turn_notes(conversation, after="0/0").version == 1
    finally:
        record.close()


def test_the_reading_url_is_checked_and_names_its_variable(pair: Replicated) -> None:
    with pytest.raises(BadSetting, match="CHATRECORD_READ_DATABASE_URL is set, CHATRECORD_DATABASE_URL is not"):
        read_store_env({"CHATRECORD_READ_DATABASE_URL": pair.standby.url})
    with pytest.raises(BadDatabaseURL, match=r"^CHATRECORD_READ_DATABASE_URL must start with postgresql://"):
        read_store_env(settings(pair, CHATRECORD_READ_DATABASE_URL="mysql://x@h/db"))
    with pytest.raises(
        BadDatabaseURL, match="CHATRECORD_READ_DATABASE_URL names schema 'other', CHATRECORD_DATABASE_URL 'public'"
    ):
        read_store_env(settings(pair, CHATRECORD_READ_DATABASE_URL=pair.standby.url + "?schema=other"))
    with pytest.raises(BadSetting, match="CHATRECORD_READ_WAIT_MS must be a whole number >= 0, not '-1'"):
        read_wait({"CHATRECORD_READ_WAIT_MS": "-1"})
    env = read_store_env(
        settings(
            pair,
            CHATRECORD_READ_DATABASE_URL=(
                f"postgresql://postgres@127.0.0.1:{pair.standby.port},127.0.0.1:{pair.primary.port}/test"
                "?target_session_attrs=prefer-standby"
            ),
        )
    )
    assert env is not None
    assert (env["CREATE_TABLE"], env["POSTGRES_SCHEMA"], env["POSTGRES_PORT"]) == (
        "n",
        "public",
        f"{pair.standby.port},{pair.primary.port}",
    )
    assert read_wait({"CHATRECORD_READ_WAIT_MS": "250"}) == 0.25


def test_a_write_tries_again_after_a_lost_connection_where_the_url_names_several_hosts(pair: Replicated) -> None:
    assert "WRITE_RETRY_SECONDS" not in store_env({"CHATRECORD_DATABASE_URL": pair.primary.url})
    assert store_env({"CHATRECORD_DATABASE_URL": pair.url})["WRITE_RETRY_SECONDS"] == "30"
    assert (
        store_env({"CHATRECORD_DATABASE_URL": pair.primary.url, "CHATRECORD_WRITE_RETRY_SECONDS": "5"})["WRITE_RETRY_SECONDS"]
        == "5"
    )
    assert store_env({"CHATRECORD_DATABASE_URL": pair.url, "CHATRECORD_WRITE_RETRY_SECONDS": "0"})["WRITE_RETRY_SECONDS"] == "0"
    with pytest.raises(BadSetting, match="CHATRECORD_WRITE_RETRY_SECONDS must be a whole number >= 0, not 'soon'"):
        store_env({"CHATRECORD_DATABASE_URL": pair.url, "CHATRECORD_WRITE_RETRY_SECONDS": "soon"})


def test_the_reading_store_is_the_standby_and_refuses_writes(pair: Replicated) -> None:
    reader = open_read_store(settings(pair))
    assert reader is not None
    try:
        with psycopg.connect(pair.standby.url) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        record = Chatrecord(reader)
        with pytest.raises(StoreUnusable, match=r"is read-only .*run this one against the primary"):
            record.record(started(f"refused-{uuid.uuid4().hex[:8]}")[0])
    finally:
        reader.close()


def test_a_read_given_the_write_s_position_is_never_older_than_the_write(delayed: Replicated) -> None:
    conversation = f"ryw-{uuid.uuid4().hex[:8]}"
    record = chatrecord(delayed, wait=0.2)  # shorter than the standby's delay: the primary answers
    try:
        first = record.record_lines([orjson.dumps(line) for line in started(conversation)], "test")
        assert first.read_after is not None and POSITION.fullmatch(first.read_after)
        # without the position, the standby answers as it is: it has not applied the write yet
        with pytest.raises(UnknownConversation):
            record.turn_notes(conversation)
        assert record._reader(first.read_after) is record._on_primary
        assert record.turn_notes(conversation, after=first.read_after).version == first.version == 2

        wrote = record.record(segment(conversation, "s1"))
        assert wrote.state is not None and wrote.state.version == 3
        assert wrote.read_after is not None and wrote.read_after != first.read_after
        assert [
            record.turn_notes(conversation, after=wrote.read_after).version,
            record.audit(conversation, after=wrote.read_after).rows[-1].to_json() is not None,
            len(record.events(conversation, after=wrote.read_after)),
        ] == [3, True, 3]
    finally:
        record.close()


def test_a_read_waits_for_the_standby_to_replay_the_position(delayed: Replicated) -> None:
    conversation = f"wait-{uuid.uuid4().hex[:8]}"
    record = chatrecord(delayed, wait=30)  # longer than the delay: the standby answers, after it replayed
    try:
        wrote = record.record_lines([orjson.dumps(line) for line in started(conversation)], "test")
        assert wrote.read_after is not None
        reader = record._reader(wrote.read_after)
        assert reader is record._standby
        assert reader.store is not record.store
        assert record.turn_notes(conversation, after=wrote.read_after).version == 2
        assert [
            c.conversation
            for c in record.conversations(1000, after=wrote.read_after).conversations
            if c.conversation == conversation
        ] == [conversation]
    finally:
        record.close()


def test_a_read_cancelled_by_recovery_is_read_again(pair: Replicated, monkeypatch: pytest.MonkeyPatch) -> None:
    conversation = f"conflict-{uuid.uuid4().hex[:8]}"
    record = chatrecord(pair, wait=30)
    try:
        wrote = record.record_lines([orjson.dumps(line) for line in started(conversation)], "test")
        standby = record._standby
        assert standby is not None
        real, calls = standby.read_models.turn_notes, []

        def cancelled_once(*args: Any, **kwargs: Any) -> Any:
            calls.append(args[0])
            if len(calls) == 1:
                cause = psycopg.errors.SerializationFailure("canceling statement due to conflict with recovery")
                raise StoreUnusable("the store gave way to another process's write") from cause
            return real(*args, **kwargs)

        monkeypatch.setattr(standby.read_models, "turn_notes", cancelled_once)
        assert record.turn_notes(conversation, after=wrote.read_after).version == 2
        assert calls == [conversation, conversation]
    finally:
        record.close()


def test_http_post_answers_with_the_position_and_a_get_given_it_reads_the_write(delayed: Replicated) -> None:
    conversation = f"http-{uuid.uuid4().hex[:8]}"
    app = create_app(lambda: chatrecord(delayed, wait=0.2), HttpSettings(token=None))
    with TestClient(app) as client:
        body = b"".join(orjson.dumps(line) + b"\n" for line in started(conversation))
        posted = client.post("/v1/lines", content=body, headers={"Content-Type": "application/x-ndjson"})
        assert posted.status_code == 200, posted.text
        position = posted.headers[READ_AFTER]
        assert POSITION.fullmatch(position) and posted.headers["ETag"] == '"2"'
        lagging = client.get(f"/v1/conversations/{conversation}/turn")
        assert lagging.status_code == 404  # the standby has not applied the write yet
        read = client.get(f"/v1/conversations/{conversation}/turn", headers={READ_AFTER: position})
        assert (read.status_code, read.headers["ETag"], read.json()["version"]) == (200, '"2"', 2)
        audit = client.get(f"/v1/conversations/{conversation}/audit", headers={READ_AFTER: position})
        assert audit.status_code == 200 and len(audit.json()) >= 1
        bad = client.get(f"/v1/conversations/{conversation}/turn", headers={READ_AFTER: "yesterday"})
        assert bad.status_code == 400


def test_a_caller_that_only_reads_works_on_the_standby_while_the_primary_is_down(
    pair: Replicated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversation = f"down-{uuid.uuid4().hex[:8]}"
    record = chatrecord(pair, wait=30)
    try:
        wrote = record.record_lines([orjson.dumps(line) for line in started(conversation)], "test")
        record.turn_notes(conversation, after=wrote.read_after)  # the standby has it now
    finally:
        record.close()
    down = f"postgresql://postgres@127.0.0.1:{free_port()}/test"  # no server listens there
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "audit", conversation, "--json"],
        cwd=tmp_path,
        env=cli_env(CHATRECORD_DATABASE_URL=down, CHATRECORD_READ_DATABASE_URL=pair.standby.url),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [row["kind"] for row in orjson.loads(done.stdout)][:1] == ["started"]
    monkeypatch.setenv("CHATRECORD_DATABASE_URL", down)
    monkeypatch.setenv("CHATRECORD_READ_DATABASE_URL", pair.standby.url)
    reader = Chatrecord(reading=True)  # the primary is opened when a call needs it
    try:
        assert reader.turn_notes(conversation).version == 2
        assert reader._primary.opened is None  # never opened (a write would open it, and fail: StoreUnusable)
    finally:
        reader.close()


def test_a_real_recovery_conflict_is_what_the_reads_try_again(pair: Replicated) -> None:
    """The standby cancels a query whose rows the primary vacuumed away (no delay allowed): the
    error it raises is the one `recovery_conflict` finds (and `_reads` reads again)."""
    reconfigure(pair.standby, {"max_standby_streaming_delay": "0", "hot_standby_feedback": "off"})
    try:
        with psycopg.connect(pair.primary.url, autocommit=True) as primary:
            primary.execute("DROP TABLE IF EXISTS conflicted")
            primary.execute("CREATE TABLE conflicted (n int)")
            primary.execute("INSERT INTO conflicted SELECT generate_series(1, 1000)")
        wait_replayed(pair.primary, pair.standby)
        failed: list[BaseException] = []
        with psycopg.connect(pair.standby.url, autocommit=True) as standby:

            def long_read() -> None:
                try:
                    standby.execute("SELECT count(*), pg_sleep(20) FROM conflicted").fetchone()
                except psycopg.Error as error:
                    failed.append(error)

            reading = threading.Thread(target=long_read)
            reading.start()
            with psycopg.connect(pair.standby.url, autocommit=True) as watch:  # the read runs, its snapshot taken
                deadline = time.monotonic() + 30
                while (
                    reading.is_alive()
                    and time.monotonic() < deadline
                    and not watch.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(20)%' "
                        "AND pid <> pg_backend_pid()"
                    ).fetchone()[0]
                ):  # type: ignore[index]
                    time.sleep(0.01)
            with psycopg.connect(pair.primary.url, autocommit=True) as primary:
                primary.execute("DELETE FROM conflicted")
                primary.execute("VACUUM conflicted")
            reading.join(timeout=30)
        assert not reading.is_alive() and len(failed) == 1
        assert recovery_conflict(failed[0]), failed[0]
        assert not recovery_conflict(psycopg.errors.SerializationFailure("could not serialize access"))
    finally:
        reconfigure(pair.standby, {"max_standby_streaming_delay": "30s", "hot_standby_feedback": "off"})
