"""The reproductions' streams: what a model answered when a recorded turn was sent again.

They are kept apart from the conversation's log. Each stream is named by a UUID. Its first event
(`seq` 0, `reproduction_started`) says what was sent: conversation, log version, rule set, user
message, model, parameters, the input's sha256. Each `answer_recorded` is one complete answer:
sealed text, usage, latency, verdict and rubric. An answer is appended only once whole.

Each row's `hash` is sha256 of the previous hash and its body; the first's previous is 64 zeros.
Answer texts are sealed with the conversation's data key (`seal_answer`); erasure covers them."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from adapters.store.crypto import ERASED
from domain.errors import ChatrecordError

STARTED = "reproduction_started"
ANSWER = "answer_recorded"
GENESIS = "0" * 64
ANSWER_AAD = b"chatrecord reproduction answer "


class StreamConflict(ChatrecordError):
    """Raised when a reproduction's event is appended at a place another append took."""


@dataclass(frozen=True)
class ReproductionRow:
    """One stored event of a reproduction's stream: `body` is its JSON (the event's fields),
    `hash` the chain's (`chain_hash`)."""

    reproduction: str
    seq: int
    conversation: str
    kind: str
    body: str
    hash: str

    @property
    def fields(self) -> dict[str, Any]:
        loaded: dict[str, Any] = orjson.loads(self.body)
        return loaded


def chain_hash(previous: str, kind: str, body: str) -> str:
    """Returns the hash of an event whose predecessor's hash is `previous`."""
    return hashlib.sha256(f"{previous}\n{kind}\n{body}".encode()).hexdigest()


def new_row(reproduction: str, seq: int, conversation: str, kind: str, fields: dict[str, Any], previous: str) -> ReproductionRow:
    """Returns the row of an event with `fields` after the event whose hash is `previous`."""
    body = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS).decode()
    return ReproductionRow(reproduction, seq, conversation, kind, body, chain_hash(previous, kind, body))


def verify_rows(rows: list[ReproductionRow]) -> int | None:
    """Returns the `seq` of the first row out of chain or out of place; None when the chain holds. Rows
    are one stream's, ordered by `seq`."""
    previous = GENESIS
    for place, row in enumerate(rows):
        if row.seq != place or row.hash != chain_hash(previous, row.kind, row.body):
            return row.seq
        previous = row.hash
    return None


def _aad(reproduction: str, seq: int) -> bytes:
    return ANSWER_AAD + UUID(reproduction).bytes + seq.to_bytes(8, "big")


def seal_answer(key: bytes, reproduction: str, seq: int, text: str) -> str:
    """Returns `text` sealed with data key `key`: base64 of nonce || AES-256-GCM ciphertext. It is
    bound to the reproduction and the event's `seq`."""
    nonce = os.urandom(12)
    return base64.b64encode(nonce + AESGCM(key).encrypt(nonce, text.encode(), _aad(reproduction, seq))).decode()


UNREADABLE = "[unreadable: the sealed text does not open with the conversation's key]"
"""What an answer reads whose sealed text was changed or moved (its stream's chain says where)."""


def open_answer(key: bytes | None, reproduction: str, seq: int, sealed: str) -> str:
    """Returns the text `seal_answer` sealed; ERASED when the key was erased (None); UNREADABLE for a
    sealed text changed or moved (it does not open)."""
    if key is None:
        return ERASED
    try:
        raw = base64.b64decode(sealed, validate=True)
        return AESGCM(key).decrypt(raw[:12], raw[12:], _aad(reproduction, seq)).decode()
    except (InvalidTag, binascii.Error, UnicodeDecodeError, ValueError):
        return UNREADABLE


class ReproductionRows(ABC):
    """Where the reproductions' streams are kept, in the store's own database (a table of its
    own, `chatrecord_reproductions`; in memory a list). Made on first use (`create`)."""

    @abstractmethod
    def create(self) -> None:
        """Makes the table where it is missing."""

    @abstractmethod
    def append(self, *rows: ReproductionRow) -> None:
        """Stores `rows`, all or none (one transaction). Raises StreamConflict, storing none, when
        a stream holds an event at the `seq` of one of them."""

    @abstractmethod
    def of_conversation(self, conversation: str) -> list[ReproductionRow]:
        """Returns the rows of every reproduction of `conversation` (its UUID's string), ordered
        by reproduction and `seq`."""
