"""A database URL reaches libpq whole (issue 20, item 5): `sslmode`, `sslrootcert` and several
hosts work as psql reads them, against throwaway servers of this module's own (one with TLS by
a self-signed CA, one without), and a parameter libpq does not know is refused, named."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import BadDatabaseURL, StoreUnusable, describe_backend, postgres_env, store_env, store_errors
from adapters.bootstrap import open_store
from tests.e2e.conftest import DEMO, cli_env
from tests.pg_servers import TLS_SETTINGS, ThrowawayServer, free_port, start_server, tls_files


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ThrowawayServer]]:
    """Yields the CA's file and a server with TLS (ssl=on) whose certificate that CA signed."""
    files = tls_files()
    ca = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.write_bytes(files.ca_pem)
    server = start_server(TLS_SETTINGS, files.server_files())
    try:
        yield ca, server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def plain_server() -> Iterator[ThrowawayServer]:
    """Yields a server without TLS (ssl=off)."""
    server = start_server({"ssl": "off"})
    try:
        yield server
    finally:
        server.stop()


def chatrecord_on(url: str) -> Chatrecord:
    """`Chatrecord()` with CHATRECORD_DATABASE_URL=url: its errors as the API raises them."""
    settings = {"CHATRECORD_DATABASE_URL": url}
    with store_errors(store_env(settings)):
        return Chatrecord(open_store(settings))


def cli(cwd: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=cwd,
        env=cli_env(CHATRECORD_DATABASE_URL=url),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_sslmode_require_against_a_server_without_tls_is_refused(plain_server: ThrowawayServer, tmp_path: Path) -> None:
    url = plain_server.url + "?sslmode=require"
    with pytest.raises(StoreUnusable) as refused:
        chatrecord_on(url)
    said = str(refused.value)
    assert said.startswith(
        f"the store (PostgreSQL postgres@127.0.0.1:{plain_server.port}/test (schema public)) cannot be used: connection failed:"
    )
    assert "server does not support SSL, but SSL was required" in said
    done = cli(tmp_path, url, "audit", "conv-demo-seo")
    assert (done.returncode, done.stderr) == (1, f"error: {said}\n")


def test_verify_full_with_the_ca_connects_over_tls_and_the_store_works(
    ca_file: tuple[Path, ThrowawayServer], tmp_path: Path
) -> None:
    ca, server = ca_file
    url = f"{server.url}?sslmode=verify-full&sslrootcert={ca}"
    chatrecord = chatrecord_on(url)
    try:
        with chatrecord.store.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            row = conn.execute("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
        assert row is not None and row["ssl"] is True and row["version"].startswith("TLS")
    finally:
        chatrecord.close()
    ingested = cli(tmp_path, url, "ingest", str(DEMO))
    assert (ingested.returncode, ingested.stderr) == (0, "")
    verified = cli(tmp_path, url, "verify")
    assert verified.stdout == "conv-demo-seo: ok, 20 events\n1 conversation verified: 1 ok, 0 broken\n"


def test_verify_full_without_the_ca_is_refused(ca_file: tuple[Path, ThrowawayServer], tmp_path: Path) -> None:
    _, server = ca_file
    other = tmp_path / "other-ca.pem"
    other.write_bytes(tls_files().ca_pem)  # a CA that did not sign the server's certificate
    with pytest.raises(StoreUnusable, match="failed: SSL error: "):
        chatrecord_on(f"{server.url}?sslmode=verify-full&sslrootcert={other}")


def test_a_url_of_several_hosts_connects_to_the_one_that_answers(plain_server: ThrowawayServer) -> None:
    down = free_port()
    url = (
        f"postgresql://postgres@127.0.0.1:{down},127.0.0.1:{plain_server.port}/test"
        "?target_session_attrs=read-write&connect_timeout=2"
    )
    chatrecord = chatrecord_on(url)
    try:
        assert chatrecord.health() >= 0
        with chatrecord.store.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            assert conn.info.port == plain_server.port
    finally:
        chatrecord.close()
    assert chatrecord.store.env["POSTGRES_HOST"] == "127.0.0.1,127.0.0.1"
    assert describe_backend(chatrecord.store) == (
        f"PostgreSQL postgres@127.0.0.1:{down},127.0.0.1:{plain_server.port}/test (schema public)"
    )


def test_the_schema_parameter_is_chatrecord_s_and_the_rest_goes_to_libpq(plain_server: ThrowawayServer) -> None:
    env = postgres_env(f"{plain_server.url}?application_name=chatrecord-test&schema=public")
    assert env["POSTGRES_CONNINFO"] == (
        f"user=postgres dbname=test host=127.0.0.1 port={plain_server.port} application_name=chatrecord-test"
    )
    chatrecord = chatrecord_on(f"{plain_server.url}?application_name=chatrecord-test&options=-c%20work_mem%3D7MB")
    try:
        with chatrecord.store.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            assert conn.execute("SHOW application_name").fetchone() == {"application_name": "chatrecord-test"}
            assert conn.execute("SHOW work_mem").fetchone() == {"work_mem": "7MB"}
            assert conn.execute("SHOW lock_timeout").fetchone() == {"lock_timeout": "10s"}  # chatrecord's own stay
    finally:
        chatrecord.close()


@pytest.mark.parametrize(
    ("query", "said"),
    [
        (
            "foo=bar",
            "CHATRECORD_DATABASE_URL: unknown parameter 'foo'; give schema or a connection parameter libpq knows "
            "(https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS)",
        ),
        (
            "shema=s1",
            "CHATRECORD_DATABASE_URL: unknown parameter 'shema' (did you mean schema?); give schema or a "
            "connection parameter libpq knows (https://www.postgresql.org/docs/current/libpq-connect.html"
            "#LIBPQ-PARAMKEYWORDS)",
        ),
        (
            "sslmod=require",
            "CHATRECORD_DATABASE_URL: unknown parameter 'sslmod' (did you mean sslmode?); give schema or a "
            "connection parameter libpq knows (https://www.postgresql.org/docs/current/libpq-connect.html"
            "#LIBPQ-PARAMKEYWORDS)",
        ),
    ],
)
def test_a_parameter_libpq_does_not_know_is_refused_named(query: str, said: str) -> None:
    with pytest.raises(BadDatabaseURL) as refused:
        postgres_env(f"postgresql://u@h/db?{query}")
    assert str(refused.value) == said


def test_a_value_libpq_refuses_is_named_in_libpq_s_words(plain_server: ThrowawayServer) -> None:
    with pytest.raises(StoreUnusable, match='invalid sslmode value: "bogus"'):
        chatrecord_on(plain_server.url + "?sslmode=bogus")


def test_the_cli_refuses_an_unknown_parameter_with_one_line(tmp_path: Path) -> None:
    done = cli(tmp_path, "postgresql://u@127.0.0.1/db?shema=s1", "audit", "x")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("error: CHATRECORD_DATABASE_URL: unknown parameter 'shema' (did you mean schema?)")
