"""A command's `-o FILE` (export, timeline, traces show) never names the store, writes the file
whole or leaves it as it was, and says on stderr what it wrote (issue 35, item 3)."""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import DEMO, cli_env, runner

WRITERS = [
    ("export", "conv-demo-seo"),
    ("export", "conv-demo-seo", "--format", "otlp"),
    ("timeline", "conv-demo-seo"),
    ("traces", "show", "conv-demo-seo"),
]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


NAMES = ["./sub/../h2.sqlite", "h2.sqlite-wal", "h2.sqlite-shm", "h2.sqlite-journal", "link", "hard"]
CASES = [(command, "h2.sqlite") for command in WRITERS] + [(WRITERS[0], name) for name in NAMES]


@pytest.mark.parametrize(("command", "name"), CASES, ids=[f"{' '.join(c[:-1])}-{n}" for c, n in CASES])
def test_an_output_file_that_is_the_store_is_refused_and_the_store_kept(
    tmp_path: Path, command: tuple[str, ...], name: str
) -> None:
    run = runner(tmp_path, CHATRECORD_DB="h2.sqlite")
    assert run("ingest", DEMO).returncode == 0
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to("h2.sqlite")
    os.link(tmp_path / "h2.sqlite", tmp_path / "hard")
    before = digest(tmp_path / "h2.sqlite")

    done = run(*command, "-o", name)

    # it replaced the store with the export (a 9 kB file), exit 0, silently
    store = "h2.sqlite" + (name.rpartition("h2.sqlite")[2] if "h2.sqlite" in name else "")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: -o {Path(name)}: that is the store's file {store} (CHATRECORD_DB); "
        "writing there would destroy the store; name another file\n"
    )
    assert digest(tmp_path / "h2.sqlite") == before
    assert run("verify").returncode == 0


def test_a_write_that_fails_midway_leaves_the_earlier_file_as_it_was(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "store.sqlite"))
    assert run("ingest", DEMO).returncode == 0
    trace = tmp_path / "out" / "trace.json"
    trace.parent.mkdir()
    trace.write_text("the trace of yesterday\n")

    def small_files() -> None:  # a file may grow to 40 kB, the trace is 60 kB: the write stops midway
        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))

    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "export", "conv-demo-seo", "--format", "otlp", "-o", str(trace)],
        cwd=tmp_path,
        env=cli_env(CHATRECORD_DB=str(tmp_path / "store.sqlite")),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_files,
    )

    # it left the first 40,000 bytes of the trace in place of yesterday's
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"error: {trace}: cannot be written (File too large)\n"
    assert trace.read_text() == "the trace of yesterday\n"
    assert sorted(p.name for p in trace.parent.iterdir()) == ["trace.json"]  # no temporary file left


def test_an_output_file_is_replaced_whole_keeping_its_mode_and_its_symlink(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB="store.sqlite")
    assert run("ingest", DEMO).returncode == 0
    (tmp_path / "bug.jsonl").write_text("old\n")
    (tmp_path / "bug.jsonl").chmod(0o640)
    (tmp_path / "latest.jsonl").symlink_to("bug.jsonl")

    done = run("export", "conv-demo-seo", "-o", "latest.jsonl")

    written = (tmp_path / "bug.jsonl").read_bytes()
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == f"latest.jsonl: 19 lines of conv-demo-seo, {len(written):,} bytes\n"
    assert written == run("export", "conv-demo-seo").stdout.encode()
    assert (tmp_path / "latest.jsonl").is_symlink() and (tmp_path / "bug.jsonl").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bug.jsonl", "latest.jsonl", "store.sqlite"]


def test_a_folder_as_the_output_file_is_one_line_error(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB="store.sqlite")
    assert run("ingest", DEMO).returncode == 0

    done = run("export", "conv-demo-seo", "-o", ".")

    assert (done.returncode, done.stdout, done.stderr) == (1, "", "error: -o .: is a folder; name a file in it\n")


@pytest.mark.parametrize(
    "command", [["export", "conv-demo-seo"], ["timeline", "conv-demo-seo"], ["traces", "show", "conv-demo-seo"]]
)
def test_an_empty_output_name_is_refused_as_empty_not_as_a_folder(tmp_path: Path, command: list[str]) -> None:
    """Found by a fresh user: `export -o ''` said "-o .: is a folder"."""
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    assert run("ingest", DEMO).returncode == 0
    done = run(*command, "-o", "")
    assert done.returncode == 2
    assert "the name is empty; name a file" in done.stderr and "is a folder" not in done.stderr


WHAT = {
    WRITERS[0]: "19 lines of conv-demo-seo",
    WRITERS[1]: "trace of conv-demo-seo as OTLP/JSON",
    WRITERS[2]: "timeline of conv-demo-seo",
    WRITERS[3]: "trace of conv-demo-seo as OTLP/JSON",
}


@pytest.mark.parametrize("command", WRITERS, ids=[" ".join(c) for c in WRITERS])
def test_dev_stdout_and_a_fifo_are_written_directly(tmp_path: Path, command: tuple[str, ...]) -> None:
    """Found by a fresh user: `export -o /dev/stdout` said "cannot be written (No such file or directory)"
    (a temporary file beside the pipe /dev/stdout leads to)."""
    import re
    import threading

    run = runner(tmp_path, CHATRECORD_DB="store.sqlite")
    assert run("ingest", DEMO).returncode == 0
    timeless = lambda text: re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC", "(time)", text)
    expected = timeless(run(*command, "-o", "-").stdout)

    done = run(*command, "-o", "/dev/stdout")  # stdout is a pipe here

    assert (done.returncode, timeless(done.stdout)) == (0, expected)
    assert done.stderr == f"/dev/stdout: {WHAT[command]}, {len(done.stdout.encode()):,} bytes\n"

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()))
    reader.start()
    done = run(*command, "-o", "fifo")
    reader.join(timeout=60)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == f"fifo: {WHAT[command]}, {len(read[0]):,} bytes\n"
    assert timeless(read[0].decode()) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "store.sqlite"]


def test_dev_stdout_that_leads_to_the_store_is_refused(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB="store.sqlite")
    assert run("ingest", DEMO).returncode == 0
    before = digest(tmp_path / "store.sqlite")

    with (tmp_path / "store.sqlite").open("ab") as store:
        done = subprocess.run(
            [sys.executable, "-m", "adapters.cli", "export", "conv-demo-seo", "-o", "/dev/stdout"],
            cwd=tmp_path,
            env=cli_env(CHATRECORD_DB="store.sqlite"),
            stdout=store,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )

    assert (done.returncode, done.stderr) == (
        1,
        "error: -o /dev/stdout: that is the store's file store.sqlite (CHATRECORD_DB); "
        "writing there would destroy the store; name another file\n",
    )
    assert digest(tmp_path / "store.sqlite") == before
