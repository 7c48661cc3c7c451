"""Ctrl-C (SIGINT) and SIGTERM on the command line, and the progress of long work. `Interrupts` turns both
signals into KeyboardInterrupt. Inside `held()` a signal waits until the block ends, so a write and its
count are never cut in two. `IngestProgress` shows an ingest's progress: rich's bar on a terminal stderr,
else a plain line every `PROGRESS_SECONDS` (e.g. `ingest: export.jsonl: 12,000 of ~19,000 lines, 2,300
lines/s`)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from adapters.api import IngestReport
from adapters.cli.app import warn

INTERRUPTED = 130
"""The exit status of a command a signal stopped (128 + SIGINT's 2, as shells report Ctrl-C)."""
PROGRESS_SECONDS = 5.0
"""Seconds between two plain progress lines (stderr not a terminal); the environment variable
CHATRECORD_PROGRESS_SECONDS sets another (0: a line after each batch)."""


class Interrupts:
    """While entered (main thread), SIGINT and SIGTERM raise KeyboardInterrupt at once. Inside `held()`,
    they raise when the outermost held block ends. `received`: the last signal's number, None before one.
    The handlers before are restored on exit."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._holding = 0
        self._held = False
        self._before: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self._before[number] = signal.signal(number, self._handler)
        return self

    def __exit__(self, *_: object) -> None:
        for number, handler in self._before.items():
            signal.signal(number, handler)
        self._before = {}

    def _handler(self, number: int, frame: FrameType | None) -> None:
        self.received = number
        if self._holding:
            self._held = True
            return
        raise KeyboardInterrupt

    @contextmanager
    def held(self) -> Iterator[None]:
        """A block a signal does not cut: one received meanwhile is raised as it ends."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            if self._held and not self._holding:
                self._held = False
                raise KeyboardInterrupt


def progress_seconds() -> float:
    """Returns the seconds between plain progress lines: CHATRECORD_PROGRESS_SECONDS, else PROGRESS_SECONDS.
    A value that is not a number >= 0 counts as unset."""
    try:
        seconds = float(os.environ.get("CHATRECORD_PROGRESS_SECONDS", ""))
    except ValueError:
        return PROGRESS_SECONDS
    return seconds if seconds >= 0 else PROGRESS_SECONDS


class IngestProgress:
    """Called with the ingest's report after each stored batch. Entered around the ingest of one source of
    `size` bytes (None: unknown)."""

    def __init__(self, console: Console, source: str, size: int | None) -> None:
        self.console, self.source, self.size = console, source, size
        self.every = progress_seconds()
        self.started = self.last = time.monotonic()
        self._bar: Progress | None = None
        self._task: Any = None

    def __enter__(self) -> IngestProgress:
        self.started = self.last = time.monotonic()
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn(f"ingesting {self.source}"),
                BarColumn(),
                TextColumn("{task.fields[lines]} lines, {task.fields[rate]} lines/s"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("ingest", total=self.size, lines="0", rate="0")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None

    def __call__(self, report: IngestReport) -> None:
        now = time.monotonic()
        rate = report.read_lines / (now - self.started) if now > self.started else 0.0
        if self._bar is not None:
            self._bar.update(self._task, completed=report.read_bytes, lines=f"{report.read_lines:,}", rate=f"{rate:,.0f}")
            return
        if now - self.last < self.every:
            return
        self.last = now
        warn(self.line(report, rate))

    def line(self, report: IngestReport, rate: float) -> str:
        """Returns the plain progress line: `ingest: NAME: 12,000 of ~19,000 lines, 2,300 lines/s`. `of ~N`
        is estimated from the bytes read, where the size is known."""
        of = ""
        if self.size and report.read_bytes:
            of = f" of ~{max(report.read_lines, round(report.read_lines * self.size / report.read_bytes)):,}"
        return f"ingest: {self.source}: {report.read_lines:,}{of} lines, {rate:,.0f} lines/s"


class RebuildLines:
    """Called with a rebuild's progress where stderr is no terminal. Prints `rebuild: 12,000 of 40,000
    events, 5,000 events/s` every PROGRESS_SECONDS."""

    def __init__(self) -> None:
        self.every = progress_seconds()
        self.started = self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        rate = done / (now - self.started) if now > self.started else 0.0
        warn(f"rebuild: {done:,} of {total:,} events, {rate:,.0f} events/s")


def interrupted_line(report: IngestReport) -> str:
    """Returns what an interrupted ingest says on stderr: what was stored and how to resume."""
    if not report.last_line:
        return f"interrupted: {report.source}: nothing was stored; run the same command again to ingest it"
    return (
        f"interrupted: {report.source}: stored up to line {report.last_line:,} ({report.lines:,} "
        f"line{'' if report.lines == 1 else 's'}, {report.appended:,} event{'' if report.appended == 1 else 's'} "
        "appended), nothing after it; run the same command again to resume (lines stored are not stored twice)"
    )
