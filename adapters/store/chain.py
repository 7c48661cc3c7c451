"""A hash chain per conversation, written in the same transaction as its events.

Table `chatrecord_chain(originator_id, originator_version, hash)` holds for every stored event

    hash(v) = SHA-256(hash(v-1) || canonical(originator_id, v, topic, state))

The hash before the first event (version 1, or 0) is GENESIS, 32 zero bytes. A keyed chain uses
HMAC-SHA256 under the chain key (`adapters.store.chain_key`). `canonical`: the id's 16 UUID bytes,
the version as 8 bytes big-endian, then the topic's UTF-8 and the state bytes, each after its length
(4 and 8 bytes big-endian). The state is hashed as stored, ciphertext included, so an erased
conversation still verifies. `ChainedRecorder`, a mixin of each backend's recorder, writes the rows
after the library's insert. An append to an event without a hash row is refused (`ChainBroken`).
Only `chatrecord verify --upgrade` chains a conversation stored before the chain."""

from __future__ import annotations

import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from adapters.store.chain_checks import BrokenChain, VerifiedPosition, chained_before, upgrade_refused
from adapters.store.chain_errors import ChainBroken as ChainBroken
from adapters.store.chain_errors import UpgradeRefused as UpgradeRefused
from adapters.store.chain_errors import VersionRefused as VersionRefused
from adapters.store.chain_heads import ChainHeadCache
from adapters.store.serialization import originator_uuid

GENESIS = bytes(32)
"""The hash before a conversation's first event: 32 zero bytes."""
CHAIN_TABLE = "chatrecord_chain"
CHAIN_KIND_TABLE = "chatrecord_chain_kind"
"""One row (id 1) or none: the chain is keyed with the key of this `mark`
(`adapters.store.chain_key.key_mark`, not the key), or unkeyed (no row)."""
PAGE = 500
"""Rows per page when the chain is read for verification."""

Link = tuple[UUID, int, bytes]
"""A chain row: originator id, version, hash."""
Stored = tuple[UUID, int, str, bytes]
"""A stored event as the chain reads it: originator id, version, topic, state."""


def link(previous: bytes, originator_id: UUID | str, version: int, topic: str, state: bytes, key: bytes | None = None) -> bytes:
    """Returns the 32-byte hash of an event after `previous`: SHA-256, or HMAC-SHA256 under `key`."""
    encoded = topic.encode()
    uid = (originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))).bytes
    if key is not None:  # one call of OpenSSL's HMAC over the joined bytes: a Python HMAC object costs more
        parts = (previous, uid, version.to_bytes(8, "big"), len(encoded).to_bytes(4, "big"), encoded)
        return hmac.digest(key, b"".join((*parts, len(state).to_bytes(8, "big"), state)), "sha256")
    digest = hashlib.sha256(previous)
    digest.update(uid)
    digest.update(version.to_bytes(8, "big"))
    digest.update(len(encoded).to_bytes(4, "big"))
    digest.update(encoded)
    digest.update(len(state).to_bytes(8, "big"))
    digest.update(state)
    return digest.digest()


def state_bytes(value: Any) -> bytes:
    """Returns a state column's value as bytes (a changed SQLite row may hold TEXT)."""
    return value.encode() if isinstance(value, str) else bytes(value)


CUTS = ("deleted", "cut_off")
"""The problems of a stored break that name an event the chain once held (deleted by hand, or
cut off): no recomputed hash can see such an event is gone once the chain ends before it, so an
append to the conversation is refused while the break is stored (`cut_refusal`)."""


def cut_refusal(key: UUID, version: int, problem: str) -> ChainBroken:
    """Returns the refusal of an append to `key` whose stored break at `version` is a cut (`CUTS`).
    Appended, new events would hide the cut."""
    return ChainBroken(
        f"conversation {key}: the store recorded a break of its chain at version {version} ({problem}): events it held "
        "were removed; nothing was appended; run: chatrecord verify (it finds the chain ok again once the removed "
        "events are restored)",
        key,
        version,
        problem,
    )


@dataclass(frozen=True)
class InlineWrites:
    """What a writer writes in the events' own transaction: the history index and the view rows.
    `write(cursor)` writes them. `batch` says the events are several conversations'. It travels as
    `save`'s keyword `inline`, which the library hands to `insert_events`. `given` takes it back out
    there."""

    write: Callable[[Any], None]
    batch: bool = False

    @staticmethod
    def given(kwargs: Mapping[str, Any]) -> InlineWrites | None:
        """The `inline` keyword of an `insert_events` call; None when there is none. Raises
        TypeError for a value of another type (a caller that bypassed `ConversationStore`)."""
        inline = kwargs.get("inline")
        if inline is None or isinstance(inline, InlineWrites):
            return inline
        raise TypeError(f"insert_events: `inline` must be an InlineWrites, not {type(inline).__name__}")


def run_inline(kwargs: Mapping[str, Any], cursor: Any) -> None:
    """Runs `InlineWrites.write(cursor)`, if `kwargs` carry one, in the events' own transaction."""
    inline = InlineWrites.given(kwargs)
    if inline is not None:
        inline.write(cursor)


class ChainedRecorder(ABC):
    """Mixin for an application recorder; `_seal` writes the chain rows of events just inserted.
    Backends give the abstract primitives. `chain_events` and `chain_links` read pages for `verify`.
    `chain_key` is a keyed chain's key, None for unkeyed; `open_chain` sets it. `chain_pending` is
    the mark a fresh store's first append records, then None."""

    chain_key: bytes | None = None
    chain_heads: ChainHeadCache | None = None
    """Each conversation's newest committed (version, hash), where the recorder keeps them
    (PostgreSQL's); None: every append reads the previous hash."""
    chain_pending: str | None = None
    keyed_expected = False
    """True where this process has a master key: an unkeyed chain does not verify (`UNKEYED`)."""
    chain_mismatch: str | None = None
    """The mark of the other key a chain opened by a key command is keyed with, else None."""

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Any:
        found = super().insert_events(stored_events, **kwargs)  # type: ignore[misc]  # the library recorder it mixes into
        self.chain_pending = None  # committed with the first links
        return found

    def verified_position(self, key: UUID) -> VerifiedPosition | None:
        """Returns conversation `key`'s stored verified position; None when none is, or no table exists."""
        return None

    def put_verified_positions(self, positions: Sequence[VerifiedPosition]) -> None:
        """Stores these positions in one transaction, each deleting its conversation's break. Missing
        tables are made first."""
        self.keep_verdicts(positions, ())

    def broken_chain(self, key: UUID) -> BrokenChain | None:
        """Returns conversation `key`'s stored break; None when none is, or no table exists."""
        return None

    @abstractmethod
    def keep_verdicts(self, positions: Sequence[VerifiedPosition], broken: Sequence[BrokenChain]) -> None:
        """Stores `positions` and `broken` in one transaction. A position deletes its conversation's
        break; a break deletes its position. Missing tables are made first."""

    def _seal(self, cursor: Any, stored_events: Sequence[StoredEvent]) -> dict[UUID, tuple[int, bytes]]:
        """Writes the chain rows of `stored_events` through `cursor`. Returns each conversation's
        newest (version, hash) among them, cached once the transaction commits."""
        heads: dict[UUID, tuple[int, bytes]] = {}
        rows: list[Link] = []
        known = self.chain_heads
        chain_key = self.chain_key
        if self.chain_pending is not None:  # a fresh store's first links: the kind they are, with them
            self._chain_mark_put(cursor, self.chain_pending)
        for event in stored_events:
            key = originator_uuid(event.originator_id)
            version = event.originator_version
            last = heads.get(key) or (known.get(key) if known is not None else None)
            if last is not None and last[0] == version - 1:
                previous = last[1]
            elif version <= 1:
                previous = self._chain_start(cursor, key, version)
            else:
                found = self._chain_hash(cursor, key, version - 1)
                if found is None:
                    raise self._refusal(cursor, key, version - 1)
                cut = self._chain_cut(cursor, key)
                if cut is not None:
                    raise cut_refusal(key, *cut)
                previous = found
            digest = link(previous, key, version, event.topic, event.state, chain_key)
            heads[key] = (version, digest)
            rows.append((key, version, digest))
        if rows:
            self._chain_insert(cursor, rows)
        return heads

    def _chain_cut(self, cursor: Any, key: UUID) -> tuple[int, str] | None:
        """Returns the version and problem of conversation `key`'s stored cut (`CUTS`), or None."""
        breaks, _ = self._chain_kept(cursor, key)
        return next(((version, problem) for _, version, problem in breaks if problem in CUTS), None)

    def _chain_start(self, cursor: Any, key: UUID, version: int) -> bytes:
        """Returns what an event at `version` (0 or 1) links to: the hash at 0, else GENESIS. Raises
        VersionRefused below 0, and for 0 where the chain starts at 1."""
        other = self._chain_hash(cursor, key, 1 - version) if version >= 0 else None
        if version >= 0 and (other is None or version == 1):
            return other or GENESIS
        raise VersionRefused(
            f"conversation {key}: refused an event at version {version}: its first event is version "
            f"{'1' if version == 0 else '0 or 1'}, each next one the version after it; nothing was appended",
            key,
            version,
            "before_first",
        )

    def _refusal(self, cursor: Any, key: UUID, version: int) -> ChainBroken:
        """Returns the error refusing an append after `version`, which has no hash row. The
        conversation predates the chain (`unchained`), its rows were `deleted`, or an event was
        written beside the store (`inserted`)."""
        if version > 1 and self._chain_hash(cursor, key, 1) is None:
            reason = chained_before(
                "keyed" if self.chain_key else None, *self._chain_kept(cursor, key), self._chained_earlier(cursor, key, version)
            )
            if reason is not None:  # its rows were deleted by hand: `verify --upgrade` refuses it
                return ChainBroken(
                    f"conversation {key}: the hash chain is broken at version 1 (deleted): {reason}; its chain rows "
                    "were deleted in the database; nothing was appended; run: chatrecord verify",
                    key,
                    1,
                    "deleted",
                )
            return ChainBroken(
                f"conversation {key} was stored before the hash chain: nothing was appended; run: chatrecord verify "
                "--upgrade (it chains the stored events, and logs it), then send the lines again",
                key,
                1,
                "unchained",
            )
        return ChainBroken(
            f"conversation {key}: the hash chain is broken at version {version} (inserted): the event has no recorded "
            "hash, it was written beside the store; nothing was appended; run: chatrecord verify",
            key,
            version,
            "inserted",
        )

    def dangling(self, key: UUID, version: int) -> ChainBroken | None:
        """Returns the broken-chain error after a conflicting append of `key` from `version`, or None.
        The error is returned when a hash is recorded at `version` while its event is gone
        (`deleted`). No retry gets past that. None means a conflict with another writer."""
        chained = self.chain_links((key, version - 1), only=key, limit=1)
        if not chained or chained[0][1] != version:
            return None
        stored = self.chain_events((key, version - 1), only=key)
        if stored and stored[0][1] == version:
            return None
        return ChainBroken(
            f"conversation {key}: the hash chain is broken at version {version} (deleted): its hash is recorded, "
            "its event is not; nothing was appended; run: chatrecord verify",
            key,
            version,
            "deleted",
        )

    def upgrade_chain(self, key: UUID) -> int:
        """Chains conversation `key`'s events stored before the chain existed, in one transaction.
        Returns how many hashes it stored. Returns 0, writing nothing, when any chain row exists.
        Raises UpgradeRefused, changing nothing, where the store shows it was chained before."""
        if self.chain_links(None, only=key):
            return 0
        mark = self.chain_mark()
        with self._chain_writing() as cursor:
            reason = chained_before(mark, *self._chain_kept(cursor, key), self._chained_earlier(cursor, key))
            if reason is not None:
                raise UpgradeRefused(upgrade_refused(key, reason), key, 1, "unchained")
            rows = self._chain_stored(cursor, key, 2**62)
            self._backfill(cursor, key, rows[-1][1] if rows else 0)
            return len(rows)

    def upgrade_refusal(self, key: UUID) -> str | None:
        """Returns why the upgrade refuses conversation `key` (`chained_before`), None where it would
        chain it."""
        mark = self.chain_mark()
        with self._chain_reading() as cursor:
            return chained_before(mark, *self._chain_kept(cursor, key), self._chained_earlier(cursor, key))

    def rekey_chain(self, new_key: bytes | None, mark: str | None, cursor: Any = None) -> int:
        """Recomputes every link under `new_key` (None: unkeyed) and records `mark`, in one
        transaction.

        The transaction holds appends off; it is `cursor`'s, else its own. Returns how many links it
        wrote. First every link, stored break and verified position is checked under the present
        key. Raises ChainBroken, changing nothing, naming the first that fails. The caller sets
        `chain_key` once the transaction committed."""
        if cursor is None:
            with self._chain_writing() as own:
                return self.rekey_chain(new_key, mark, own)
        events, links = self._chain_everything(cursor)
        recorded = {(k, v): h for k, v, h in links}
        breaks, positions = self._chain_kept(cursor, None)
        for key, version, problem in sorted(b for b in breaks if b[2] != "unkeyed")[:1]:  # as the guard's, by hand
            raise ChainBroken(
                f"conversation {key}: the store recorded a break of its chain at version {version} ({problem}); "
                "nothing was re-keyed; run: chatrecord verify",
                key,
                version,
                problem,
            )
        for key, version, digest in sorted(positions):
            if recorded.get((key, version)) != digest:
                raise ChainBroken(
                    f"conversation {key}: the hash chain is broken at version {version} (rewritten): its hash differs "
                    "from the one verified earlier; nothing was re-keyed; run: chatrecord verify",
                    key,
                    version,
                    "rewritten",
                )
        rows: list[Link] = []
        current, old_previous, new_previous = None, GENESIS, GENESIS
        for key, version, topic, state in events:
            if key != current:
                current, old_previous, new_previous = key, GENESIS, GENESIS
            old_previous = link(old_previous, key, version, topic, state, self.chain_key)
            if recorded.pop((key, version), None) != old_previous:
                raise ChainBroken(
                    f"conversation {key}: the hash chain does not verify at version {version}; nothing was "
                    "re-keyed; run: chatrecord verify",
                    key,
                    version,
                    "changed",
                )
            new_previous = link(new_previous, key, version, topic, state, new_key)
            rows.append((key, version, new_previous))
        if recorded:
            key, version = min(recorded)
            raise ChainBroken(
                f"conversation {key}: the hash chain is broken at version {version} (deleted); nothing was re-keyed; "
                "run: chatrecord verify",
                key,
                version,
                "deleted",
            )
        self._chain_replace(cursor, rows)
        self._chain_mark_put(cursor, mark)
        return len(rows)

    def rekeyed(self, new_key: bytes | None) -> None:
        """Takes `new_key` as the chain key once a re-key (`rekey_chain`) committed."""
        self.chain_key, self.chain_pending, self.chain_mismatch = new_key, None, None
        self.keyed_expected = new_key is not None
        heads = self.chain_heads
        if heads is not None:
            heads.clear()

    def _chain_writing(self) -> Any:
        """A context manager yielding a cursor of one write transaction (the upgrade's)."""
        return self.datastore.transaction(commit=True)  # type: ignore[attr-defined]  # the recorder it mixes into has one

    def _chain_reading(self) -> Any:
        """A context manager yielding a cursor of one read transaction."""
        return self.datastore.transaction(commit=False)  # type: ignore[attr-defined]  # as `_chain_writing`

    def _backfill(self, cursor: Any, key: UUID, upto: int) -> bytes:
        """Returns the hash of version `upto`, storing the missing hashes up to it; only
        `upgrade_chain` calls it."""
        digest, rows = GENESIS, []
        for _, version, topic, state in self._chain_stored(cursor, key, upto):
            digest = link(digest, key, version, topic, state, self.chain_key)
            rows.append((key, version, digest))
        if rows:
            self._chain_insert(cursor, rows, missing_only=True)
        return digest

    # ------------------------------------------------------------ backend primitives

    @abstractmethod
    def chain_mark(self) -> str | None:
        """Returns the mark of the store's chain key; None for an unkeyed chain or a store without the
        table."""

    @abstractmethod
    def _chain_mark_put(self, cursor: Any, mark: str | None) -> None:
        """Records `mark` as the chain's kind (None: unkeyed), making the table where missing."""

    @abstractmethod
    def _chain_everything(self, cursor: Any) -> tuple[list[Stored], list[Link]]:
        """Returns every stored event and chain row in key order, holding appends off until the
        transaction ends."""

    @abstractmethod
    def _chain_kept(self, cursor: Any, only: UUID | None) -> tuple[list[tuple[UUID, int, str]], list[Link]]:
        """Returns the stored breaks (id, version, problem) and verified positions (id, version, hash).
        Of `only` if given; none where a table is missing."""

    def _chained_earlier(self, cursor: Any, key: UUID, upto: int = 2**62) -> bool:
        """Returns True when another conversation's chained event was stored before `key`'s event at
        `upto`. False where no store order is kept (memory)."""
        return False

    @abstractmethod
    def _chain_replace(self, cursor: Any, rows: list[Link]) -> None:
        """Replaces every chain row by `rows` and forgets every verified position."""

    @abstractmethod
    def _chain_hash(self, cursor: Any, key: UUID, version: int) -> bytes | None:
        """Returns the hash recorded for conversation `key` at `version`, None where none is."""

    @abstractmethod
    def _chain_insert(self, cursor: Any, rows: list[Link], *, missing_only: bool = False) -> None:
        """Inserts `rows` in the cursor's transaction; with `missing_only` skips a row already there."""

    @abstractmethod
    def _chain_stored(self, cursor: Any, key: UUID, upto: int) -> list[Stored]:
        """Returns the stored events of conversation `key` up to version `upto`, in order."""

    @abstractmethod
    def chain_events(self, after: tuple[UUID, int] | None, only: UUID | None = None) -> list[Stored]:
        """Returns the next page of stored events after `after` (id, version), in key order; of `only`
        if given."""

    @abstractmethod
    def chain_links(self, after: tuple[UUID, int] | None, only: UUID | None = None, limit: int = PAGE) -> list[Link]:
        """Returns the next page of at most `limit` chain rows after `after`, in key order; of `only`
        if given."""
