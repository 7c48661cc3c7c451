"""The data keys of the conversations: table `chatrecord_keys(conversation, wrapped_key, erased_at)`;
and the store's master key check: table `chatrecord_master(id, sealed)`, one row or none.

`DataKeys` holds what is common; each backend's module (`adapters.backends`) reads and writes
the table (`SQLiteDataKeys`, `PostgresDataKeys`, `MemoryDataKeys`).

`key(id, create=...)` returns a conversation's data key (made on its first text), None once
it was erased; `erase(id)` deletes the key and records when (the row stays, `wrapped_key`
NULL); `scrub()` removes what deleted rows leave in the database files: on SQLite a VACUUM
and a WAL checkpoint that truncates the log, on PostgreSQL a `VACUUM FULL` of the key table
(the server's own WAL files and backups are outside the store's reach; see README, "Erasing a
conversation"). Keys read are kept in memory for at most KEY_CACHE_SECONDS, so a process that
read a key before another process erased it stops reading the texts soon after.

`check_master()` runs when a store opens (`ConversationStore`): a store that a master key
protects refuses a process without that key, and the first process with a master key to open a
store that has none makes the store its own (see the method). A new data key is inserted only
while the check row is the one this process verified (or, without a master key, while there is
none), so a process that opened before another protected the store cannot add a key either.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from adapters.store.crypto import (
    MASTER_MISSING,
    MASTER_WRONG,
    BadMasterKey,
    MissingDataKey,
    new_key,
    opens_check,
    seal_check,
    unwrap,
    wrap,
)

KEYS_TABLE = "chatrecord_keys"
MASTER_TABLE = "chatrecord_master"
"""One row (id 1) or none: the check value (`adapters.store.crypto.seal_check`) of the master
key that protects the store."""
KEY_CACHE_SECONDS = 2.0

Row = tuple[bytes | None, Any]
"""A key row: the wrapped key (None once erased) and when it was erased (None before)."""


class DataKeys:
    """A conversation's data key, read from and written to the key table of one backend."""

    def __init__(self, master: bytes | None) -> None:
        self.master = master
        self.check: bytes | None = None
        """The store's check value as this process verified it (`check_master`); None before,
        for a store no master key protects, or where it could not be written (read-only)."""
        self._cache: dict[UUID, tuple[float, bytes | None]] = {}

    def check_master(self) -> None:
        """Checks that this process may use the store's data keys, and marks the store as
        protected by its master key on the first open with one:

        - the store has a check row: the process needs the master key that opens it;
        - no check row, but wrapped data keys (a store written before check rows existed): the
          process needs a master key that unwraps one of them; then its check row is written;
        - neither: a process with a master key writes its check row (from then on the store
          needs that key; data keys stored unwrapped before stay readable); one without goes on.

        The row is inserted only if missing and then read back, so of processes opening a store
        at once one writes it and each verifies the one written. Nothing is written when the
        store has its row, nor where the database is read-only (a later write checks again).
        One query when the row exists. Raises BadMasterKey (MASTER_MISSING, MASTER_WRONG)."""
        stored = self._select_check()
        if stored is None:
            sample = self._wrapped_sample()
            if sample is not None:
                unwrap(sample[1], self.master, sample[0])  # raises BadMasterKey unless it opens
            if self.master is None:
                self.check = None
                return
            if not self._insert_check(seal_check(self.master)):
                self.check = None  # a read-only database: nothing can be written here anyway
                return
            stored = self._select_check()
            assert stored is not None
        if self.master is None:
            raise BadMasterKey(MASTER_MISSING)
        if not opens_check(stored, self.master):
            raise BadMasterKey(MASTER_WRONG)
        self.check = stored

    def key(self, originator_id: UUID, *, create: bool) -> bytes | None:
        """Returns the conversation's data key (32 bytes), None when it was erased. Without a
        key, makes one if `create`, else raises MissingDataKey. Raises BadMasterKey when the
        key is wrapped by another master key, or a new one cannot be stored because the store
        is protected by a master key this process does not hold (`check_master`)."""
        cached = self._cache.get(originator_id)
        if cached is not None and time.monotonic() - cached[0] < KEY_CACHE_SECONDS:
            return cached[1]
        row = self._select(originator_id)
        if row is None:
            if not create:
                raise MissingDataKey(f"no data key for conversation {originator_id}, and it was not erased")
            if self.master is not None and self.check is None:
                self.check_master()  # not checked yet, or the check row could not be written then
            for _ in range(2):
                self._insert(originator_id, wrap(new_key(), self.master, originator_id), self.check)
                row = self._select(originator_id)
                if row is not None:
                    break
                self.check_master()  # the store's check row changed since: raises unless it may go on
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

    def _insert(self, originator_id: UUID, wrapped: bytes, check: bytes | None) -> None:
        """Inserts a key unless the conversation has one (a concurrent first text won), and only
        while the store's check row is `check` (None: while there is no check row)."""
        raise NotImplementedError

    def _select_check(self) -> bytes | None:
        """Returns the store's check value, None when it has none."""
        raise NotImplementedError

    def _insert_check(self, sealed: bytes) -> bool:
        """Inserts the check row unless there is one; False where the database is read-only."""
        raise NotImplementedError

    def _wrapped_sample(self) -> tuple[UUID, bytes] | None:
        """Returns one data key wrapped by a master key (its conversation and stored bytes),
        None when there is none."""
        raise NotImplementedError

    def _erase(self, originator_id: UUID, at: datetime) -> None:
        raise NotImplementedError
