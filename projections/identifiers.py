"""Identifiers placed into notes: reduced to the characters identifiers use
(docs/spec-map.md, S23), so that brackets, newlines or the
label's own words cannot forge or break a note's label."""

from __future__ import annotations

from domain.values import CARD_ANSWERS, reduce_identifier


def clean(name: str | None) -> str:
    """Returns `name` reduced by `domain.values.reduce_identifier` (the same reduction and bound
    as the ingester's, so a note never cuts a name the JSON read models keep whole); `unnamed`
    when nothing is left."""
    return reduce_identifier(name) or "unnamed"


def clean_answer(answer: str | None) -> str:
    """Returns the card answer if it is one of the chat's answers (`CARD_ANSWERS`), else
    `another answer`: a free text never reaches a note."""
    return answer if answer in CARD_ANSWERS else "another answer"
