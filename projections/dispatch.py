"""The folds' dispatch on an event's class, kept in a plain dict and found once per class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def by_class(generic: Callable[..., R]) -> Callable[..., R]:
    """Returns a function calling what `generic` registered for its first argument's class. The choice
    is found once per class. Register every branch before the first call."""
    chosen: dict[type, Callable[..., R]] = {}
    dispatch: Callable[[type], Callable[..., R]] = generic.dispatch  # type: ignore[attr-defined]  # a singledispatch function's

    def call(first: Any, *rest: Any) -> R:
        branch = chosen.get(first.__class__)
        if branch is None:
            branch = chosen[first.__class__] = dispatch(first.__class__)
        return branch(first, *rest)

    return call
