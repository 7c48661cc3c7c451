"""Runs `chatrecord` as a subprocess (`python -m adapters.cli`) on a store of the test's own:
a SQLite file in the test's tmp dir, or a fresh schema on the test PostgreSQL server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
DEMO = DATA / "demo_seo_tour.jsonl"

Run = Callable[..., subprocess.CompletedProcess[str]]


def cli_env(**settings: str) -> dict[str, str]:
    """Returns the environment of a CLI run: the caller's, without any store settings or forced
    colours, 80 columns wide, with no plain progress line (a run slowed past 5 s by a busy machine
    would print one on stderr, which the tests compare whole), plus `settings`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CHATRECORD_") and k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    }
    env.update(COLUMNS="80", LINES="50", PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8", CHATRECORD_PROGRESS_SECONDS="86400")
    env.update(settings)
    return env


def runner(cwd: Path, **settings: str) -> Run:
    """Returns `run(*args)`, which runs `chatrecord *args` with `settings` in `cwd`."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "adapters.cli", *map(str, args)],
            cwd=cwd,
            env=cli_env(**settings),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
        )

    return run


def json_lines(stdout: str) -> list[Any]:
    """Returns each line of `stdout` parsed as JSON."""
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.fixture
def sqlite_run(tmp_path: Path) -> Run:
    """Runs the CLI on a SQLite file of this test's own."""
    return runner(tmp_path, CHATRECORD_DB=str(tmp_path / "store.sqlite"))


@pytest.fixture(params=["sqlite", "postgres"])
def store_run(request: pytest.FixtureRequest, tmp_path: Path) -> Run:
    """Runs the CLI on each backend in turn: a SQLite file, then a fresh PostgreSQL schema
    (which fails, not skips, in CI when the server does not answer; see tests/conftest.py)."""
    if request.param == "sqlite":
        return runner(tmp_path, CHATRECORD_DB=str(tmp_path / "store.sqlite"))
    url = request.getfixturevalue("postgres_url")
    schema = request.getfixturevalue("postgres_schema")
    joiner = "&" if "?" in url else "?"
    return runner(tmp_path, CHATRECORD_DATABASE_URL=f"{url}{joiner}schema={schema}")
