"""Ingestion for the command line: a file's lines into the store, one line at a time, with a
report of what was appended, what was recorded already and what was rejected.

By default ingestion stops at the first bad line (the lines before it stay stored); with
`skip_bad` it goes on and lists every rejected line. A line is bad when it does not parse
(`InvalidInput`, naming file, line and field) or when the conversation rejects it (a domain
error, named with file and line in front). Nothing of a bad line is stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from adapters.application import ConversationStore
from adapters.ingest import at_line, bounded_lines, parse_numbered
from domain.errors import ChatrecordError, InvalidInput

DEMO_FILE = "demo_seo_tour.jsonl"
DEMO_CONVERSATION = "conv-demo-seo"


@dataclass
class IngestReport:
    """What ingesting one source did. `stopped` is the error that ended it early, if any."""

    source: str
    appended: int = 0
    repeated: int = 0
    rejected: list[str] = field(default_factory=list)
    stopped: ChatrecordError | None = None
    stopped_at: int = 0

    def summary(self) -> str:
        """Returns one line: `demo.jsonl: 24 events appended, 0 lines already recorded`."""
        text = (
            f"{self.source}: {_count(self.appended, 'event')} appended, "
            f"{_count(self.repeated, 'line')} already recorded"
        )
        if self.rejected:
            text += f", {_count(len(self.rejected), 'line')} rejected"
        if self.stopped is not None:
            text += f"; stopped at line {self.stopped_at}"
        return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def ingest_lines(
    store: ConversationStore, lines: Iterable[str | bytes], source: str, skip_bad: bool = False
) -> IngestReport:
    """Returns the report of handing every line of `lines` (named `source`) to `store`.

    A bad line ends the ingestion (`report.stopped`) unless `skip_bad`, which rejects it and
    goes on (`report.rejected`, one message per line).
    """
    report = IngestReport(source)
    for line_no, raw in enumerate(lines, start=1):
        try:
            line = parse_numbered(raw, line_no, source)
            if line is None:
                continue
            result = store.handle(line)
        except InvalidInput as error:
            bad: ChatrecordError = error
        except ChatrecordError as error:
            bad = at_line(error, source, line_no)
        else:
            report.appended += len(result.appended)
            report.repeated += result.repeated
            continue
        if not skip_bad:
            report.stopped, report.stopped_at = bad, line_no
            return report
        report.rejected.append(str(bad))
    return report


def ingest_file(store: ConversationStore, path: Path, skip_bad: bool = False) -> IngestReport:
    """Returns the report of ingesting the JSON Lines file `path`, named by its file name.

    Raises OSError when the file cannot be read.
    """
    with path.open("rb") as stream:
        return ingest_lines(store, bounded_lines(stream), path.name, skip_bad)


def demo_lines() -> list[bytes]:
    """Returns the lines of the demo SEO tour shipped as package data (`adapters/data`)."""
    return resources.files("adapters").joinpath("data", DEMO_FILE).read_bytes().splitlines(keepends=True)
