"""Which SQLite files are a store's (`refuse_foreign`), and how one is opened read-only (`read_only_uri`)."""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

from domain.errors import ChatrecordError


class ForeignDatabase(ChatrecordError):
    """Raised when CHATRECORD_DB names a SQLite database of something else: it holds tables,
    none of them a chatrecord store's. Nothing is created in it."""


OWN_TABLES = ("stored_events", "stored_snapshots")
"""The library's tables of a chatrecord store; with `OWN_PREFIXES`, what a store's file holds."""
OWN_PREFIXES = ("chatrecord_", "views_")


def refuse_foreign(path: str) -> None:
    """Raises ForeignDatabase when the SQLite file at `path` holds tables, none of them a chatrecord
    store's. An empty file, a store being created, a file that is no database and a chatrecord store
    pass."""
    try:
        with closing(sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
    except sqlite3.Error:
        return  # not a database, or unreadable: the store's open names the reason
    if tables and not any(name in OWN_TABLES or name.startswith(OWN_PREFIXES) for name in tables):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise ForeignDatabase(
            f"CHATRECORD_DB: {path} is a SQLite database of something else (it holds {shown}, and no "
            "chatrecord store); point CHATRECORD_DB at a chatrecord store, or at a file that does not exist yet"
        )


def read_only_uri(path: str) -> str | None:
    """Returns a read-only URI for the SQLite file at `path` when this process cannot write it; else
    None. Without a WAL file it opens `immutable`. With a WAL file that holds writes, the file and
    WAL are copied to a private temporary folder, removed at exit, and the copy is read. Else
    `mode=ro`."""
    file = Path(path).resolve()
    folder = file.parent
    if os.access(file, os.W_OK) and os.access(folder, os.W_OK):
        return None
    uri = file.as_uri() + "?mode=ro"
    shm, wal = Path(f"{file}-shm"), Path(f"{file}-wal")
    if not os.access(folder, os.W_OK) and not shm.exists():
        if not (wal.exists() and wal.stat().st_size):
            return uri + "&immutable=1"
        return _private_copy(file, wal).as_uri() + "?mode=ro"
    return uri


def _private_copy(file: Path, wal: Path) -> Path:
    """Returns a copy of `file` and its WAL `wal` in a private temporary folder, removed at exit."""
    folder = tempfile.mkdtemp(prefix="chatrecord-read-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    copy = Path(folder) / file.name
    shutil.copyfile(file, copy)  # no process writes it meanwhile: a writer would have made its -shm
    shutil.copyfile(wal, f"{copy}-wal")
    return copy
