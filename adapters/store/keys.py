"""The data keys of the conversations: table `chatrecord_keys(conversation, wrapped_key, erased_at)`.

`DataKeys` holds what is common; each backend's module (`adapters.backends`) reads and writes
the table (`SQLiteDataKeys`, `PostgresDataKeys`, `MemoryDataKeys`).

`key(id, create=...)` returns a conversation's data key (made on its first text), None once
it was erased; `erase(id)` deletes the key and records when (the row stays, `wrapped_key`
NULL); `scrub()` removes what deleted rows leave in the database files: on SQLite a VACUUM
and a WAL checkpoint that truncates the log, on PostgreSQL a `VACUUM FULL` of the key table
(the server's own WAL files and backups are outside the store's reach; see README, "Erasing a
conversation"). Keys read are kept in memory for at most KEY_CACHE_SECONDS, so a process that
read a key before another process erased it stops reading the texts soon after.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from adapters.store.crypto import MissingDataKey, new_key, unwrap, wrap

KEYS_TABLE = "chatrecord_keys"
KEY_CACHE_SECONDS = 2.0

Row = tuple[bytes | None, Any]
"""A key row: the wrapped key (None once erased) and when it was erased (None before)."""


class DataKeys:
    """A conversation's data key, read from and written to the key table of one backend."""

    def __init__(self, master: bytes | None) -> None:
        self.master = master
        self._cache: dict[UUID, tuple[float, bytes | None]] = {}

    def key(self, originator_id: UUID, *, create: bool) -> bytes | None:
        """Returns the conversation's data key, None when it was erased. Without a key, makes
        one if `create`, else raises MissingDataKey."""
        cached = self._cache.get(originator_id)
        if cached is not None and time.monotonic() - cached[0] < KEY_CACHE_SECONDS:
            return cached[1]
        row = self._select(originator_id)
        if row is None:
            if not create:
                raise MissingDataKey(f"no data key for conversation {originator_id}, and it was not erased")
            self._insert(originator_id, wrap(new_key(), self.master, originator_id))
            row = self._select(originator_id)
            assert row is not None
        wrapped, erased_at = row
        key = None if erased_at is not None or wrapped is None else unwrap(bytes(wrapped), self.master, originator_id)
        self._cache[originator_id] = (time.monotonic(), key)
        return key

    def erased_at(self, originator_id: UUID) -> datetime | None:
        """Returns when the conversation's key was erased, None if it was not."""
        row = self._select(originator_id)
        if row is None or row[1] is None:
            return None
        at = row[1]
        return at if isinstance(at, datetime) else datetime.fromisoformat(at)

    def erase(self, originator_id: UUID, at: datetime | None = None) -> None:
        """Deletes the conversation's key and records `at` (default now) as its erasure time;
        an erased key stays erased at its first time (idempotent)."""
        self._erase(originator_id, at or datetime.now(timezone.utc))
        self._cache.pop(originator_id, None)

    def scrub(self) -> None:
        """Removes the bytes of deleted rows from the database files where the backend can."""

    def _select(self, originator_id: UUID) -> Row | None:
        raise NotImplementedError

    def _insert(self, originator_id: UUID, wrapped: bytes) -> None:
        """Inserts a key unless the conversation has one (a concurrent first text won)."""
        raise NotImplementedError

    def _erase(self, originator_id: UUID, at: datetime) -> None:
        raise NotImplementedError
