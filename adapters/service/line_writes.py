"""The use cases that write (`LineWrites`): one line (`record`), one conversation's lines all or nothing
(`record_lines`), and a source in batches (`ingest`). One writer per conversation at a time in this
process."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from threading import Lock
from typing import Any

from adapters.backends.settings import store_errors
from adapters.ingest import ParsedLine, bounded_lines, check_follows, line_text
from adapters.ingest.reproduction_line import ReproductionLine
from adapters.service.batched_ingest import BATCH_LINES, Ingestion
from adapters.service.common import OpenedStore, in_store_terms, lines_argument, required_line
from adapters.service.idempotent import FirstRun, Replayed, Result, run_once
from adapters.service.record_lines import IngestReport, Recorded, RecordLines, parse
from adapters.service.reproduction_records import store_record
from adapters.store.application import ConversationStore
from adapters.store.commands import HandleResult
from adapters.store.crypto import TextsErased
from domain.errors import InvalidInput

WRITER_LOCKS = 64
"""Writes of one process are serialised per conversation through this many locks (a conversation
id picks one by its hash), so concurrent requests on one conversation queue rather than conflict."""


class LineWrites:
    """The writes of a store (`opened`), each a Chatrecord method. `source_name` names `record`'s lines in
    errors, numbered by call. `position()` is the writes' read-after position (None without a reading
    store). Writes of one conversation queue on one of WRITER_LOCKS locks."""

    def __init__(self, opened: OpenedStore, source_name: str, position: Callable[[], str | None]) -> None:
        self.opened = opened
        self.source_name = source_name
        self._position = position
        self._lines = 0
        self._writers = [Lock() for _ in range(WRITER_LOCKS)]

    @property
    def store(self) -> ConversationStore:
        """The store written to."""
        return self.opened.store

    @in_store_terms
    def record(self, line: Mapping[str, Any] | str | bytes, follows: int | None = None) -> HandleResult:
        """Stores one input line (a dict or its JSON text) and returns what was appended. A repeat appends
        nothing and returns the first result (`HandleResult.repeated`).

        `follows`: the version the conversation must be at (0: not started), checked atomically. Raises
        InvalidInput (source, call number, field) for a bad shape. Raises VersionMismatch. Raises the
        domain's ChatrecordError, prefixed `source_name: line N, field:`, on a refusal. A refused line
        stores nothing."""
        if not isinstance(line, (Mapping, str, bytes)):
            raise TypeError(f"record takes one line as a dict or its JSON text, not {type(line).__name__}")
        self._lines += 1
        follows = check_follows(follows, self.source_name, self._lines)
        text = line_text(line, self._lines, self.source_name) if isinstance(line, Mapping) else line
        parsed = required_line(parse(text, self._lines, self.source_name), self.source_name, self._lines)
        result = self.handle(RecordLines([parsed], follows))
        read_after = self._position()
        return dataclasses.replace(result, read_after=read_after) if read_after is not None else result

    @in_store_terms
    def record_lines(self, lines: Iterable[str | bytes], source: str, follows: int | None = None) -> Recorded:
        """Stores one conversation's lines (JSON Lines text, blank lines skipped, numbered from 1) all or
        nothing; returns what was stored.

        Raises InvalidInput for a bad shape, no line, or several conversations. Raises VersionMismatch
        when `follows` is not the version. Raises the domain's ChatrecordError, naming the line, on a
        refusal. Nothing is stored then. Raises TypeError when `lines` is one str or bytes; split it
        first."""
        lines_argument("record_lines", lines)
        follows = check_follows(follows, source, 1)
        parsed: list[ParsedLine] = []
        for line_no, raw in enumerate(lines, start=1):
            line = parse(raw, line_no, source)
            if line is None:
                continue
            if parsed and line.conversation != parsed[0].conversation:
                raise InvalidInput(
                    source,
                    line_no,
                    "conversation",
                    f"one request holds the lines of one conversation, {parsed[0].conversation!r}",
                )
            parsed.append(line)
        if not parsed:
            raise InvalidInput(source, 1, "(line)", "expected at least one line, got none")
        command = RecordLines(parsed, follows)
        recorded = Recorded.of(self.handle(command), command)
        read_after = self._position()
        return dataclasses.replace(recorded, read_after=read_after) if read_after is not None else recorded

    def run_once(
        self, key: str, fingerprint: str, work: Callable[[], tuple[Result, str]], also: Collection[str] = ()
    ) -> FirstRun[Result] | Replayed:
        """Runs `work` once for the Idempotency-Key `key`, kept in the store with `fingerprint`
        (`adapters.service.idempotent.run_once`). Raises KeyReused, KeyInFlight, or what `work` raised."""
        return run_once(self.store.idempotency_keys, key, fingerprint, work, also)

    def handle(self, command: RecordLines) -> HandleResult:
        """Hands `command` to the store, one writer per conversation in this process. Threads queue; other
        processes conflict and retry."""
        with self._writers[hash(command.conversation) % WRITER_LOCKS]:
            try:
                return self.store.handle(command)
            except TextsErased as error:  # raised as the texts are sealed: name the line and the field
                raise command.erased(error) from None

    def ingest(
        self,
        lines: Iterable[str | bytes],
        source: str,
        skip_bad: bool = False,
        batch_lines: int = BATCH_LINES,
        progress: Callable[[IngestReport], object] | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> IngestReport:
        """Stores every line of `lines` (named `source`) and returns the report.

        A binary source is read a line at a time, each cut after LINE_BYTES_MAX + 1 bytes. Lines are
        stored in batches of at most `batch_lines`, one transaction each. `progress(report)` runs after
        each batch; `guard()` wraps each write. A bad line ends the ingest (`report.stopped`), unless
        `skip_bad` rejects it and goes on (`report.rejected`). An unusable store always ends it
        (`report.stopped` is the StoreUnusable). A KeyboardInterrupt sets `report.interrupted`. Raises
        TypeError when `lines` is one str or bytes. Raises ValueError for `batch_lines` < 1."""
        lines_argument("ingest", lines)
        if isinstance(lines, (io.BufferedIOBase, io.RawIOBase)):  # a file: each line read bounded
            lines = bounded_lines(lines)  # type: ignore[arg-type]  # io's binary streams are BinaryIO but for the name
        return Ingestion(
            self._handle_in_store_terms,
            self._handle_batch,
            source,
            skip_bad,
            batch_lines,
            progress,
            guard,
            keep_record=self._keep_record,
        ).run(lines)

    def _keep_record(self, record: ReproductionLine) -> bool:
        with store_errors(self.store):
            return store_record(self.store, record)

    def _handle_in_store_terms(self, command: RecordLines) -> HandleResult:
        with store_errors(self.store):
            return self.handle(command)

    def _handle_batch(self, commands: Sequence[RecordLines]) -> list[HandleResult]:
        """Hands `commands`, each of another conversation, to the store as one batch. Holds all their writer
        locks, taken in one order so two batches never deadlock."""
        locks = sorted({hash(command.conversation) % WRITER_LOCKS for command in commands})
        with contextlib.ExitStack() as held, store_errors(self.store):
            for number in locks:
                held.enter_context(self._writers[number])
            return self.store.handle_batch(commands)
