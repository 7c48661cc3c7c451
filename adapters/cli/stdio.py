"""The commands' standard input and output: `-` for standard input, JSON with invisible characters escaped,
and no store made by a read-only command."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from adapters.api import DEFAULT_DB, IngestReport, bounded_lines
from domain.errors import ChatrecordError

STDIN = "-"
"""The FILE argument that reads standard input."""

STDIN_NAME = "stdin"
"""The name standard input goes by in reports and errors."""


class NoStore(ChatrecordError):
    """Raised when a command that only reads is pointed at a SQLite file that does not exist."""


def is_stdin(path: Path | None) -> bool:
    """Returns True when a FILE argument is `-`, standard input."""
    return path is not None and str(path) == STDIN


def stdin_lines() -> Iterator[bytes]:
    """Yields the lines of standard input as bytes, each bounded as a file's are."""
    return bounded_lines(sys.stdin.buffer)


def require_store(environ: dict[str, str] | None = None) -> None:
    """Raises NoStore when the configured store is a SQLite file that does not exist, so a read-only command
    makes no empty store. PostgreSQL is not checked here."""
    environ = dict(os.environ) if environ is None else environ
    if environ.get("CHATRECORD_DATABASE_URL"):
        return
    path = environ.get("CHATRECORD_DB") or DEFAULT_DB
    if not Path(path).exists():
        raise NoStore(f"no store at {path}; check CHATRECORD_DB, or ingest into it first (chatrecord ingest FILE)")


FORMAT_CHARACTERS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
)
"""The format characters (Unicode category Cf, as of Unicode 15, with the unassigned points of
their blocks), as a regular expression's character class body: they print as nothing (the soft
hyphen U+00AD, zero-width characters, tag characters U+E0000–U+E007F) or reorder text (bidi
controls). Text output escapes them (`adapters.cli.render.visible`), and so does JSON output."""

_INVISIBLE = re.compile(f"[\x7f-\x9f\u2028\u2029{FORMAT_CHARACTERS}]")


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON writes a character above U+FFFF
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_bytes(value: Any) -> bytes:
    """Returns `value` as one line of UTF-8 JSON that reads back as the same value. DEL, C1 controls,
    U+2028/U+2029 and `FORMAT_CHARACTERS` are written as `\\uXXXX` (a surrogate pair above U+FFFF). JSON
    itself escapes C0 controls."""
    data = orjson.dumps(value)
    if data.isascii():
        return data
    text = data.decode("utf-8")
    if not _INVISIBLE.search(text):
        return data
    return _INVISIBLE.sub(_json_escape, text).encode("utf-8")


def ingest_json(report: IngestReport) -> dict[str, Any]:
    """Returns the summary object `ingest --json` prints for one source."""
    return {
        "source": report.source,
        "appended": report.appended,
        "repeated": report.repeated,
        "reproductions": report.reproductions,
        "rejected": list(report.rejected),
        "stopped_at": report.stopped_at or None,
        "error": str(report.stopped) if report.stopped is not None else None,
        "last_line": report.last_line or None,
        "interrupted": report.interrupted,
    }


def diff_json(old_rules: str, rules: str, diffs: list[Any]) -> dict[str, Any]:
    """Returns the object `rebuild --diff --json` prints: the rule sets and, per changing conversation, the
    entries before and after and the notes removed and added."""
    return {
        "from": old_rules,
        "to": rules,
        "switched": False,
        "conversations": [
            {
                "conversation": d.conversation,
                "records_changed": [{"segment": s, "before": b, "after": a} for s, b, a in d.records_changed],
                "notes_removed": list(d.notes_removed),
                "notes_added": list(d.notes_added),
            }
            for d in diffs
        ],
    }


def rebuild_json(report: Any, names: list[str] | None = None) -> dict[str, Any]:
    """Returns the object `rebuild --json` prints for a rebuild that switched; `errors` names each
    unreadable conversation (`names`, as verify does, else its key) with why it stopped."""
    names = list(report.unreadable) if names is None else names
    reasons = report.reasons or ("",) * len(names)
    return {
        "from": report.old_rules,
        "to": report.rules,
        "switched": True,
        "conversations": report.conversations,
        "events": report.events,
        "unreadable": list(report.unreadable),
        "errors": [{"conversation": name, "error": reason} for name, reason in zip(names, reasons, strict=True)],
        "workers": report.workers,
    }
