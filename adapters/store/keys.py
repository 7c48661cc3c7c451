"""The data keys and the master key check.

Tables: `chatrecord_keys(conversation, wrapped_key, erased_at)`; `chatrecord_master(id, sealed)`,
one row or none. `key(id, create=...)` returns a data key, made on the first line (it keys the line
digests, `adapters.store.line_digests`); None once erased.
`erase(id)` deletes the key and records when. `scrub()` removes deleted rows' bytes (README,
"Erasing a conversation"). Keys read are cached for at most KEY_CACHE_SECONDS. `check_master()` runs
at open and writes nothing. `rewrap` rewrites all keys and the check row in one transaction. A new
key is inserted only while the check row is the one this process verified."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from adapters.store.crypto import (
    MASTER_KEY_VARIABLE,
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
from adapters.store.ports import DataKeyStore

KEYS_TABLE = "chatrecord_keys"
MASTER_TABLE = "chatrecord_master"
"""One row (id 1) or none: the check value (`adapters.store.crypto.seal_check`) of the master
key that protects the store."""
KEY_CACHE_SECONDS = 2.0


MASTER_UNBOUND = (
    f"{MASTER_KEY_VARIABLE} is set, but this store has no master key and keeps data keys unwrapped; "
    f"run `chatrecord keys wrap` to wrap them with it, or unset {MASTER_KEY_VARIABLE}"
)
"""Why a process with a master key may not store a new data key in a store that keeps unwrapped
ones: the key would be wrapped while the store stays readable without the master key."""


@dataclass(frozen=True)
class KeyState:
    """A store's key state: whether a master key protects it, and how many keys are wrapped, unwrapped,
    erased."""

    protected: bool
    wrapped: int
    unwrapped: int
    erased: int

    def to_json(self) -> dict[str, Any]:
        """`{"protected", "wrapped", "unwrapped", "erased"}`."""
        return {"protected": self.protected, "wrapped": self.wrapped, "unwrapped": self.unwrapped, "erased": self.erased}


class DataKeys:
    """The conversations' data keys in `rows`, a backend's `DataKeyStore`; `master` wraps them where set."""

    def __init__(self, master: bytes | None, rows: DataKeyStore) -> None:
        self.master, self.rows = master, rows
        self.check: bytes | None = None
        """The store's check value as this process verified it (`check_master`); None before,
        for a store no master key protects, or where it could not be written (read-only)."""
        self._cache: dict[UUID, tuple[float, bytes | None]] = {}

    def check_master(self, *, unbound: bool = False) -> None:
        """Checks that this process may use the store's data keys; writes nothing.

        - A check row: the process needs the master key that opens it.
        - No check row, keys wrapped: it needs a master key that unwraps one.
        - No check row, keys unwrapped: a process with a master key is refused, unless `unbound`.
        - Else any process goes on.

        Raises BadMasterKey (MASTER_MISSING, MASTER_WRONG, MASTER_UNBOUND)."""
        stored = self.rows.select_check()
        if stored is None:
            sample = self.rows.wrapped_sample()
            if sample is not None:
                unwrap(sample[1], self.master, sample[0])  # raises BadMasterKey unless it opens
            if self.master is not None and not unbound and self.rows.counts()[1] > 0:
                raise BadMasterKey(MASTER_UNBOUND)
            self.check = None
            return
        if self.master is None:
            raise BadMasterKey(MASTER_MISSING)
        if not opens_check(stored, self.master):
            raise BadMasterKey(MASTER_WRONG)
        self.check = stored

    def _bind(self) -> None:
        """Writes this master key's check row before the first new data key, then checks it. Raises
        BadMasterKey (MASTER_UNBOUND) when the store keeps unwrapped data keys."""
        assert self.master is not None
        if not self.rows.insert_check(seal_check(self.master)):
            return  # a read-only database: the key's own insert fails with the server's words
        self.check_master()
        if self.check is None:
            raise BadMasterKey(MASTER_UNBOUND)

    def key(self, originator_id: UUID, *, create: bool) -> bytes | None:
        """Returns the conversation's 32-byte data key, None when it was erased. Without a key it makes
        one if `create`, else raises MissingDataKey. Raises BadMasterKey when the key is wrapped by
        another master key. Raises it too when a new key cannot be stored under this process's
        master key state."""
        cached = self._cache.get(originator_id)
        if cached is not None and time.monotonic() - cached[0] < KEY_CACHE_SECONDS:
            return cached[1]
        row = self.rows.select(originator_id)
        if row is None:
            if not create:
                raise MissingDataKey(f"no data key for conversation {originator_id}, and it was not erased")
            if self.master is not None and self.check is None:
                self._bind()  # a fresh store (or one an earlier version protected) gets its check row
            for _ in range(2):
                self.rows.insert(originator_id, wrap(new_key(), self.master, originator_id), self.check)
                row = self.rows.select(originator_id)
                if row is not None:
                    break
                self.check_master()  # the store's check row changed since: raises unless it may go on
                if self.master is not None and self.check is None:
                    self._bind()  # its master key was removed meanwhile (`rewrap`)
            assert row is not None
        wrapped, erased_at = row
        key = None if erased_at is not None or wrapped is None else unwrap(bytes(wrapped), self.master, originator_id)
        self._cache[originator_id] = (time.monotonic(), key)
        return key

    def forget_erased(self, originator_id: UUID) -> bool:
        """Drops this process's cached key of a conversation whose erasure it just read. Returns True
        when that key could still open its texts: read them again."""
        held = self.holds_key(originator_id)
        self._cache.pop(originator_id, None)
        return held

    def holds_key(self, originator_id: UUID) -> bool:
        """Returns True when this process keeps a key of the conversation that opens its texts."""
        kept = self._cache.get(originator_id)
        return kept is not None and kept[1] is not None

    def erased_at(self, originator_id: UUID) -> datetime | None:
        """Returns when the conversation's key was erased, None if it was not."""
        row = self.rows.select(originator_id)
        if row is None or row[1] is None:
            return None
        at = row[1]
        return at if isinstance(at, datetime) else datetime.fromisoformat(at)

    def erased(self) -> set[UUID]:
        """Returns the conversations whose key is erased, as the database holds them now, and
        forgets any key of them this process kept (`KEY_CACHE_SECONDS`): from this call on, their
        texts read as erased here too. A rebuild reads them at its start and at its switch."""
        erased = self.rows.erased()
        for originator_id in erased:
            self._cache.pop(originator_id, None)
        return erased

    def erase(self, originator_id: UUID, at: datetime | None = None) -> None:
        """Deletes the conversation's key and records `at` (default now); idempotent."""
        self.rows.erase(originator_id, at or datetime.now(UTC))
        self._cache.pop(originator_id, None)

    def scrub(self) -> None:
        """Removes the bytes of deleted rows from the database files where the backend can."""
        self.rows.scrub()

    def state(self) -> KeyState:
        """Returns the store's key state, as it is now in the database."""
        wrapped, unwrapped, erased = self.rows.counts()
        return KeyState(self.rows.select_check() is not None, wrapped, unwrapped, erased)

    def rewrap(self, new_master: bytes | None, also: Callable[[Any], None] | None = None) -> int:
        """Rewraps every data key and the check row to `new_master` (None: unwrapped, no row), in one
        transaction.

        Returns how many keys it rewrote. The data keys stay the same, so every text still opens. A
        crash leaves the store as before or as after. `also(cursor)` writes in the same transaction.
        Raises BadMasterKey, changing nothing, when a key does not unwrap with this process's key.
        Processes opened before refuse to add a key until reopened."""

        def change(originator_id: UUID, stored: bytes) -> bytes:
            return wrap(unwrap(stored, self.master, originator_id), new_master, originator_id)

        count = self.rows.rewrap(change, None if new_master is None else seal_check(new_master), also or (lambda _: None))
        self.master = new_master
        self.check = None if new_master is None else self.rows.select_check()
        self._cache.clear()
        return count
