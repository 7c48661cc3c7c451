"""Where a line nested too deep for the JSON reader to read it goes past `DEPTH_MAX` (`too_deep_in_text`).

orjson refuses a document nested more than 1,024 levels (`depth limit exceeded`) before any object is made,
so the walk of `adapters.ingest._too_deep` over the read line has nothing to walk. This reads the text's
strings and structural characters instead (a regular expression, linear), to name the same place."""

from __future__ import annotations

import json
import re
from typing import Any

from domain.limits import DEPTH_MAX

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]', re.DOTALL)
_TOKENS_BYTES = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\],:]', re.DOTALL)

DEPTH_LIMIT_EXCEEDED = "depth limit exceeded"
"""orjson's reason for a document nested deeper than it reads."""


def too_deep_in_text(text: str | bytes) -> tuple[tuple[Any, ...], Any] | None:
    """Returns the path of the first container nested deeper than DEPTH_MAX in `text` (the line's object
    is level 1), cut after 3 keys as `_too_deep` cuts it, and the line's top-level `type` where it is a
    string given before the text ends (else None). None when no container lies that deep."""
    tokens = _TOKENS_BYTES.finditer(text) if isinstance(text, bytes) else _TOKENS.finditer(text)
    stack: list[list[Any]] = []  # per open container: [is an object, the key or index inside it]
    last: Any = None  # the last string read
    found: tuple[Any, ...] | None = None
    kind: Any = None
    typed = False  # the next string is the value of the line's `type`
    for match in tokens:
        token = match.group()
        first = token[:1]
        if first in ('"', b'"'):
            last = _string(token)
            if typed:
                kind, typed = last, False
            continue
        typed = False
        if first in ("{", "[", b"{", b"["):
            if found is None and len(stack) >= DEPTH_MAX:
                found = tuple(entry[1] for entry in stack[:3])
            stack.append([first in ("{", b"{"), None if first in ("{", b"{") else 0])
        elif first in ("}", "]", b"}", b"]"):
            if stack:
                stack.pop()
        elif first in (",", b","):
            if stack and not stack[-1][0]:
                stack[-1][1] += 1
        elif stack and stack[-1][0]:  # a colon: the last string was the key
            stack[-1][1] = last
            typed = len(stack) == 1 and last == "type"
        if found is not None and kind is not None:
            break
    return None if found is None else (found, kind)


def _string(token: str | bytes) -> Any:
    try:
        return json.loads(token)
    except ValueError:
        return None


def beyond_the_reader(text: str | bytes, reason: str) -> bool:
    """Says whether the JSON reader refused `text` (for `reason`, its message) only for its depth: the
    line is then refused as one nested past DEPTH_MAX (`parse_line`), not as text that is not JSON."""
    return DEPTH_LIMIT_EXCEEDED in reason and too_deep_in_text(text) is not None
