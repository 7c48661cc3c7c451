"""A list the states of one fold share, each reading its own prefix: how the transcript's
messages, the transcript positions' user messages and the card outcomes append in O(1)
amortised instead of copying what came before (`projections.transcript`,
`projections.positions`, `projections.card_outcomes`).

A state holds `(items, n)` and reads `items[:n]`; no fold changes an item a state reads, so
extending the list past `n` in place is safe for every state that shares it. Also the way
those models take a value beside their pydantic fields when validated (`taken`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def extended(items: list[T], n: int, added: Sequence[T]) -> list[T]:
    """Returns the list a state holding `items[:n]` and then `added` reads (its first
    n + len(added) items): `items` itself, extended in place, where the state read all of it
    (`len(items) == n`) and it is not a shared default's empty list (n > 0); else a copy of
    its prefix and `added`. Two folds on threads may both find it so: the one whose items did
    not land at `n` copies instead (an extend is atomic). `added` must not be empty."""
    shared = len(items) == n and n > 0
    if shared:
        items.extend(added)
    if not shared or items[n] is not added[0]:
        items = [*items[:n], *added]
    return items


def taken(data: Any, key: str) -> tuple[Any, Any]:
    """Returns (`data` without `key`, the value it had, else None): for a model's wrap validator
    that takes `key` beside the model's fields (`data` a dict; anything else as it is)."""
    if isinstance(data, dict) and key in data:
        data = dict(data)
        return data, data.pop(key)
    return data, None
