"""The master key's explicit changes: bind (`wrap`), replace (`rotate`), remove (`unwrap`), and the key
state (`state`). Each rewrites every data key and the check row in one transaction (`DataKeys.rewrap`).
It recomputes every chain link under the new chain key (`chain_key.Rekey`; unkeyed after `unwrap`).
Opening a store never changes its key state (README, "Master key")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapters.service.data_keys import data_keys
from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder
from adapters.store.chain_key import Rekey
from adapters.store.crypto import MASTER_KEY_VARIABLE, BadMasterKey, master_key, not_a_key
from adapters.store.keys import DataKeys, KeyState
from domain.errors import ChatrecordError

NEW_MASTER_KEY_VARIABLE = "CHATRECORD_NEW_MASTER_KEY"
"""Where `chatrecord keys rotate` reads the new master key (an environment variable, not an
argument, so it shows in no process list)."""


class NothingToRotate(ChatrecordError):
    """Raised when `rotate` is asked of a store no master key protects, or with its own key."""


@dataclass(frozen=True)
class KeyChange:
    """What a key command did: `action` (wrap, rotate, unwrap), `changed`, how many data keys it rewrote
    (`rewrapped`) and the key state after."""

    action: str
    changed: bool
    rewrapped: int
    state: KeyState
    rekeyed: int = 0
    """How many links of the hash chain it recomputed under the new chain key (`chain_key.rekey`)."""

    def to_json(self) -> dict[str, Any]:
        """`{"action", "changed", "rewrapped", "rekeyed", "protected", "wrapped", "unwrapped", "erased"}`."""
        return {
            "action": self.action,
            "changed": self.changed,
            "rewrapped": self.rewrapped,
            "rekeyed": self.rekeyed,
            **self.state.to_json(),
        }


def _rekey(store: ConversationStore, master: bytes | None) -> Rekey | None:
    """The re-key of the hash chain to `master`'s chain key (None: unkeyed), in the rewrap transaction. None
    for a store without a chain. Raises ChainBroken, changing nothing, where a link does not verify under
    the present key."""
    return Rekey(store.recorder, master) if isinstance(store.recorder, ChainedRecorder) else None


def _rewrap(keys: DataKeys, master: bytes | None, rekey: Rekey | None) -> int:
    """Rewraps the data keys with `master`, the chain re-keyed in the same transaction."""
    count = keys.rewrap(master, rekey)
    if rekey is not None:
        rekey.done()
    return count


def state(store: ConversationStore) -> KeyState:
    """Returns the store's key state."""
    return data_keys(store).state()


def wrap(store: ConversationStore) -> KeyChange:
    """Wraps every unwrapped data key with CHATRECORD_MASTER_KEY and writes the check row, in one
    transaction. From then on every command needs that key. Changes nothing when all are wrapped by it.
    Raises BadMasterKey when CHATRECORD_MASTER_KEY is unset."""
    keys = data_keys(store)
    if keys.master is None:
        raise BadMasterKey(
            f"set {MASTER_KEY_VARIABLE} to the master key to wrap the data keys with (base64 of 32 "
            "random bytes: openssl rand -base64 32), and keep it apart from the database and its backups"
        )
    before = keys.state()
    rekey = _rekey(store, keys.master)
    if before.protected and before.unwrapped == 0:
        links = rekey.alone() if rekey is not None else 0
        return KeyChange("wrap", links > 0, 0, before, links)
    count = _rewrap(keys, keys.master, rekey)
    return KeyChange("wrap", True, count, keys.state(), rekey.links if rekey is not None else 0)


def rotate(store: ConversationStore, new_master_key: str) -> KeyChange:
    """Rewraps every data key with `new_master_key` (base64 of 32 bytes) and replaces the check row, in one
    transaction. The old key then opens nothing. Raises BadMasterKey for a value that is no master key.
    Raises NothingToRotate for a store without a master key, or the same key."""
    keys = data_keys(store)
    try:
        new = master_key(new_master_key)
    except BadMasterKey:
        raise BadMasterKey(
            f"{NEW_MASTER_KEY_VARIABLE} must be base64 of 32 bytes (openssl rand -base64 32), {not_a_key(new_master_key.strip())}"
        ) from None
    if new is None:
        raise BadMasterKey(
            f"set {NEW_MASTER_KEY_VARIABLE} to the new master key (base64 of 32 random bytes: openssl rand -base64 32)"
        )
    if not keys.state().protected or keys.master is None:
        raise NothingToRotate(
            f"this store has no master key to rotate; run `chatrecord keys wrap` with {MASTER_KEY_VARIABLE} set to bind it to one"
        )
    if new == keys.master:
        raise NothingToRotate(f"{NEW_MASTER_KEY_VARIABLE} is the store's master key already; give a new one")
    rekey = _rekey(store, new)
    count = _rewrap(keys, new, rekey)
    return KeyChange("rotate", True, count, keys.state(), rekey.links if rekey is not None else 0)


def unwrap(store: ConversationStore) -> KeyChange:
    """Stores every data key unwrapped and removes the check row, in one transaction. The store then needs
    no master key; only erasing protects its texts. Changes nothing on a store without a master key."""
    keys = data_keys(store)
    before = keys.state()
    rekey = _rekey(store, None)
    if not before.protected and before.wrapped == 0:
        links = rekey.alone() if rekey is not None else 0
        return KeyChange("unwrap", links > 0, 0, before, links)
    count = _rewrap(keys, None, rekey)
    return KeyChange("unwrap", True, count, keys.state(), rekey.links if rekey is not None else 0)
