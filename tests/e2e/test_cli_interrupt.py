"""Long work says where it is, and an interrupt says what was kept (issue 20, item 9), on each
backend: `ingest` prints a progress line when stderr is no terminal; SIGINT or SIGTERM stops it
after the batch being stored, says up to which line the file is stored and exits with 130; a
kill -9 loses nothing stored either; running the same ingest again resumes.

The signal lands mid-file without any timing: the file is a FIFO the test writes 1,200 lines
into and keeps open, so the ingest stores two batches of 500 (each announced by a progress
line, CHATRECORD_PROGRESS_SECONDS=0) and then waits for more; the test sends the signal once
it has read the second announcement."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import cli_env
from tests.integration.test_batched_ingest import export

LINES = export(400)  # 1,603 lines of three conversations, one event each


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The store settings of a CLI run: a SQLite file, then a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return {"CHATRECORD_DB": str(tmp_path / "store.sqlite")}
    url = request.getfixturevalue("postgres_url")
    schema = request.getfixturevalue("postgres_schema")
    return {"CHATRECORD_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}schema={schema}"}


def ingest(cwd: Path, settings: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", "ingest", *args],
        cwd=cwd,
        env=cli_env(CHATRECORD_PROGRESS_SECONDS="0", **settings),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def stopped_mid_file(tmp_path: Path, settings: dict[str, str], number: int) -> tuple[int, str, list[str]]:
    """Runs `ingest export.jsonl` on a FIFO holding the first 1,200 lines, sends signal
    `number` after the second batch is stored and returns the exit status, stdout and stderr's
    lines."""
    fifo = tmp_path / "export.jsonl"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [sys.executable, "-m", "adapters.cli", "ingest", "export.jsonl"],
        cwd=tmp_path,
        env=cli_env(CHATRECORD_PROGRESS_SECONDS="0", **settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        with open(fifo, "wb") as writer:  # opens once the ingest opened the FIFO to read
            writer.write(b"".join(LINES[:1200]))
            writer.flush()
            assert process.stderr is not None
            seen: list[str] = []
            while not any(line.startswith("ingest: export.jsonl: 1,000 lines") for line in seen):
                line = process.stderr.readline()
                assert line, f"the ingest ended early: {seen}"
                seen.append(line.rstrip("\n"))
            process.send_signal(number)  # the writer stays open: the ingest waits for line 1,201
            out, rest = process.communicate(timeout=60)
        return process.returncode, out, [*seen, *rest.splitlines()]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_ingest_says_what_it_stored_and_a_rerun_resumes(
    tmp_path: Path, settings: dict[str, str], number: int
) -> None:
    status, out, err = stopped_mid_file(tmp_path, settings, number)

    assert status == 130
    assert out == "export.jsonl: 1000 events appended, 0 lines already recorded; interrupted after line 1000\n"
    assert err[0].startswith("ingest: export.jsonl: 500 lines, ")
    assert err[2:] == [
        "interrupted: export.jsonl: stored up to line 1,000 (1,000 lines, 1,000 events appended), nothing after it; "
        "run the same command again to resume (lines stored are not stored twice)"
    ]
    assert "Traceback" not in "\n".join(err)
    (tmp_path / "export.jsonl").unlink()
    (tmp_path / "export.jsonl").write_bytes(b"".join(LINES))
    again = ingest(tmp_path, settings, "export.jsonl")
    assert (again.returncode, again.stdout) == (0, "export.jsonl: 603 events appended, 1000 lines already recorded\n")


def test_an_ingest_killed_mid_file_keeps_every_batch_stored_and_a_rerun_resumes(tmp_path: Path, settings: dict[str, str]) -> None:
    status, out, _ = stopped_mid_file(tmp_path, settings, signal.SIGKILL)

    assert (status, out) == (-signal.SIGKILL, "")
    (tmp_path / "export.jsonl").unlink()
    (tmp_path / "export.jsonl").write_bytes(b"".join(LINES))
    again = ingest(tmp_path, settings, "export.jsonl")
    assert (again.returncode, again.stdout) == (0, "export.jsonl: 603 events appended, 1000 lines already recorded\n")
    verify = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "verify"],
        cwd=tmp_path,
        env=cli_env(**settings),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert verify.stdout.splitlines()[-1] == "3 conversations verified: 3 ok, 0 broken"


def test_an_ingest_prints_a_progress_line_per_interval_when_stderr_is_no_terminal(
    tmp_path: Path, settings: dict[str, str]
) -> None:
    (tmp_path / "export.jsonl").write_bytes(b"".join(LINES))
    result = ingest(tmp_path, settings, "export.jsonl", "--batch-lines", "400")

    assert result.returncode == 0
    assert result.stdout == "export.jsonl: 1603 events appended, 0 lines already recorded\n"
    lines = result.stderr.splitlines()
    shown = [re.sub(r"~[\d,]+ lines, [\d,]+ lines/s$", "~N lines, R lines/s", line) for line in lines]
    assert shown == [f"ingest: export.jsonl: {n} of ~N lines, R lines/s" for n in ("400", "800", "1,200", "1,600", "1,603")]
    assert lines[-1].startswith("ingest: export.jsonl: 1,603 of ~1,603 lines, ")  # all read: the estimate is the count


INTERRUPT_AT_FIRST_PAGE = """
import os
import signal

from adapters.bootstrap import read_models
from adapters.views import log_fold

fold_page = log_fold.fold_page


def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C as the rebuild folds its first page
    return fold_page(*args, **kwargs)


log_fold.fold_page = interrupted
"""
"""A `sitecustomize` module: the process it starts in gets SIGINT as a rebuild folds its first page."""


def test_an_interrupted_rebuild_drops_its_half_built_tables_and_says_so(tmp_path: Path, settings: dict[str, str]) -> None:
    (tmp_path / "export.jsonl").write_bytes(b"".join(LINES[:200]))
    assert ingest(tmp_path, settings, "export.jsonl").returncode == 0
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(INTERRUPT_AT_FIRST_PAGE, encoding="utf-8")
    env = cli_env(**settings)
    env["PYTHONPATH"] = f"{hook}{os.pathsep}{env['PYTHONPATH']}"
    rebuild = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "rebuild", "--rules", "2026-11-01"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )

    assert (rebuild.returncode, rebuild.stdout) == (130, "")
    assert rebuild.stderr == (
        "interrupted: rebuild under 2026-11-01: the half-built tables views_g2_* were dropped; nothing "
        "was switched: the live read models are as they were (2026-11-02); run it again to rebuild\n"
    )
    assert generations(settings) == {1}
    again = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "rebuild", "--rules", "2026-11-01", "--json"],
        cwd=tmp_path,
        env=cli_env(**settings),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert (again.returncode, json.loads(again.stdout)["from"]) == (0, "2026-11-02")
    assert generations(settings) == {3}


def generations(settings: dict[str, str]) -> set[int]:
    """Returns the generations of read models whose tables the store of `settings` holds."""
    from adapters.bootstrap import open_store, read_models

    store = open_store(settings)
    try:
        backend = read_models(store).storage
        with backend.transaction(write=False) as curs:
            return backend.generations(curs)
    finally:
        store.close()


def test_a_rebuild_in_worker_processes_ends_without_a_traceback(tmp_path: Path, postgres_url: str, postgres_schema: str) -> None:
    # A worker kept the command line's handler: stopped as it closed its store, it printed a
    # KeyboardInterrupt's traceback (10 runs of 10), and the rebuild exited 0 all the same.
    settings = {"CHATRECORD_DATABASE_URL": f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema={postgres_schema}"}
    (tmp_path / "export.jsonl").write_bytes(b"".join(LINES[:200]))
    assert ingest(tmp_path, settings, "export.jsonl").returncode == 0

    for rules in ("2026-11-01", "2026-11-02", "2026-11-01"):
        rebuild = subprocess.run(
            [sys.executable, "-m", "adapters.cli", "rebuild", "--rules", rules, "--workers", "2"],
            cwd=tmp_path,
            env=cli_env(**settings),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
        )
        assert (rebuild.returncode, rebuild.stderr) == (0, ""), rules
        assert "(folded in 2 processes)" in rebuild.stdout, rebuild.stdout
