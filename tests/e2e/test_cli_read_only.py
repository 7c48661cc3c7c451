"""A read-only SQLite archive can be inspected (issue 20, item 10; issue 35, item 4): every reading
command (`list`, `audit`, `verify`, `replay --conversation`, `export`, `timeline`, `traces show`,
`rebuild --diff`, `keys status`) on a store file the process cannot write
(no write permission on the file and its folder; a read-only file system) print what they print
on a writable one, and change no byte; a writing command still fails with one line.

The tests run as root, which ignores permission bits; so the command runs without the
capabilities that let root do that (`setpriv --bounding-set -dac_override,-dac_read_search`),
and the read-only file system is a read-only bind mount in a mount namespace of its own
(`unshare -m`)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import _in_ci
from tests.e2e.conftest import DATA, DEMO, cli_env, runner

READS = [
    ("list",),
    ("audit", "conv-demo-seo", "--json"),
    ("verify",),
    ("verify", "--rows"),
    ("replay", "--conversation", "conv-behalten", "--json"),
    ("export", "conv-demo-seo"),
    ("timeline", "conv-demo-seo", "-o", "-"),  # it failed: "attempt to write a readonly database"
    ("traces", "show", "conv-demo-seo"),  # so did this
    ("keys", "status", "--json"),
    ("rebuild", "--rules", "2026-11-01", "--diff", "--json"),
]


def timeless(page: str) -> str:
    """Returns `page` without the minutes it was written and checked at (the timeline's stamps)."""
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC", "(time)", page)


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[tuple[Path, dict[tuple[str, ...], str]]]:
    """Yields a store file in a folder of its own, both made read-only (0444, 0555), and what
    each reading command printed while they were writable; restores the modes afterwards."""
    folder = tmp_path / "archive"
    folder.mkdir()
    run = runner(tmp_path, CHATRECORD_DB=str(folder / "store.sqlite"))
    assert run("ingest", DEMO, DATA / "behalten_tour.jsonl").returncode == 0
    expected = {}
    for command in READS:
        done = run(*command)
        assert done.returncode == 0, done.stderr
        expected[command] = timeless(done.stdout)
    assert sorted(p.name for p in folder.iterdir()) == ["store.sqlite"]
    (folder / "store.sqlite").chmod(0o444)
    folder.chmod(0o555)
    try:
        yield folder / "store.sqlite", expected
    finally:
        folder.chmod(0o755)
        (folder / "store.sqlite").chmod(0o644)


def without_root_powers() -> list[str]:
    """The command prefix that makes root obey permission bits (nothing for another user)."""
    if os.getuid() != 0:
        return []
    assert shutil.which("setpriv"), "setpriv (util-linux) is needed to drop root's DAC capabilities"
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def cli(prefix: list[str], store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "adapters.cli", *args],
        cwd=store.parent.parent,
        env=cli_env(CHATRECORD_DB=str(store)),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reading_commands_inspect_a_store_without_write_permission(archive: tuple[Path, dict[tuple[str, ...], str]]) -> None:
    store, expected = archive
    prefix = without_root_powers()
    denied = cli(prefix, store, "ingest", str(DATA / "demo_seo_tour.jsonl"))  # proves the permissions hold
    assert denied.returncode == 1 and "Traceback" not in denied.stderr
    assert "(attempt to write a readonly database)" in denied.stderr or "unable to open" in denied.stderr, denied.stderr
    before = digest(store)

    for command in READS:
        done = cli(prefix, store, *command)
        assert (done.returncode, done.stderr) == (0, ""), command
        assert timeless(done.stdout) == expected[command], command

    assert digest(store) == before
    assert sorted(p.name for p in store.parent.iterdir()) == ["store.sqlite"]


def test_reading_commands_inspect_a_store_on_a_read_only_file_system(tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    store = folder / "store.sqlite"
    run = runner(tmp_path, CHATRECORD_DB=str(store))
    assert run("ingest", DEMO).returncode == 0
    expected = run("audit", "conv-demo-seo", "--json").stdout
    namespace = ["unshare", "-m"] if os.getuid() == 0 else ["unshare", "-rm"]
    mount = [*namespace, "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(folder)]
    probe = subprocess.run([*mount, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        message = f"no mount namespace here to make a read-only file system: {probe.stderr.strip()}"
        if _in_ci():
            pytest.fail(message, pytrace=False)  # CI runs as root on Linux: it must run there
        pytest.skip(message)
    before = digest(store)

    denied = cli(mount, store, "ingest", str(DATA / "behalten_tour.jsonl"))
    assert denied.returncode == 1 and "Traceback" not in denied.stderr and "cannot be used (" in denied.stderr
    for command in (("audit", "conv-demo-seo", "--json"), ("verify",)):
        done = cli(mount, store, *command)
        assert (done.returncode, done.stderr) == (0, ""), command
    assert cli(mount, store, "audit", "conv-demo-seo", "--json").stdout == expected
    assert digest(store) == before


def test_replay_of_a_read_only_store_whose_read_models_lag_shows_the_log_s_turns(tmp_path: Path) -> None:
    import sqlite3

    folder = tmp_path / "archive"
    folder.mkdir()
    store = folder / "store.sqlite"
    run = runner(tmp_path, CHATRECORD_DB=str(store))
    assert run("ingest", DEMO).returncode == 0
    expected = run("replay", "--conversation", "conv-demo-seo", "--json").stdout
    with sqlite3.connect(store) as conn:  # the read models as a failed view step leaves them: behind the log
        conn.execute("DELETE FROM views_g1_heads")
    conn.close()
    store.chmod(0o444)
    folder.chmod(0o555)
    try:
        done = cli(without_root_powers(), store, "replay", "--conversation", "conv-demo-seo", "--json")
    finally:
        folder.chmod(0o755)
        store.chmod(0o644)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        expected,
        "warning: the read models differ from the log for the latest turn; the log's is shown. "
        "Run: chatrecord rebuild --rules 2026-11-02\n",
    )


def test_reading_commands_read_an_archive_copied_with_its_wal_but_not_its_shm(tmp_path: Path) -> None:
    import sqlite3

    store = tmp_path / "live" / "store.sqlite"
    store.parent.mkdir()
    run = runner(tmp_path, CHATRECORD_DB=str(store))
    assert run("ingest", DEMO).returncode == 0
    keeper = sqlite3.connect(store)  # holds the file open: the next ingest's writes stay in the WAL
    keeper.execute("SELECT count(*) FROM stored_events").fetchone()
    assert run("ingest", DATA / "behalten_tour.jsonl").returncode == 0
    archive = tmp_path / "archive"
    archive.mkdir()
    shutil.copyfile(store, archive / "store.sqlite")  # copied as an archive is: the file and its WAL
    shutil.copyfile(f"{store}-wal", archive / "store.sqlite-wal")
    keeper.close()
    expected = {command: run(*command).stdout for command in READS[:3]}
    for file in archive.iterdir():
        file.chmod(0o444)
    archive.chmod(0o555)
    try:
        with closing(sqlite3.connect((archive / "store.sqlite").as_uri() + "?mode=ro&immutable=1", uri=True)) as conn:
            without_wal = conn.execute("SELECT count(*) FROM stored_events").fetchone()[0]
        before = digest(archive / "store.sqlite"), digest(archive / "store.sqlite-wal")
        done = {command: cli(without_root_powers(), archive / "store.sqlite", *command) for command in READS[:3]}
        after = digest(archive / "store.sqlite"), digest(archive / "store.sqlite-wal")
        left = sorted(p.name for p in archive.iterdir())
    finally:
        archive.chmod(0o755)

    assert without_wal == 20  # the demo's events only: the WAL holds the Behalten tour
    for command, answer in done.items():
        assert (answer.returncode, answer.stderr) == (0, ""), command  # it was "unable to open database file"
        assert answer.stdout == expected[command], command
    assert "conv-behalten" in done["list",].stdout
    assert after == before and left == ["store.sqlite", "store.sqlite-wal"]


def test_timeline_of_a_read_only_store_never_shown_before_writes_the_page_and_stores_nothing(tmp_path: Path) -> None:
    """No overview row and no verified position were kept while the file was writable: the page's overview
    is folded from the log in memory and its chain verdict recomputed, nothing stored (it failed: "attempt
    to write a readonly database")."""
    folder = tmp_path / "archive"
    folder.mkdir()
    store = folder / "store.sqlite"
    run = runner(tmp_path, CHATRECORD_DB=str(store))
    assert run("ingest", DEMO).returncode == 0
    shutil.copyfile(store, tmp_path / "writable.sqlite")
    written = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "writable.sqlite"))("timeline", "conv-demo-seo", "-o", "-")
    assert written.returncode == 0
    before = digest(store)
    store.chmod(0o444)
    folder.chmod(0o555)
    try:
        page = tmp_path / "page.html"
        done = cli(without_root_powers(), store, "timeline", "conv-demo-seo", "-o", str(page))
        left = sorted(p.name for p in folder.iterdir())
    finally:
        folder.chmod(0o755)
        store.chmod(0o644)
    html = page.read_text(encoding="utf-8")
    assert (done.returncode, done.stderr) == (0, f"{page}: timeline of conv-demo-seo, {len(html.encode()):,} bytes\n")
    assert timeless(html) == timeless(written.stdout)
    assert "✔ Chain verified: 20 events, head " in html and "every hash, from the first event to event 20, was recomputed" in html
    assert digest(store) == before and left == ["store.sqlite"]
