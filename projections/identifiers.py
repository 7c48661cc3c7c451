"""Identifiers placed into notes: reduced to the characters identifiers use (spec: "Every
identifier is reduced to the characters identifiers use"), so that brackets, newlines or the
label's own words cannot forge or break a note's label."""

from __future__ import annotations

import re

from domain.values import CARD_ANSWERS

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_.:-]")
MAX_IDENTIFIER = 128
"""As the ingester bounds identifiers: a note never cuts a name the JSON read models keep whole."""


def clean(name: str | None, limit: int = MAX_IDENTIFIER) -> str:
    """Returns `name` with every character outside `[A-Za-z0-9_.:-]` removed, cut to `limit`
    characters; `unnamed` when nothing is left."""
    reduced = _NOT_IDENTIFIER.sub("", name or "")[:limit]
    return reduced or "unnamed"


def clean_answer(answer: str | None) -> str:
    """Returns the card answer if it is one of the chat's answers (`CARD_ANSWERS`), else
    `another answer`: a free text never reaches a note."""
    return answer if answer in CARD_ANSWERS else "another answer"
