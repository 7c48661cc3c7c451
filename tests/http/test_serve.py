"""`chatrecord serve` refuses to start unprotected; the app itself, in process, without a token."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from pathlib import Path

import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import BadSetting
from adapters.bootstrap import open_store
from adapters.http import server
from adapters.http.app import DEFAULT_MAX_BODY_BYTES, HttpSettings, create_app
from adapters.http.server import loopback
from tests.conftest import _in_ci
from tests.e2e.conftest import runner

with warnings.catch_warnings():  # starlette's TestClient warns, at import, that it prefers httpx2
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


def test_serve_refuses_to_start_without_a_token_or_with_no_auth_off_loopback(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))

    no_token = run("serve", "--port", "1")
    open_host = run("serve", "--no-auth", "--host", "0.0.0.0", "--port", "1")

    assert (no_token.returncode, no_token.stdout) == (1, "")
    assert no_token.stderr == (
        "error: CHATRECORD_API_TOKEN is not set; set it to the bearer token the chat sends, "
        "or give --no-auth on a loopback host\n"
    )
    assert open_host.returncode == 1
    assert open_host.stderr.startswith(
        "error: --no-auth listens on a loopback host only (127.0.0.1, ::1, localhost), not 0.0.0.0"
    )
    assert not (tmp_path / "s.sqlite").exists()


def test_loopback_hosts() -> None:
    assert [loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.0.0.2", "0.0.0.0", "example.org")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


def test_serve_runs_one_process_unless_asked() -> None:
    import inspect

    from adapters.cli.cmd_serve import serve

    assert inspect.signature(serve).parameters["workers"].default == 1


def test_serve_logs_no_request_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[dict[str, object]] = []
    monkeypatch.setattr(server.uvicorn, "run", lambda app, **options: given.append(options))

    server.run("127.0.0.1", 8765, 1)
    server.run("127.0.0.1", 8765, 1, access_log=True)

    assert [(g["access_log"], g["workers"]) for g in given] == [(False, 1), (True, 1)]


def test_settings_read_the_body_limit_and_ignore_the_token_without_auth() -> None:
    assert HttpSettings.from_env({}) == HttpSettings(None, DEFAULT_MAX_BODY_BYTES) == HttpSettings(None, 8 * 1024 * 1024)
    long = "chat-s3cret-0123456789"
    assert HttpSettings.from_env({"CHATRECORD_API_TOKEN": long, "CHATRECORD_MAX_BODY_BYTES": "10"}) == HttpSettings(long, 10)
    assert HttpSettings.from_env({"CHATRECORD_API_TOKEN": "t"}, no_auth=True).token is None
    with pytest.raises(BadSetting, match="CHATRECORD_MAX_BODY_BYTES must be a whole number >= 1, not '0'"):
        HttpSettings.from_env({"CHATRECORD_MAX_BODY_BYTES": "0"})
    for unsendable in (" " * 16, "two words, not one", " padded-0123456789", "tab\there-0123456789", "ünicode-0123456789"):
        with pytest.raises(BadSetting) as refused:
            HttpSettings.from_env({"CHATRECORD_API_TOKEN": unsendable})
        assert str(refused.value) == (
            "CHATRECORD_API_TOKEN must be printable ASCII without spaces (the token the "
            "chat sends after 'Bearer '); no client could send this one"
        )


def test_without_auth_the_app_answers_without_a_token_and_keeps_keys_in_memory() -> None:
    app = create_app(lambda: Chatrecord(open_store(memory=True)), HttpSettings(token=None))
    line = {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}

    with TestClient(app) as client:
        first = client.post("/v1/lines", json=line, headers={"Idempotency-Key": "k"})
        again = client.post("/v1/lines", json=line, headers={"Idempotency-Key": "k"})

    assert (first.status_code, first.json()["version"], first.headers["etag"]) == (200, 1, '"1"')
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"


def test_the_token_is_checked_before_the_body_is_read_and_a_streamed_body_is_limited_too() -> None:
    app = create_app(lambda: Chatrecord(open_store(memory=True)), HttpSettings(token="t", max_body_bytes=100))

    def chunks():
        for _ in range(10):
            yield b"x" * 50

    with TestClient(app) as client:
        no_token = client.post("/v1/lines", content=b"x" * 1000)
        streamed = client.post("/v1/lines", content=chunks(), headers={"Authorization": "Bearer t"})

    assert no_token.status_code == 401
    assert "content-length" not in streamed.request.headers
    assert (streamed.status_code, streamed.json()["type"], streamed.json()["limit"]) == (
        413,
        "urn:chatrecord:problem:body-too-large",
        100,
    )


def test_a_conversation_id_with_slashes_is_read_as_the_chat_names_it() -> None:
    from fastapi.testclient import TestClient

    from adapters.api import Chatrecord
    from adapters.bootstrap import open_store
    from adapters.http.app import HttpSettings, create_app

    # a store in memory, its app without a token
    chatrecord = Chatrecord(open_store(memory=True))
    at = "2026-11-02T10:00:00Z"
    with TestClient(create_app(lambda: chatrecord, HttpSettings(token=None))) as client:
        # the chat starts "tenant/7/chat" and posts a message
        for line in (
            {"type": "conversation_started", "conversation": "tenant/7/chat", "at": at, "kind": "chat", "owner": 7},
            {"type": "user_message", "conversation": "tenant/7/chat", "at": at, "message": 1, "text": "Hallo", "page": 42},
        ):
            assert client.post("/v1/lines", json=line).status_code == 200

        # its turn and audit are found under that id, its slashes as path or escaped
        assert client.get("/v1/conversations/tenant/7/chat/turn").json()["version"] == 2
        assert client.get("/v1/conversations/tenant%2F7%2Fchat/audit").status_code == 200


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie no one reaped yet has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(
    not sys.platform.startswith("linux") and not _in_ci(),  # in CI it runs, and fails off Linux
    reason="workers are tied to their server on Linux (prctl)",
)
def test_the_workers_of_a_server_killed_with_sigkill_end_and_free_the_port(tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    import httpx

    from tests.e2e.conftest import ROOT, cli_env
    from tests.http.conftest import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "serve", "--no-auth", "--workers", "2", "--port", str(port)],
        cwd=ROOT,
        env=cli_env(CHATRECORD_DB=str(tmp_path / "s.sqlite")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, workers = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
            workers = [int(p) for p in children if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
            try:
                if len(workers) == 2 and httpx.get(f"http://127.0.0.1:{port}/v1/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        assert len(workers) == 2 and all(_alive(w) for w in workers)

        server.send_signal(signal.SIGKILL)
        server.wait()
        deadline = time.monotonic() + 20
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)

        assert not any(_alive(w) for w in workers)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/v1/healthz", timeout=2)
    finally:
        server.kill()
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_client_that_goes_away_while_sending_its_body_is_one_log_line_and_stores_nothing(caplog) -> None:
    import logging

    import anyio

    chatrecord = Chatrecord(open_store(memory=True))
    app = create_app(lambda: chatrecord, HttpSettings(token=None))
    app.state.chatrecord, app.state.idempotency_keys = chatrecord, chatrecord.store.idempotency_keys  # what the lifespan sets
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/lines",
        "raw_path": b"/v1/lines",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("t", 80),
    }
    received = [{"type": "http.request", "body": b'{"type": "conversation_started", ', "more_body": True}]
    sent: list[dict] = []

    async def receive() -> dict:
        return received.pop(0) if received else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    with caplog.at_level(logging.INFO, logger="chatrecord.http"):
        anyio.run(app, scope, receive, send)

    assert [r.getMessage() for r in caplog.records if r.name == "chatrecord.http"] == [
        "client disconnected during POST /v1/lines; nothing of its request was stored"
    ]
    assert not any(r.exc_info for r in caplog.records)
    assert chatrecord.store.max_notification_id() == 0


def test_serve_on_a_port_another_process_holds_is_one_error_line(tmp_path: Path) -> None:
    import socket

    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = run("serve", "--no-auth", "--port", str(port))

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: cannot listen on 127.0.0.1:{port} (Address already in use); give another --port, or end what holds it\n"
    )
