"""The configured store: a setting the store cannot use is one line naming the setting and what
to do (exit 1, no traceback), and a SQLite writer waits for another process's write."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import DATA, DEMO, cli_env, runner

HOLD_WRITE_LOCK = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
connection.execute("CREATE TABLE IF NOT EXISTS another_writer (x)")
connection.execute("INSERT INTO another_writer VALUES (1)")
print("holding", flush=True)
sys.stdin.readline()  # until the test has seen the command open the file
connection.execute("COMMIT")
print("released", time.monotonic(), flush=True)
"""


def opens(process: subprocess.Popen[str], path: Path) -> None:
    """Returns once `process` has `path` open (its /proc/PID/fd), within 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{process.pid}/fd").iterdir()):
                return
        time.sleep(0.05)
    raise AssertionError(f"{process.args} did not open {path} (exit status {process.poll()})")


def test_a_file_that_is_not_sqlite_names_chatrecord_db(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("these are my notes, not a database\n" * 40, encoding="utf-8")
    run = runner(tmp_path, CHATRECORD_DB="notes.txt")

    for args in (["demo"], ["audit", "conv-demo-seo"], ["replay", "--conversation", "conv-demo-seo"], ["rebuild"]):
        failed = run(*args)
        assert (failed.returncode, failed.stdout) == (1, ""), args
        assert failed.stderr == (
            "error: CHATRECORD_DB: notes.txt is not a SQLite database (file is not a database); point "
            "CHATRECORD_DB at a chatrecord store, or at a file that does not exist yet to start a new one\n"
        ), args


def test_a_store_file_cut_to_half_is_said_damaged_not_a_file_to_start_over_in(tmp_path: Path):
    run = runner(tmp_path, CHATRECORD_DB="store.sqlite")
    assert run("ingest", DEMO).returncode == 0
    whole = (tmp_path / "store.sqlite").read_bytes()
    (tmp_path / "t.sqlite").write_bytes(whole[: len(whole) // 2])  # head -c $((size/2)) store > t.sqlite
    cut = runner(tmp_path, CHATRECORD_DB="t.sqlite")

    for args in (["verify"], ["audit", "conv-demo-seo"], ["list"]):
        failed = cut(*args)
        assert (failed.returncode, failed.stdout, failed.stderr) == (
            1,
            "",
            "error: CHATRECORD_DB: the store file t.sqlite is damaged (database disk image is malformed); "
            "restore it from a backup (chatrecord does not repair a damaged store file)\n",
        ), args


def test_a_sqlite_file_in_a_folder_that_does_not_exist_names_chatrecord_db(tmp_path: Path):
    failed = runner(tmp_path, CHATRECORD_DB="no/such/folder/c.sqlite")("demo")

    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr == (
        "error: the SQLite file no/such/folder/c.sqlite cannot be used (unable to open database file); "
        "check CHATRECORD_DB: its folder must exist and the file must be readable and writable\n"
    )


def test_a_folder_as_chatrecord_db_is_named_a_folder_not_a_file(tmp_path: Path):
    (tmp_path / "stores").mkdir()
    run = runner(tmp_path, CHATRECORD_DB="stores")

    for args in (["demo"], ["list"], ["audit", "conv-demo-seo"]):
        failed = run(*args)
        # it said "its folder must exist", of a folder that does
        assert (failed.returncode, failed.stdout) == (1, ""), args
        assert failed.stderr == (
            "error: CHATRECORD_DB: stores is a folder, not a file; point CHATRECORD_DB at a store file in it "
            "(such as stores/chatrecord.sqlite), or at a file that does not exist yet\n"
        ), args


def test_a_schema_that_does_not_exist_says_how_to_create_it(tmp_path: Path, postgres_url: str):
    joiner = "&" if "?" in postgres_url else "?"
    run = runner(tmp_path, CHATRECORD_DATABASE_URL=f"{postgres_url}{joiner}schema=missing_schema")

    failed = run("demo")

    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr.startswith("error: CHATRECORD_DATABASE_URL: schema 'missing_schema' does not exist in database ")
    assert failed.stderr.endswith("; create it (CREATE SCHEMA missing_schema;) or leave out ?schema= to use public\n")


def test_a_schema_that_is_not_one_sql_name_is_refused_before_any_sql(tmp_path: Path):
    run = runner(tmp_path, CHATRECORD_DATABASE_URL="postgresql://postgres@127.0.0.1:5432/test?schema=a;drop")

    failed = run("demo")

    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr == (
        "error: CHATRECORD_DATABASE_URL: schema 'a;drop' is not a schema name; "
        "use 1–63 of A-Za-z0-9_, not starting with a digit\n"
    )


@pytest.mark.parametrize("value", ["abc", "0", "-1"])
def test_a_snapshot_interval_that_is_not_a_whole_number_of_at_least_one_is_one_line(tmp_path: Path, value: str):
    run = runner(tmp_path, CHATRECORD_DB="c.sqlite", CHATRECORD_SNAPSHOT_INTERVAL=value)

    failed = run("ingest", DEMO)

    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr == f"error: CHATRECORD_SNAPSHOT_INTERVAL must be a whole number >= 1, not '{value}'\n"
    assert not (tmp_path / "c.sqlite").exists()


@pytest.mark.parametrize(
    "args",
    [["replay", "--conversation", "conv-behalten", "--at", "5"], ["rebuild", "--rules", "2026-11-01"], ["demo"]],
    ids=["replay-conversation", "rebuild", "demo"],
)
def test_a_command_waits_for_another_process_writing_to_the_sqlite_file(tmp_path: Path, args: list[str]):
    run = runner(tmp_path, CHATRECORD_DB="c.sqlite")
    assert run("demo").returncode == 0  # the read models exist and are caught up
    assert run("ingest", DATA / "behalten_tour.jsonl").returncode == 0  # new events to catch up on

    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(tmp_path / "c.sqlite")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None and writer.stdout.readline() == "holding\n"
    command = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=tmp_path,
        env=cli_env(CHATRECORD_DB="c.sqlite"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    opens(command, tmp_path / "c.sqlite")
    time.sleep(1)  # not a synchronisation: what the command may do in it without the lock, it did
    assert command.poll() is None  # it waits for the lock
    writer.stdin.write("release\n")
    writer.stdin.flush()
    released = float(writer.stdout.readline().split()[1])
    stdout, stderr = command.communicate(timeout=120)
    finished = time.monotonic()
    writer.wait(timeout=10)
    waited = subprocess.CompletedProcess(command.args, command.returncode, stdout, stderr)

    assert (waited.returncode, waited.stderr) == (0, "")
    assert waited.stdout
    assert finished > released
