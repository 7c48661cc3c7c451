"""The folds' dispatch on an event's class: `functools.singledispatch`'s choice, kept in a
plain dict, found once per class (the folds dispatch five times per event)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def by_class(generic: Callable[..., R]) -> Callable[..., R]:
    """Returns a function that calls what the singledispatch function `generic` registered for
    the class of its first argument, found once per class (`generic.dispatch`). Every branch
    must be registered before the first call, as the folds register theirs at import."""
    chosen: dict[type, Callable[..., R]] = {}
    dispatch: Callable[[type], Callable[..., R]] = generic.dispatch  # type: ignore[attr-defined]  # a singledispatch function's

    def call(first: Any, *rest: Any) -> R:
        branch = chosen.get(first.__class__)
        if branch is None:
            branch = chosen[first.__class__] = dispatch(first.__class__)
        return branch(first, *rest)

    return call
