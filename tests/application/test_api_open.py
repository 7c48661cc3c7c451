"""`Chatrecord()` opening a store that cannot be opened (issue 20, item 4): the Python API raises
the documented StoreUnusable, in the very words the command line prints, not the driver's error."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import StoreUnusable
from tests.conftest import _in_ci
from tests.e2e.conftest import ROOT, cli_env


def free_port() -> int:
    """Returns a loopback TCP port that nothing listens on (the OS's pick, closed again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli_error(cwd: Path, **settings: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "audit", "conv-demo-seo"],
        cwd=cwd,
        env=cli_env(**settings),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def api_error(monkeypatch: pytest.MonkeyPatch, **settings: str) -> str:
    for name in ("CHATRECORD_DB", "CHATRECORD_DATABASE_URL", "CHATRECORD_MASTER_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StoreUnusable) as refused:
        Chatrecord()
    return f"error: {refused.value}\n"


def test_a_sqlite_file_that_cannot_be_opened_is_store_unusable_in_the_cli_s_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a folder that does not exist: sqlite3.OperationalError "unable to open database file", as on a
    # read-only file system; then a folder where the file should be, in the API's and the CLI's words
    path = str(tmp_path / "missing-folder" / "store.sqlite")
    said = api_error(monkeypatch, CHATRECORD_DB=path)
    assert said == (
        f"error: the SQLite file {path} cannot be used (unable to open database file); check "
        "CHATRECORD_DB: its folder must exist and the file must be readable and writable\n"
    )
    (tmp_path / "missing-folder").mkdir()
    (tmp_path / "missing-folder" / "store.sqlite").mkdir()  # a folder where the file should be: named so
    folder = api_error(monkeypatch, CHATRECORD_DB=path)
    assert folder.startswith(f"error: CHATRECORD_DB: {path} is a folder, not a file; ")
    assert cli_error(tmp_path, CHATRECORD_DB=path) == folder


def test_a_postgresql_server_that_does_not_answer_is_store_unusable_in_the_cli_s_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/test"
    said = api_error(monkeypatch, CHATRECORD_DATABASE_URL=url)
    assert said.startswith(
        f"error: the store (PostgreSQL postgres@127.0.0.1:{port}/test (schema public)) cannot be used: connection failed:"
    )
    assert "Connection refused" in said
    assert said.endswith("; check CHATRECORD_DATABASE_URL and that the server answers\n")
    assert cli_error(tmp_path, CHATRECORD_DATABASE_URL=url) == said


def test_a_sqlite_file_on_a_read_only_file_system_is_store_unusable(tmp_path: Path) -> None:
    # the issue's own case: a new store on a read-only file system (a read-only bind mount in a
    # mount namespace of the test's own); Chatrecord() runs in a subprocess inside it
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    namespace = ["unshare", "-m"] if os.getuid() == 0 else ["unshare", "-rm"]
    mount = [*namespace, "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(folder)]
    if subprocess.run([*mount, "true"], capture_output=True).returncode != 0:
        message = "no mount namespace here to make a read-only file system"
        if _in_ci():
            pytest.fail(message, pytrace=False)  # CI runs as root on Linux: it must run there
        pytest.skip(message)
    path = folder / "store.sqlite"
    script = (
        "from adapters.api import Chatrecord\nfrom adapters.backends.settings import StoreUnusable\n"
        "try:\n    Chatrecord()\nexcept StoreUnusable as error:\n    print(f'StoreUnusable: {error}')\n"
    )
    done = subprocess.run(
        [*mount, sys.executable, "-c", script],
        cwd=ROOT,
        env=cli_env(CHATRECORD_DB=str(path)),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        f"StoreUnusable: the SQLite file {path} cannot be used (unable to open database file); "
        "check CHATRECORD_DB: its folder must exist and the file must be readable and writable\n"
    )
    cli = subprocess.run(
        [*mount, sys.executable, "-m", "adapters.cli", "demo"],
        cwd=tmp_path,
        env=cli_env(CHATRECORD_DB=str(path)),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert (cli.returncode, cli.stderr) == (1, "error: " + done.stdout.removeprefix("StoreUnusable: "))
