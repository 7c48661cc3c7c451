"""The chain key: the hash chain keyed by a key kept outside the database.

With a master key, links are HMAC-SHA256 under a key derived by HKDF-SHA256 (`derive_chain_key`).
Without one, links are plain SHA-256. Table `chatrecord_chain_kind` holds the key's mark
(`key_mark`), or no row when unkeyed. `open_chain` refuses a keyed chain without its master key
(BadMasterKey). An unkeyed chain with a master key set does not verify (`UNKEYED`) until `chatrecord
keys wrap`. `rekey` checks every link under the old key, then recomputes all under the new, in one
transaction."""

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
    """Sets the recorder's chain key from the store's `chain_mark` and this process's master key. A
    chain with no link yet, opened with a master key, is keyed from its first append. Raises
    BadMasterKey for a keyed chain opened without its master key or with another. With `unbound`
    (the key commands) it is left unkeyed instead; `chain_mismatch` says so."""
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
    """Returns True when the chain holds no link yet; False where it cannot be read."""
    try:
        return not recorder.chain_links(None, limit=1)
    except Exception:  # noqa: BLE001 - a store it cannot read now: taken as one with links
        return False


class Rekey:
    """Keys the chain with `master`'s key (None: unkeyed), checking every link first. It runs in the
    cursor's transaction (with the data keys' rewrap), or its own (`alone`). `links`: how many it
    wrote, 0 when the chain is of that kind already. Raises ChainBroken, changing nothing, where a
    link does not verify. Raises BadMasterKey where this process does not hold the chain's key."""

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
    """Returns `verdict`, or not ok (`UNKEYED`) when it is an ok plain SHA-256 chain and a master key
    is set."""
    if recorder.keyed_expected and recorder.chain_key is None and getattr(verdict, "ok", False):
        return replace(verdict, problem="unkeyed", detail=UNKEYED)  # type: ignore[type-var]  # a Verdict dataclass
    return verdict


def chain_kind(recorder: ChainedRecorder) -> str:
    """Returns what `verify` says of the chain's kind: keyed (with its key's mark) or unkeyed."""
    if recorder.chain_key is not None:
        return f"keyed ({KIND}, key mark {key_mark(recorder.chain_key)})"
    return "unkeyed (SHA-256: a writer of the database can recompute it)"
