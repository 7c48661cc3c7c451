"""Crypto-shredding: a conversation's free texts are stored encrypted with its own data key.

A free-text field (`FREE_TEXT`) is stored as `{"aesgcm": BASE64(nonce || ciphertext+tag)}`.
AES-256-GCM, 32-byte data key, fresh 12-byte nonce per field. The associated data is the UUID bytes,
the version (8 bytes big-endian) and the field's path, so a ciphertext cannot move. The facts stay
plain. The hash chain covers the ciphertext. Data keys (`adapters.store.keys`) are wrapped by
`CHATRECORD_MASTER_KEY` (base64 of 32 bytes) as `0x01 || nonce || AES-GCM(master, key)`, or stored
as `0x00 || key` without it. Erasing deletes the key: the texts read ERASED and no new text is
stored. The store's check value (`seal_check`) makes a process without its master key be refused at
open."""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from domain.errors import ChatrecordError
from domain.events import (
    CardDecided,
    LegacyRowImported,
    MessageEdited,
    QuestionAnswered,
    SegmentReturned,
    TranscriptReplaced,
    UserMessagePosted,
)

ERASED = "[erased]"
"""What an erased conversation's free texts read as."""
MASTER_KEY_VARIABLE = "CHATRECORD_MASTER_KEY"
SEALED = "aesgcm"
"""The key of the JSON object that holds an encrypted text in a stored state."""
CHECK_LABEL = b"chatrecord master key check"
"""The plaintext and associated data of a store's check value (`seal_check`)."""
MASTER_MISSING = f"the data keys of this store are wrapped by a master key; set {MASTER_KEY_VARIABLE} to it"
MASTER_WRONG = (
    f"{MASTER_KEY_VARIABLE} is not the master key of this store (it does not unwrap its data keys); "
    "set the master key the store was written with"
)

FREE_TEXT: dict[type, tuple[str, ...]] = {
    UserMessagePosted: ("text",),
    MessageEdited: ("text",),
    QuestionAnswered: ("text",),
    CardDecided: ("text",),
    SegmentReturned: ("answer",),
    TranscriptReplaced: ("messages.*.text",),
    LegacyRowImported: ("messages.*.text",),
}
"""The free-text fields of each event class, as paths in its stored state (`*`: every item)."""


class BadMasterKey(ChatrecordError):
    """Raised at open, before anything is stored, when CHATRECORD_MASTER_KEY is wrong. It is not base64
    of 32 bytes, not the store's master key, or missing for a protected store."""


class TextsErased(ChatrecordError):
    """Raised when a free text is to be stored for an erased conversation. `version` is the carrying
    event's version and `path` the input's field (`messages[0].text`), where known."""

    def __init__(self, message: str, version: int | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.version = version
        self.path = path
        if path is not None:
            self.field = path  # the field of this refusal, per instance


def _input_path(label: str) -> str:
    """Returns a stored state's path (`messages.0.text`) as the input's (`messages[0].text`)."""
    out = ""
    for part in label.split("."):
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


class MissingDataKey(ChatrecordError):
    """Raised when an encrypted text's conversation has no data key and was not erased."""


class KeySource(Protocol):
    """What the mapper asks for a conversation's data key (`adapters.store.keys.DataKeys`)."""

    def key(self, originator_id: UUID, *, create: bool) -> bytes | None: ...


def master_key(value: str | None) -> bytes | None:
    """Returns the 32-byte master key of a CHATRECORD_MASTER_KEY value (standard or URL-safe
    base64), None when unset or empty. Raises BadMasterKey for any other value."""
    if not value or not value.strip():
        return None
    text = value.strip()
    raw = _decoded(text)
    if raw is None or len(raw) != 32:
        raise BadMasterKey(f"{MASTER_KEY_VARIABLE} must be base64 of 32 bytes (openssl rand -base64 32), {not_a_key(text)}")
    return raw


def _decoded(text: str) -> bytes | None:
    """Returns the bytes of standard or URL-safe base64 `text`, None where it is not base64."""
    try:
        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None


def not_a_key(text: str) -> str:
    """Returns what a master key value `text` that is no key is: base64 of how many bytes, or not base64."""
    raw = _decoded(text)
    if raw is not None:
        return f"not base64 of {len(raw)} byte{'' if len(raw) == 1 else 's'}"
    return f"not a value of {len(text)} characters"


def new_key() -> bytes:
    """Returns a fresh random 32-byte data key."""
    return AESGCM.generate_key(bit_length=256)


def wrap(key: bytes, master: bytes | None, originator_id: UUID) -> bytes:
    """Returns `key` as stored: wrapped by `master` (0x01 || nonce || ciphertext), or plain (0x00 || key)."""
    if master is None:
        return b"\x00" + key
    nonce = os.urandom(12)
    return b"\x01" + nonce + AESGCM(master).encrypt(nonce, key, b"chatrecord data key " + originator_id.bytes)


def unwrap(stored: bytes, master: bytes | None, originator_id: UUID) -> bytes:
    """Returns the data key of a stored (wrapped or plain) key. Raises BadMasterKey when it is
    wrapped and the master key is missing or another one."""
    if stored[:1] == b"\x00":
        return stored[1:]
    if master is None:
        raise BadMasterKey(MASTER_MISSING)
    try:
        return AESGCM(master).decrypt(stored[1:13], stored[13:], b"chatrecord data key " + originator_id.bytes)
    except InvalidTag:
        raise BadMasterKey(MASTER_WRONG) from None


def seal_check(master: bytes) -> bytes:
    """Returns the 60-byte check value of `master`: 0x01 || 12-byte nonce || AES-GCM(master,
    CHECK_LABEL). CHECK_LABEL is also the associated data."""
    nonce = os.urandom(12)
    return b"\x01" + nonce + AESGCM(master).encrypt(nonce, CHECK_LABEL, CHECK_LABEL)


def opens_check(stored: bytes, master: bytes) -> bool:
    """Says whether `master` is the key a stored check value (`seal_check`) was sealed with."""
    if stored[:1] != b"\x01" or len(stored) < 13 + 16:
        return False
    try:
        return AESGCM(master).decrypt(stored[1:13], stored[13:], CHECK_LABEL) == CHECK_LABEL
    except InvalidTag:
        return False


def _slots(state: dict[str, Any], path: str) -> Iterator[tuple[Any, Any, str]]:
    """Yields (container, index, label) for each value at `path` in `state`."""
    if "." not in path:  # a field of the event itself (most paths)
        if path in state:
            yield state, path, path
        return
    containers: list[tuple[Any, str]] = [(state, "")]
    parts = path.split(".")
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        following: list[tuple[Any, str]] = []
        for container, label in containers:
            indexes = range(len(container)) if part == "*" and isinstance(container, list) else [part]
            for index in indexes:
                if isinstance(container, dict) and index not in container:
                    continue
                name = f"{label}.{index}" if label else str(index)
                if last:
                    yield container, index, name
                else:
                    following.append((container[index], name))
        containers = following


def _aad(originator_id: UUID, version: int, label: str) -> bytes:
    return originator_id.bytes + version.to_bytes(8, "big") + label.encode()


def seal_texts(cls: type, state: dict[str, Any], originator_id: UUID, version: int, keys: KeySource) -> None:
    """Encrypts the free texts of an event's `state` in place (creating the conversation's
    data key where it has none yet). Raises TextsErased when its key was erased."""
    key: bytes | None = None
    for path in FREE_TEXT.get(cls, ()):
        for container, index, label in _slots(state, path):
            value = container[index]
            if not isinstance(value, str):
                continue
            if key is None:
                key = keys.key(originator_id, create=True)
                if key is None:
                    raise TextsErased(
                        f"conversation {originator_id} was erased; no text can be stored for it", version, _input_path(label)
                    )
            nonce = os.urandom(12)
            sealed = nonce + AESGCM(key).encrypt(nonce, value.encode(), _aad(originator_id, version, label))
            container[index] = {SEALED: base64.b64encode(sealed).decode()}


class _Erased:
    """A key source whose every conversation was erased (`refuse_texts`)."""

    def key(self, originator_id: UUID, *, create: bool) -> bytes | None:
        return None


def refuse_texts(events: Iterable[Any]) -> None:
    """Raises TextsErased, naming version and field, for the first free text among `events`. The events
    are an erased conversation's. Does nothing when they carry none."""
    for event in events:
        state = event.model_dump(mode="json")
        seal_texts(type(event), state, event.originator_id, event.originator_version, _Erased())


def open_texts(cls: type, state: dict[str, Any], originator_id: UUID, version: int, keys: KeySource | None) -> None:
    """Decrypts the free texts of a stored `state` in place; ERASED where the key was erased. A plain
    text stays as it is. Raises MissingDataKey when an encrypted text has no key. Raises InvalidTag
    when a ciphertext was changed."""
    key: bytes | None = None
    looked = False
    for path in FREE_TEXT.get(cls, ()):
        for container, index, label in _slots(state, path):
            value = container[index]
            if not (isinstance(value, dict) and SEALED in value):
                continue
            if keys is None:
                raise MissingDataKey(f"an event of {originator_id} holds encrypted text, but the store has no data keys")
            if not looked:
                key, looked = keys.key(originator_id, create=False), True
            if key is None:
                container[index] = ERASED
                continue
            sealed = base64.b64decode(value[SEALED])
            plain = AESGCM(key).decrypt(sealed[:12], sealed[12:], _aad(originator_id, version, label))
            container[index] = plain.decode()


VIEW_TEXT_AAD = b"chatrecord view text "
"""The associated data of a read model's sealed text, before the conversation's UUID bytes."""


def seal_view_text(key: bytes, originator_id: UUID, text: str) -> str:
    """Returns `text` sealed for a read model row: base64 of nonce || AES-256-GCM(key, text). It is
    bound to the conversation (`VIEW_TEXT_AAD` + its UUID bytes)."""
    return view_sealer(key, originator_id)(text)


NONCES_AT_ONCE = 64
"""The random nonces a view sealer draws from the OS in one call (a rebuild seals a page's
texts with one sealer: one system call, which lets other threads take the GIL, per 64 texts)."""


_FORKS = [0]
"""How many times this process's line of ancestors forked (counted in each child): a view
sealer drawn before a fork draws anew after it (`view_sealer`)."""
os.register_at_fork(after_in_child=lambda: _FORKS.__setitem__(0, _FORKS[0] + 1))


def view_sealer(key: bytes, originator_id: UUID) -> Callable[[str], str]:
    """Returns `seal_view_text` for one key and conversation, with one cipher for many texts. Nonces
    come from os.urandom, NONCES_AT_ONCE at a time, each used once. A forked process drops the
    nonces drawn before the fork (`_FORKS`)."""
    aead, aad = AESGCM(key), VIEW_TEXT_AAD + originator_id.bytes
    nonces: list[bytes] = []
    drawn_in = [_FORKS[0]]

    def seal(text: str) -> str:
        if drawn_in[0] != _FORKS[0]:
            nonces.clear()
            drawn_in[0] = _FORKS[0]
        while True:  # a sealer kept for a conversation (`ViewTexts.sealer`) may serve two threads
            try:
                nonce = nonces.pop()
                break
            except IndexError:
                drawn = os.urandom(12 * NONCES_AT_ONCE)
                nonces.extend(drawn[i : i + 12] for i in range(12 * NONCES_AT_ONCE - 12, -1, -12))
        return base64.b64encode(nonce + aead.encrypt(nonce, text.encode(), aad)).decode()

    return seal


def open_view_text(key: bytes | None, originator_id: UUID, sealed: str) -> str:
    """Returns the text `seal_view_text` sealed; ERASED when the key was erased (None).
    Raises InvalidTag when the sealed text was changed or moved to another conversation."""
    if key is None:
        return ERASED
    raw = base64.b64decode(sealed)
    return AESGCM(key).decrypt(raw[:12], raw[12:], VIEW_TEXT_AAD + originator_id.bytes).decode()


class ViewTexts:
    """The read models' free texts, sealed with their conversation's data key as the events' are.
    Erasing the key makes both unreadable. `keys` is the store's `KeySource`. Conversations are
    named by their UUID's string."""

    SEALERS_KEPT = 1024
    """The most conversations whose sealer (`sealer`) is kept; when full, all are forgotten."""

    def __init__(self, keys: KeySource) -> None:
        self.keys = keys
        self._sealers: dict[str, tuple[UUID, bytes, Callable[[str], str]]] = {}

    def seal(self, conversation: str, text: str) -> str | None:
        """Returns `text` sealed, None when the key was erased (the row keeps ERASED)."""
        cid = UUID(conversation)
        key = self.keys.key(cid, create=False)
        return None if key is None else seal_view_text(key, cid, text)

    def sealer(self, conversation: str) -> Callable[[str], str | None]:
        """Returns `seal` for one conversation; each call seals one text, None when the key was erased.
        The key is looked up on every call; the cipher is kept while the key stays the same."""
        kept = self._sealers.get(conversation)
        cid = kept[0] if kept is not None else UUID(conversation)
        key = self.keys.key(cid, create=False)
        if key is None:
            self._sealers.pop(conversation, None)
            return lambda text: None
        if kept is None or kept[1] != key:
            if len(self._sealers) >= self.SEALERS_KEPT:
                self._sealers.clear()  # one atomic step, whatever other threads do meanwhile
            kept = self._sealers[conversation] = (cid, key, view_sealer(key, cid))
        return kept[2]

    def readable(self, conversation: str) -> bool:
        """Returns True while the conversation's key is not erased."""
        return self.keys.key(UUID(conversation), create=False) is not None

    def opener(self, conversation: str) -> Callable[[str], str]:
        """Returns `open` for one conversation, key and cipher looked up once. Each call returns one
        row text, ERASED when the key was erased. Raises InvalidTag as `open_view_text`."""
        cid = UUID(conversation)
        key = self.keys.key(cid, create=False)
        if key is None:
            return lambda sealed: ERASED
        aead, aad, unbase = AESGCM(key), VIEW_TEXT_AAD + cid.bytes, binascii.a2b_base64

        def open_text(sealed: str) -> str:
            raw = unbase(sealed)
            return aead.decrypt(raw[:12], raw[12:], aad).decode()

        return open_text

    def open(self, conversation: str, sealed: str) -> str:
        """Returns the text of a sealed row text; ERASED once the key was erased."""
        cid = UUID(conversation)
        return open_view_text(self.keys.key(cid, create=False), cid, sealed)
