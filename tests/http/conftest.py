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
    """Starts `chatrecord serve` and returns the process and its URL once /v1/healthz answers."""
    port = free_port()
    env = cli_env(CHATRECORD_API_TOKEN=TOKEN, CHATRECORD_MAX_BODY_BYTES=str(MAX_BODY), **settings)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "adapters.cli", "serve", "--port", str(port), "--no-access-log", *args],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chatrecord serve ended: {log.read_text()}")
        try:
            if httpx.get(f"{url}/v1/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
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

