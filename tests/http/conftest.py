"""A real `chatrecord serve` as a subprocess on a free loopback port, one per backend and test
module (a SQLite file, a fresh PostgreSQL schema), and an httpx client for it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.e2e.conftest import ROOT, cli_env

TOKEN = "test-token-0123456789"
MAX_BODY = 65536


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A running server: its base URL, an authorised client and the store's settings."""

    url: str
    client: httpx.Client
    settings: dict[str, str]
    backend: str


def start(settings: dict[str, str], log: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """Starts `chatrecord serve` and returns the process and its URL once /v1/healthz answers.

    The port is the OS's pick, closed again before the server binds it; should another process
    take it meanwhile (the tests run in parallel), the server ends with "Address already in
    use" and starts again on another port, up to three times."""
    for _ in range(3):
        port = free_port()
        # no wait after a wrong token (Schemathesis probes each operation with one), unless `settings` sets one
        waits = {"CHATRECORD_WRONG_TOKEN_WAIT_SECONDS": "0"}
        env = cli_env(CHATRECORD_API_TOKEN=TOKEN, CHATRECORD_MAX_BODY_BYTES=str(MAX_BODY), **(waits | settings))
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "adapters.cli", "serve", "--port", str(port), "--no-access-log", *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        if _answers(process, url, log):
            return process, url
    raise RuntimeError(f"chatrecord serve found no free port in three tries: {log.read_text()}")


def _answers(process: subprocess.Popen[bytes], url: str, log: Path) -> bool:
    """Waits until the server at `url` answers /v1/healthz (True) or ends on a port another
    process took (False). Raises RuntimeError when it ends otherwise or does not answer in 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if "Address already in use" in log.read_text():
                return False
            raise RuntimeError(f"chatrecord serve ended: {log.read_text()}")
        try:
            if httpx.get(f"{url}/v1/healthz", timeout=2).status_code == 200 and process.poll() is None:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"chatrecord serve did not answer within 60 s: {log.read_text()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server on each backend in turn, for the whole module."""
    folder = tmp_path_factory.mktemp(f"serve-{request.param}")
    schema = None
    if request.param == "sqlite":
        settings = {"CHATRECORD_DB": str(folder / "store.sqlite")}
    else:
        url = request.getfixturevalue("postgres_url")
        schema = f"chatrecord_http_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        settings = {"CHATRECORD_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}schema={schema}"}
    process, base = start(settings, folder / "serve.log")
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    try:
        yield Server(base, client, settings, request.param)
    finally:
        client.close()
        stop(process)
        if schema is not None:
            with psycopg.connect(request.getfixturevalue("postgres_url"), autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def unique(prefix: str = "conv") -> str:
    """Returns a conversation id no other test of the module uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
