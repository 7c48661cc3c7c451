"""The configured store: a setting the store cannot use is one line naming the setting and what
to do (exit 1, no traceback), and a SQLite writer waits for another process's write."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import DATA, DEMO, runner

HOLD_WRITE_LOCK = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
connection.execute("CREATE TABLE IF NOT EXISTS another_writer (x)")
connection.execute("INSERT INTO another_writer VALUES (1)")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
connection.execute("COMMIT")
print("released", time.monotonic(), flush=True)
"""


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


def test_a_sqlite_file_in_a_folder_that_does_not_exist_names_chatrecord_db(tmp_path: Path):
    failed = runner(tmp_path, CHATRECORD_DB="no/such/folder/c.sqlite")("demo")

    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr == (
        "error: the SQLite file no/such/folder/c.sqlite cannot be used (unable to open database file); "
        "check CHATRECORD_DB: its folder must exist and the file must be readable and writable\n"
    )


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

    writer = subprocess.Popen([sys.executable, "-c", HOLD_WRITE_LOCK, str(tmp_path / "c.sqlite"), "1.5"],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline() == "holding\n"
    waited = run(*args)
    finished = time.monotonic()
    released = float(writer.stdout.readline().split()[1])
    writer.wait(timeout=10)

    assert (waited.returncode, waited.stderr) == (0, "")
    assert waited.stdout
    assert finished > released
