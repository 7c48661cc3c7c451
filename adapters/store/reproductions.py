"""The reproductions' streams (issue 40): what a model answered when a recorded turn was sent to
it again, kept apart from the conversation's log (the chat's record).

A reproduction is a stream of its own, named by a UUID: its first event (`seq` 0,
`reproduction_started`) says what was sent (the conversation, the log version and the rule set the
input was built from, the turn's user message, the model, the parameters, the input's sha256);
each later event (`answer_recorded`) is one complete answer (its text sealed, the usage, the
latency, the judge's verdict and rubric). An answer is appended only once it came back whole, so a
run the server broke off keeps the answers it completed and nothing of the others.

Each row's `hash` is the sha256 of the previous row's hash and the row's own body (the first
row's previous hash is 64 zeros), so a row changed, moved or deleted after it was appended breaks
its stream's chain (`verify_rows`).

The answer texts are sealed with the conversation's data key (AES-256-GCM, bound to the
reproduction and the event's place: `seal_answer`), so erasing the conversation (deleting its key)
leaves them unreadable with its own texts.
"""

from __future__ import annotations

import base64
import hashlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import orjson
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
    """Returns the `seq` of the first row of one stream (ordered by `seq`) whose hash does not
    follow from its predecessor's, or that is not in its place; None when the chain holds."""
    previous = GENESIS
    for place, row in enumerate(rows):
        if row.seq != place or row.hash != chain_hash(previous, row.kind, row.body):
            return row.seq
        previous = row.hash
    return None


def _aad(reproduction: str, seq: int) -> bytes:
    return ANSWER_AAD + UUID(reproduction).bytes + seq.to_bytes(8, "big")


def seal_answer(key: bytes, reproduction: str, seq: int, text: str) -> str:
    """Returns `text` sealed with the conversation's data key `key`, bound to its place (the
    reproduction and the event's `seq`): base64 of nonce || AES-256-GCM ciphertext."""
    nonce = os.urandom(12)
    return base64.b64encode(nonce + AESGCM(key).encrypt(nonce, text.encode(), _aad(reproduction, seq))).decode()


def open_answer(key: bytes | None, reproduction: str, seq: int, sealed: str) -> str:
    """Returns the text `seal_answer` sealed; ERASED when the key was erased (None). Raises
    cryptography's InvalidTag for a sealed text changed or moved."""
    if key is None:
        return ERASED
    raw = base64.b64decode(sealed)
    return AESGCM(key).decrypt(raw[:12], raw[12:], _aad(reproduction, seq)).decode()


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
