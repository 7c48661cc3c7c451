"""Identifiers placed into notes, reduced so they cannot forge or break a note's label (spec S23)."""

from __future__ import annotations

from domain.values import CARD_ANSWERS, reduce_identifier


def clean(name: str | None) -> str:
    """Returns `name` reduced as the ingester reduces it, or `unnamed` when nothing is left."""
    return reduce_identifier(name) or "unnamed"


def clean_answer(answer: str | None) -> str:
    """Returns the card answer if it is in `CARD_ANSWERS`, else `another answer`. A free text never
    reaches a note."""
    return answer if answer in CARD_ANSWERS else "another answer"
