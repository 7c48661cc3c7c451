"""A list the states of one fold share, each reading its own prefix. Transcript messages, positions'
user messages and card outcomes append in O(1) amortised this way. A state holds `(items, n)` and
reads `items[:n]`. No fold changes an item a state reads, so extending past `n` in place is safe.
`taken` lets those models take a value beside their fields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def extended(items: list[T], n: int, added: Sequence[T]) -> list[T]:
    """Returns the list a state holding `items[:n]` reads after `added`. It is `items` extended in
    place when the state read all of it and n > 0; else a copy. Of two folds on threads, the one
    whose items did not land at `n` copies. `added` must not be empty."""
    shared = len(items) == n and n > 0
    if shared:
        items.extend(added)
    if not shared or items[n] is not added[0]:
        items = [*items[:n], *added]
    return items


def taken(data: Any, key: str) -> tuple[Any, Any]:
    """Returns (`data` without `key`, the value it had or None), for a model's wrap validator. A `data`
    that is not a dict is returned as it is."""
    if isinstance(data, dict) and key in data:
        data = dict(data)
        return data, data.pop(key)
    return data, None
