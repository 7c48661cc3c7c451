"""The ingester's error messages: input paths, one-line expectations, `follows` checks, `at_line`."""

from __future__ import annotations

import re
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from adapters.ingest.dropped import UNNAMED
from adapters.ingest.names import Whole, show
from domain.errors import ChatrecordError, InvalidInput

_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


def input_path(loc: tuple[Any, ...]) -> str:
    """Returns a pydantic location as the input's path: `steps[3].writeTargetTable`. A key that is not
    a plain name is quoted as a short escaped excerpt."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = str(part) if _NAME.fullmatch(str(part)) or part == UNNAMED else show(str(part))
        out += f".{name}" if out else name
    return out


def kind_of(value: Any) -> str:
    """Returns what a JSON value is, for an error message, without repeating any text."""
    if value is None or isinstance(value, bool):
        return orjson.dumps(value).decode()
    if isinstance(value, (int, float)):
        return f"the number {show(value)}"
    kinds: dict[type[Any], str] = {str: "a string", list: "a list", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


_TYPES = {
    "string_type": "expected a string",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "dict_type": "expected an object",
}


def expectation(error: Any, kind: str, quote: bool = True) -> str:
    """Returns the one-line expectation for a pydantic error, never a pydantic dump. Text values are
    not repeated, only names and numbers. With `quote` false, not even a name."""
    said = _expectation(error, kind, quote)
    value = error.get("input")
    if not quote and isinstance(value, str) and len(value[:16]) >= 3 and value[:16] in said:  # an excerpt of it, too
        return f"is not valid, got {kind_of(value)} (not shown: the privacy filter drops it)"
    return said


def _expectation(error: Any, kind: str, quote: bool) -> str:
    code, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if code == "missing":
        loc = error["loc"]
        if len(loc) == 2:
            return f"is missing; a {kind} line needs it"
        if len(loc) >= 4 and isinstance(loc[-2], int):
            return f"is missing; every entry of {loc[-3]} needs it"
        return "is missing"
    if code in ("int_type", "int_from_float") and isinstance(value, float) and value.is_integer() and abs(value) >= 2**63:
        # the JSON reader gives a whole number of more than 64 bits as a float
        return f"{_TYPES[code]}, got a number of more than 64 bits (about {value:.0e})"
    if code in _TYPES:
        return f"{_TYPES[code]}, got {kind_of(value)}"
    if code == "value_error":
        said = str(ctx.get("error", error["msg"]))
        return said if quote or value is None else said.replace(show(value), "the value")
    if code == "literal_error":
        plain = isinstance(value, (str, int, float, bool)) or value is None
        shown = show(value) if plain and quote else kind_of(value)
        return f"{shown} is not allowed; use {ctx.get('expected')}"
    if code in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = ctx.get("ge", ctx.get("gt", ctx.get("le", ctx.get("lt"))))
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[code]
        # a whole number where the field takes only those (its bound is one): a float field's is not
        number = "a whole number" if isinstance(value, int) and isinstance(bound, int) else "a number"
        shown = f"{bound:g}" if isinstance(bound, float) else show(bound)
        return f"expected {number} {sign} {shown}, got {kind_of(value)}"
    if code == "finite_number":
        return f"expected a finite number, got {kind_of(value)}"
    if code == "string_too_long":
        return f'is {len(value):,} characters long; the most is {ctx.get("max_length"):,} (README, "Input limits")'
    if code == "too_long":
        return f'has {ctx.get("actual_length"):,} entries; the most is {ctx.get("max_length"):,} (README, "Input limits")'
    return str(error["msg"])


_FOLLOWS = TypeAdapter(Whole, config={"strict": True})


def check_follows(follows: Any, source_name: str, line_no: int) -> int | None:
    """Returns `follows` if it is None or a whole number from 0 to INT_MAX. Raises InvalidInput naming
    `follows` otherwise."""
    if follows is None:
        return None
    try:
        return _FOLLOWS.validate_python(follows)
    except ValidationError as error:
        raise InvalidInput(source_name, line_no, "follows", expectation(error.errors(include_url=False)[0], "")) from None


def at_line(error: ChatrecordError, source_name: str, line_no: int) -> ChatrecordError:
    """Returns a domain error of the same type with `source: line N, field:` in front of its message."""
    where = f"{source_name}: line {line_no}" + (f", {error.field}" if error.field else "")
    try:
        placed = type(error)(f"{where}: {error}")
    except TypeError:
        return error
    placed.__dict__.update(error.__dict__)  # what the error carries besides its message
    return placed
