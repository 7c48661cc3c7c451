"""Ingesting a source of JSON Lines in batches: lines decided one by one, stored together.

A batch holds at most `BATCH_LINES` lines or `BATCH_BYTES` bytes, in file order. Its lines become one
`RecordLines` command per conversation, handed to `handle_batch`: one transaction, all or nothing. The
line-by-line ingest's promises hold:
- **The first bad line stops there.** The batch is stored up to the line before it. Then the ingest
  stops, or under `skip_bad` rejects that line alone and goes on.
- **A repeat is not stored twice**, within a batch or across batches and runs.
- **A reproduction record** (`export --with-reproductions`) is kept as its reproduction stream, after
  the lines before it are stored; one kept before counts as a repeat.
- **An interrupted ingest resumes**: a batch is stored whole or not at all.

A batch that cannot be stored as one is stored line by line (`handle_one`), which retries and names the
failing line. A store that cannot be used stops the ingest at its first unstored line."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from adapters.backends.settings import StoreUnusable
from adapters.ingest import ParsedLine
from adapters.ingest.error_messages import at_line
from adapters.ingest.reproduction_line import ReproductionLine, is_reproduction, parse_reproduction
from adapters.service.record_lines import IngestReport, RecordLines, parse
from adapters.store.commands import BatchConflict, BatchRefused, HandleResult
from domain.errors import ChatrecordError, InvalidInput

BATCH_LINES = 500
"""The most lines one batch (one transaction) holds."""
BATCH_BYTES = 8 * 1024 * 1024
"""The most bytes of input lines one batch holds (a batch of large segments ends sooner)."""

Progress = Callable[[IngestReport], object]


class Ingestion:
    """One ingest of a source (`run`). `handle_one` stores one command (`ConversationStore.handle`);
    `handle_batch` stores several of different conversations in one transaction. Both raise in the
    store's terms (`store_errors`). `guard()` is entered around each write and its accounting, so the
    report matches what was stored. `progress(report)` is called after each batch."""

    def __init__(
        self,
        handle_one: Callable[[RecordLines], HandleResult],
        handle_batch: Callable[[Sequence[RecordLines]], list[HandleResult]],
        source: str,
        skip_bad: bool = False,
        batch_lines: int = BATCH_LINES,
        progress: Progress | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
        keep_record: Callable[[ReproductionLine], bool] | None = None,
    ) -> None:
        if batch_lines < 1:
            raise ValueError(f"a batch holds at least one line, not {batch_lines}")
        self.handle_one, self.handle_batch = handle_one, handle_batch
        self.skip_bad, self.batch_lines = skip_bad, batch_lines
        self.progress, self.guard = progress, guard
        self.keep_record = keep_record
        self.report = IngestReport(source)

    def run(self, lines: Iterable[str | bytes]) -> IngestReport:
        """Stores every line of `lines` and returns the report. A KeyboardInterrupt sets
        `report.interrupted`; every batch before it is stored."""
        report = self.report
        pending: list[ParsedLine] = []
        size = 0
        try:
            for line_no, raw in enumerate(lines, start=1):
                report.read_lines, report.read_bytes = line_no, report.read_bytes + len(raw)
                if self.keep_record is not None and is_reproduction(raw):
                    if not self._store(pending):  # the conversation's lines before it first
                        return report
                    pending, size = [], 0
                    if not self._record(raw, line_no, self.keep_record):
                        return report
                    continue
                try:
                    line = parse(raw, line_no, report.source)
                except ChatrecordError as error:
                    if not self._store(pending):
                        return report
                    pending, size = [], 0
                    if not self._bad(error, line_no):
                        return report
                    continue
                if line is None:
                    continue
                pending.append(line)
                size += len(raw)
                if len(pending) >= self.batch_lines or size >= BATCH_BYTES:
                    if not self._store(pending):
                        return report
                    pending, size = [], 0
                    self._progress()
            self._store(pending)
            self._progress()
        except KeyboardInterrupt:
            report.interrupted = True
        return report

    def _record(self, raw: str | bytes, line_no: int, keep: Callable[[ReproductionLine], bool]) -> bool:
        """Keeps the reproduction record `raw` (`keep`: stored, or found kept before); a bad one
        or one the store refuses is a bad line. Returns False when the ingest stops."""
        try:
            record = parse_reproduction(raw, line_no, self.report.source)
            with self.guard():
                stored = keep(record)
                report = self.report
                report.reproductions += stored
                report.repeated += not stored
                report.lines += 1
                report.last_line = max(report.last_line, line_no)
        except InvalidInput as error:
            return self._bad(error, line_no)
        except ChatrecordError as error:
            return self._bad(at_line(error, self.report.source, line_no), line_no)
        return True

    def _progress(self) -> None:
        if self.progress is not None:
            self.progress(self.report)

    def _bad(self, error: ChatrecordError, line_no: int) -> bool:
        """Rejects a bad line under `skip_bad` (True: go on), else stops the ingest there."""
        if not self.skip_bad or isinstance(error, StoreUnusable):  # the store's fault, not the line's
            self.report.stopped, self.report.stopped_at = error, line_no
            return False
        self.report.rejected.append(str(error))
        return True

    def _store(self, pending: list[ParsedLine]) -> bool:
        """Stores `pending` (lines in file order) in one transaction where it can. Returns False when the
        ingest stops: a bad line without `skip_bad`, or an unusable store."""
        while pending:
            groups: dict[str, list[ParsedLine]] = {}
            for line in pending:
                groups.setdefault(line.conversation, []).append(line)
            commands = [RecordLines(lines) for lines in groups.values()]
            try:
                with self.guard():
                    results = self.handle_batch(commands)
                    self._account(commands, results)
                return True
            except BatchRefused as refused:
                placed: list[tuple[ParsedLine, ChatrecordError]] = []
                for number, error in refused.refusals.items():
                    at = commands[number].refused_at
                    if at is None:
                        return self._one_by_one(pending)  # refused without a line: one by one names it
                    placed.append((at, error))
                line, error = min(placed, key=lambda found: found[0].line)
                before = [earlier for earlier in pending if earlier.line < line.line]
                rejected = len(self.report.rejected)
                if before and not self._store(before):
                    return False
                if len(self.report.rejected) != rejected:  # it was decided on a line since rejected: again, without it
                    pending = [later for later in pending if later.line >= line.line]
                    continue
                if not self._bad(error, line.line):
                    return False
                pending = [later for later in pending if later.line > line.line]
            except (BatchConflict, ChatrecordError):  # a store that cannot be used too: the line it stops at
                return self._one_by_one(pending)
        return True

    def _one_by_one(self, pending: list[ParsedLine]) -> bool:
        """Stores each line of `pending` on its own, as the line-by-line ingest always did."""
        for line in pending:
            command = RecordLines([line])
            try:
                with self.guard():
                    result = self.handle_one(command)
                    self._account([command], [result])
            except ChatrecordError as error:
                if not self._bad(error, line.line):
                    return False
        return True

    def _account(self, commands: Sequence[RecordLines], results: Sequence[HandleResult]) -> None:
        """Counts what the stored commands did into the report."""
        report = self.report
        for command, result in zip(commands, results, strict=True):
            report.appended += len(result.appended)
            report.repeated += sum(1 for n in command.counts if n == 0) if result.appended else len(command.lines)
            report.lines += len(command.lines)
            report.last_line = max(report.last_line, command.lines[-1].line)
