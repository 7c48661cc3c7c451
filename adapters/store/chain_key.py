"""The chain key: a keyed hash chain (`adapters.store.chain`) under a key kept outside the database.

Where a master key is set (CHATRECORD_MASTER_KEY, `adapters.store.crypto`), the chain's links
are HMAC-SHA256 under the chain key, derived from the master key with HKDF-SHA256
(`derive_chain_key`): a writer of the database without the master key can change an event but
cannot recompute its link and the later ones, so `verify` names it. Without a master key the
links are plain SHA-256, as before: anyone who can write the database can recompute them.

The store records which kind its chain is: table `chatrecord_chain_kind`, one row holding the
key's mark (`key_mark`: an HMAC of a fixed label under the key, which does not give the key),
or none for an unkeyed chain. `open_chain` runs when a store opens: a keyed chain opened with
another master key, or none, is refused before anything is stored (BadMasterKey); a fresh
store opened with a master key keys its chain from its first append. A chain recorded as
unkeyed while a master key is set (a store an earlier version wrote, or a keyed chain a forger
rewrote as plain SHA-256 and whose row he deleted) does not verify (`UNKEYED`) until
`chatrecord keys wrap` keys it. `rekey` (the key commands: wrap, rotate, unwrap) recomputes
every link under the new key in one transaction, after checking every link under the old one.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace
from typing import Any, TypeVar

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from adapters.store.chain import ChainedRecorder
from adapters.store.crypto import MASTER_KEY_VARIABLE, BadMasterKey

KIND = "hmac-sha256"
"""How a keyed chain's links are made, as `verify` names it."""
INFO = b"chatrecord chain key v1"
"""The HKDF info of the chain key: a key of its own, for this use only."""
MARK_LABEL = b"chatrecord chain key mark"

UNKEYED = (
    f"the chain is plain SHA-256 while {MASTER_KEY_VARIABLE} is set: any writer of the database can recompute it; "
    "a writer without the key may have replaced it: first compare with kept heads (chatrecord verify --against FILE); "
    "only if they agree and this store was written before chains were keyed, run: chatrecord keys wrap"
)
"""Why a chain recorded as unkeyed does not verify for a process with a master key."""


def derive_chain_key(master: bytes) -> bytes:
    """Returns the 32-byte chain key of master key `master` (HKDF-SHA256, info INFO)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(master)


def key_mark(key: bytes) -> str:
    """Returns the mark a keyed chain records of its key: 16 hex digits of HMAC-SHA256(key, MARK_LABEL)."""
    return hmac.new(key, MARK_LABEL, hashlib.sha256).hexdigest()[:16]


def open_chain(recorder: ChainedRecorder, master: bytes | None, *, unbound: bool = False) -> None:
    """Sets the recorder's chain key from the store's recorded kind (`chain_mark`) and this
    process's master key: keyed with the key the master key gives, or unkeyed. A store whose
    chain holds no link yet, opened with a master key, is keyed from its first append. Raises
    BadMasterKey for a keyed chain opened without its master key or with another one, unless
    `unbound` (the key commands, which re-key it: the chain is then left unkeyed in this
    process, `chain_mismatch` says so)."""
    mark = recorder.chain_mark()
    recorder.chain_key, recorder.chain_pending = None, None
    recorder.keyed_expected = master is not None
    recorder.chain_mismatch = None
    if mark is None:
        if master is not None and _empty(recorder):
            recorder.chain_key = derive_chain_key(master)
            recorder.chain_pending = key_mark(recorder.chain_key)
        return
    if master is None:
        raise BadMasterKey(
            f"the hash chain of this store is keyed ({KIND}, key mark {mark}) with a key derived from its master key; "
            f"set {MASTER_KEY_VARIABLE} to it"
        )
    key = derive_chain_key(master)
    if key_mark(key) != mark:
        if unbound:
            recorder.chain_mismatch = mark
            return
        raise BadMasterKey(
            f"{MASTER_KEY_VARIABLE} is not the key this store's hash chain is keyed with (key mark {mark}, this key's "
            f"{key_mark(key)}); set the master key the store was written with"
        )
    recorder.chain_key = key


def _empty(recorder: ChainedRecorder) -> bool:
    """Says whether the store's chain holds no link yet (False where it cannot be read: a
    standby whose tables are not there yet keys nothing)."""
    try:
        return not recorder.chain_links(None, limit=1)
    except Exception:  # noqa: BLE001 - a store it cannot read now: taken as one with links
        return False


class Rekey:
    """Keys the chain with the key master key `master` gives (None: unkeyed): every link
    recomputed after each was checked under the present key (`ChainedRecorder.rekey_chain`),
    in the transaction of the cursor it is called with (the data keys' rewrap: both change or
    neither), or in one of its own (`alone`). `links`: how many it wrote, 0 when the chain is
    of that kind already. Raises ChainBroken, changing nothing, where a link does not verify;
    BadMasterKey where the chain is keyed with a key this process does not hold."""

    def __init__(self, recorder: ChainedRecorder, master: bytes | None) -> None:
        self.recorder = recorder
        self.key = None if master is None else derive_chain_key(master)
        self.mark = None if self.key is None else key_mark(self.key)
        self.needed = recorder.chain_mark() != self.mark
        self.links = 0
        if self.needed and recorder.chain_mismatch is not None:
            raise BadMasterKey(
                f"the hash chain of this store is keyed with another master key (key mark {recorder.chain_mismatch}); "
                f"set {MASTER_KEY_VARIABLE} to that one"
            )

    def __call__(self, cursor: Any) -> None:
        if self.needed:
            self.links = self.recorder.rekey_chain(self.key, self.mark, cursor)

    def alone(self) -> int:
        """Re-keys in a transaction of its own; returns `links`."""
        if self.needed:
            self.links = self.recorder.rekey_chain(self.key, self.mark)
        self.done()
        return self.links

    def done(self) -> None:
        """Once the transaction committed: the recorder appends under the new key."""
        self.recorder.rekeyed(self.key)


Found = TypeVar("Found")


def unkeyed(recorder: ChainedRecorder, verdict: Found) -> Found:
    """Returns an ok verdict (`adapters.store.verify.Verdict`) of a chain of plain SHA-256
    links read by a process with a master key as not ok (`unkeyed`, UNKEYED); else `verdict`."""
    if recorder.keyed_expected and recorder.chain_key is None and getattr(verdict, "ok", False):
        return replace(verdict, problem="unkeyed", detail=UNKEYED)  # type: ignore[type-var]  # a Verdict dataclass
    return verdict


def chain_kind(recorder: ChainedRecorder) -> str:
    """Returns what `verify` says of the chain's kind: keyed (with its key's mark) or unkeyed."""
    if recorder.chain_key is not None:
        return f"keyed ({KIND}, key mark {key_mark(recorder.chain_key)})"
    return "unkeyed (SHA-256: a writer of the database can recompute it)"
