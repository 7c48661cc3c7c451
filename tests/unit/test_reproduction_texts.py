"""A reproduction's sealed answer opens with its conversation's key only where it is as sealed: a
changed, moved or garbled text reads UNREADABLE (one value, not a traceback), an erased key ERASED."""

from __future__ import annotations

import base64
import os
import uuid

import pytest

from adapters.store.crypto import ERASED
from adapters.store.reproductions import UNREADABLE, open_answer, seal_answer

KEY = os.urandom(32)
R1, R2 = str(uuid.uuid4()), str(uuid.uuid4())
TEXT = "Ich habe den Seitentitel von Seite 42 gespeichert."


def flipped(sealed: str, at: int) -> str:
    raw = bytearray(base64.b64decode(sealed))
    raw[at] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def test_a_sealed_answer_opens_with_its_key_at_its_place() -> None:
    sealed = seal_answer(KEY, R1, 3, TEXT)
    assert TEXT not in sealed
    assert open_answer(KEY, R1, 3, sealed) == TEXT


@pytest.mark.parametrize(
    "case",
    ["changed byte", "other seq", "other reproduction", "other key", "not base64", "cut short"],
)
def test_a_changed_or_moved_answer_reads_unreadable(case: str) -> None:
    sealed = seal_answer(KEY, R1, 3, TEXT)
    opened = {
        "changed byte": lambda: open_answer(KEY, R1, 3, flipped(sealed, 20)),
        "other seq": lambda: open_answer(KEY, R1, 4, sealed),
        "other reproduction": lambda: open_answer(KEY, R2, 3, sealed),
        "other key": lambda: open_answer(os.urandom(32), R1, 3, sealed),
        "not base64": lambda: open_answer(KEY, R1, 3, "###"),
        "cut short": lambda: open_answer(KEY, R1, 3, sealed[:8]),
    }[case]()
    assert opened == UNREADABLE


def test_an_erased_key_reads_erased() -> None:
    assert open_answer(None, R1, 3, seal_answer(KEY, R1, 3, TEXT)) == ERASED
