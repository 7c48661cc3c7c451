"""nr-llm ingestion: the chat's JSON Lines read and validated, one model per line.

The input format is docs/spec-map.md, D7; the models and the privacy filter are in `line_models`. A
bad line raises `domain.errors.InvalidInput`. Its one-line message names the file, the 1-based line,
the field path and what was expected, e.g. `demo.jsonl: line 12, steps[3].writeTargetTable: "tt
content" is not a table name; use 1–64 of A-Za-z0-9_`. Nothing of a bad line is stored. Lines are
read lazily; the lines before it are yielded first.

Example:
    for line in read_file("tests/data/demo_seo_tour.jsonl"):
        line.type, line.conversation, line.kept_facts()   # decided by adapters.service.line_commands"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from hashlib import sha256
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from adapters.ingest.depth import DEPTH_LIMIT_EXCEEDED, too_deep_in_text
from adapters.ingest.dropped import kept_path, quotable
from adapters.ingest.error_messages import at_line, check_follows, expectation, input_path, kind_of
from adapters.ingest.line_models import LINE_TYPES, Line, ParsedLine
from adapters.ingest.names import show
from adapters.ingest.reproduction_line import REPRODUCTION, is_reproduction
from domain.errors import InvalidInput
from domain.limits import DEPTH_MAX, LINE_BYTES_MAX

__all__ = [
    "LINE_TYPES",
    "ParsedLine",
    "at_line",
    "check_follows",
    "digest_of",
    "json_problem",
    "parse_line",
    "read_file",
    "read_lines",
]

_LINE: TypeAdapter[ParsedLine] = TypeAdapter(ParsedLine)
_set = object.__setattr__
_WHOLE_LINE = "(line)"


def digest_of(line: Line) -> str:
    """Returns 32 hex of the sha256 of the line's stored facts as canonical JSON. The same line twice
    has the same digest. Dropped fields and usage facts (`Line.unhashed`) stay out."""
    facts = {"type": line.type, "conversation": line.conversation, "at": line.at.isoformat()}
    facts.update(line.kept_facts())
    jsonable = to_jsonable_python(facts)
    line.unhashed(jsonable)
    canonical = orjson.dumps(jsonable, option=orjson.OPT_SORT_KEYS)
    return sha256(canonical).hexdigest()[:32]


_TOO_DEEP = f'is nested more than {DEPTH_MAX} levels deep, the most a line may be (README, "Input limits")'


def parse_line(text: str | bytes, line_no: int, source_name: str) -> ParsedLine:
    """Returns the parsed line `text` (line `line_no` of `source_name`), with its digest. Raises
    InvalidInput for invalid JSON, a non-object, a missing or unknown `type`, or a missing or wrong
    field."""

    def invalid(field: str, expected: str) -> InvalidInput:
        return InvalidInput(source_name, line_no, field, expected)

    size = len(text) if isinstance(text, bytes) or len(text) * 4 <= LINE_BYTES_MAX else len(text.encode("utf-8", "replace"))
    if size > LINE_BYTES_MAX:
        raise invalid(_WHOLE_LINE, f'is longer than {LINE_BYTES_MAX:,} bytes, the most a line may be (README, "Input limits")')
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        deeper = too_deep_in_text(text) if DEPTH_LIMIT_EXCEEDED in error.msg else None
        if deeper is not None:  # deeper than the reader reads: said as a line nested past DEPTH_MAX is
            path, kind = deeper
            raise invalid(input_path(kept_path({"type": kind}, path)[0]) or _WHOLE_LINE, _TOO_DEEP) from None
        raise invalid(_WHOLE_LINE, f"{json_problem(text, error)}; each line is one JSON object") from None
    if not isinstance(data, dict):
        raise invalid(_WHOLE_LINE, f"expected a JSON object, got {kind_of(data)}")
    deep = _too_deep(text, data)
    if deep is not None:
        raise invalid(input_path(kept_path(data, deep)[0]) or _WHOLE_LINE, _TOO_DEEP)
    twice = _key_twice(text, data)
    if twice is not None:
        at, cut = kept_path(data, twice)
        if cut:  # a key of a field the privacy filter drops: not quoted
            raise invalid(input_path(at), "holds a key twice; give each key of an object once")
        raise invalid(input_path(twice), f"field {input_path(twice[-1:])} appears twice; give each key of an object once")
    kind = data.get("type")
    if kind is None:
        raise invalid("type", f"is missing; use one of {', '.join(LINE_TYPES)}")
    if kind == REPRODUCTION:
        raise invalid(
            "type",
            "a reproduction record is read by `chatrecord ingest` (export --with-reproductions writes it), not recorded as a chat's line",
        )
    if kind not in LINE_TYPES:
        raise invalid("type", f"{show(kind)} is not a line type; use one of {', '.join(LINE_TYPES)}")
    try:
        line = _LINE.validate_python(data)
    except ValidationError as error:
        try:  # a whole number written as 1.0 is one (read only when the line fails as written: no cost otherwise)
            line = _LINE.validate_python(_integral(data, error))
        except ValidationError as again:
            first = again.errors(include_url=False)[0]
            at = tuple(first["loc"][1:])
            raise invalid(input_path(at) or _WHOLE_LINE, expectation(first, kind, quotable(data, at))) from None
    _set(line, "_line", line_no)  # its slots (`Line`), past pydantic's __setattr__
    _set(line, "_source_name", source_name)
    _set(line, "_digest", digest_of(line))
    return line


def _integral(data: Any, error: ValidationError) -> Any:
    """Returns `data` with integral floats (`1.0`) made ints where a whole number was expected. `1.5`
    stays and fails. Returns the same object when there is none."""
    places = [
        problem["loc"]
        for problem in error.errors(include_url=False)
        if problem["type"] == "int_type"
        and isinstance(problem["input"], float)
        and problem["input"].is_integer()
        and abs(problem["input"]) < 2**53
    ]  # past 2**53 a float is no exact number
    if not places:
        return data
    data = copy.deepcopy(data)
    for loc in places:
        parent = data
        for part in loc[1:-1]:  # loc[0] is the union's tag
            parent = parent[part]
        parent[loc[-1]] = int(parent[loc[-1]])
    return data


def _too_deep(text: str | bytes, data: dict[str, Any]) -> tuple[Any, ...] | None:
    """Returns the path of the first container nested deeper than DEPTH_MAX, cut after 3 keys; else
    None. The line's object is level 1. The walk is iterative and linear."""
    opening = (text.count(b"{") + text.count(b"[")) if isinstance(text, bytes) else (text.count("{") + text.count("["))
    if opening <= DEPTH_MAX:
        return None
    stack: list[tuple[tuple[Any, ...], int, Any]] = [((), 1, data)]
    while stack:
        at, depth, value = stack.pop()
        if depth > DEPTH_MAX:
            return at[:3]
        items = value.items() if isinstance(value, dict) else enumerate(value)
        inner = [((*at, key) if len(at) < 3 else at, depth + 1, item) for key, item in items if isinstance(item, (dict, list))]
        stack.extend(reversed(inner))  # the first one in the text's order is walked first
    return None


_COLON_ESCAPE = re.compile(r"\\u003[aA]")
_COLON_ESCAPE_BYTES = re.compile(rb"\\u003[aA]")


def _key_twice(text: str | bytes, data: dict[str, Any]) -> tuple[Any, ...] | None:
    """Returns the path of the first key that appears twice in one object of `text`; None when none
    does. `data` is what orjson read, which keeps the last value. Colons are counted first: the
    text's colons plus its escaped colons (`u003a`) equal the dumped text's colons exactly when no
    key was dropped. Only when they differ is the text read again with every pair kept."""
    dumped = orjson.dumps(data).count(b":")
    if isinstance(text, str):
        colons = text.count(":") + (len(_COLON_ESCAPE.findall(text)) if "\\u003" in text else 0)
    else:
        colons = text.count(b":") + (len(_COLON_ESCAPE_BYTES.findall(text)) if b"\\u003" in text else 0)
    if colons == dumped:
        return None
    try:
        pairs = json.loads(text, object_pairs_hook=_Pairs.of)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[tuple[Any, ...], Any]] = [((), pairs)]
    while stack:  # depth first, in the text's order
        at, value = stack.pop()
        if isinstance(value, _Pairs):
            if value.twice is not None:
                return (*at, value.twice)
            stack.extend(((*at, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*at, index), item) for index, item in reversed(list(enumerate(value))))
    return None


class _Pairs(dict[str, Any]):
    """An object read with its pairs: `twice` is its first key that appears twice, if any."""

    twice: str | None = None

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> _Pairs:
        made = cls(pairs)
        if len(made) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    made.twice = key
                    break
                seen.add(key)
        return made


def line_text(data: Mapping[str, Any], line_no: int, source_name: str) -> bytes:
    """Returns the JSON text of a line given as a dict (`adapters.api`). Raises InvalidInput naming the
    first field JSON cannot hold."""
    try:
        text = orjson.dumps(data)
    except (TypeError, orjson.JSONEncodeError):
        text = b"null"  # find what failed below
    if b"null" in text:  # orjson writes NaN and infinities as null: refuse them as the JSON text would be
        field, what = _unencodable(data, ())
        if what == _BIG:  # as JSON text says it: the reader reads it as a float, the field says what it expects
            try:
                return json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
            except (TypeError, ValueError):
                field, what = _unencodable(data, (), big=False)
        if what.startswith(_NOT_FINITE):  # what the field expects, as for any other value of the wrong kind
            what = _field_problem(data, field) or what
        if what:
            raise InvalidInput(source_name, line_no, input_path(kept_path(data, field)[0]) or _WHOLE_LINE, what) from None
    return text


_BIG = 'is a number of more than 64 bits; no field takes one (README, "Input limits")'
_NOT_FINITE = "expected a finite number"


def _field_problem(data: Mapping[str, Any], at: tuple[Any, ...]) -> str | None:
    """Returns what the line's model says of the value at path `at`, or None."""
    kind = data.get("type")
    if kind not in LINE_TYPES:
        return None
    try:
        _LINE.validate_python(data)
    except ValidationError as error:
        for problem in error.errors(include_url=False):
            if tuple(problem["loc"][1:]) == at:
                return expectation(problem, kind)
    return None


def _unencodable(value: Any, at: tuple[Any, ...], big: bool = True) -> tuple[tuple[Any, ...], str]:
    """Returns the path of the first part of `value` orjson cannot write, and what is wrong. A whole
    number above 64 bits counts only if `big`."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return at, "expected an object whose keys are strings"
            found = _unencodable(item, (*at, key), big)
            if found[0] != () or found[1]:
                return found
        return (), ""
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _unencodable(item, (*at, index), big)
            if found[0] != () or found[1]:
                return found
        return (), ""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as bad:
            return at, f"expected text, got a lone surrogate at character {bad.start + 1}"
        return (), ""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return at, f"{_NOT_FINITE}, got {value}"
        return (), ""
    if isinstance(value, bool) or value is None:
        return (), ""
    if isinstance(value, int):
        if not big or -(2**63) <= value < 2**64:
            return (), ""
        return at, _BIG
    return at, f"expected a JSON value, got a {type(value).__name__}"


def json_problem(text: str | bytes, error: orjson.JSONDecodeError) -> str:
    """Returns why `text` did not parse as JSON, for an error message. Bytes not UTF-8 (with the byte),
    a lone surrogate (with the character), else orjson's reason with position."""
    if isinstance(text, bytes):
        try:
            text.decode("utf-8")
        except UnicodeDecodeError as bad:
            return f"not UTF-8 text ({bad.reason} at byte {bad.start + 1})"
    elif "surrogates" in error.msg:
        at = next((i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff"), 0)
        return f"not valid text (a lone surrogate at character {at + 1})"
    where = f"line {error.lineno} column {error.colno}" if error.lineno > 1 else f"column {error.colno}"
    if "infinity" in error.msg:  # orjson reads a number past 64 bits as a double, and this one overflowed it
        return f"not valid JSON (a number too large to read at {where}; no field takes a number of more than 64 bits)"
    return f"not valid JSON ({error.msg} at {where})"


def parse_numbered(raw: str | bytes, line_no: int, source_name: str) -> ParsedLine | None:
    """Returns line `line_no` (1-based) of `source_name` parsed; None for a blank line. A BOM before
    the first line is ignored. Raises InvalidInput for a line that is not UTF-8 or does not parse."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidInput(
                source_name, line_no, _WHOLE_LINE, f"not UTF-8 text ({error.reason} at byte {error.start + 1})"
            ) from None
    if line_no == 1:
        raw = raw.removeprefix("\ufeff")
    raw = raw.rstrip("\r\n")  # the line's end is not part of its JSON (an error's column counts within it)
    return parse_line(raw, line_no, source_name) if raw.strip() else None


def bounded_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Yields the lines of a binary stream, each cut after LINE_BYTES_MAX + 1 bytes. A longer line
    costs at most that memory; `parse_line` refuses it."""
    while True:
        line = stream.readline(LINE_BYTES_MAX + 1)
        if not line:
            return
        if len(line) > LINE_BYTES_MAX and not line.endswith(b"\n"):
            while (rest := stream.readline(LINE_BYTES_MAX)) and not rest.endswith(b"\n"):
                pass
        yield line


def read_lines(lines: Iterable[str | bytes], source_name: str) -> Iterator[ParsedLine]:
    """Yields the parsed lines of `lines` in order, skipping blank ones and reproduction records
    (`export --with-reproductions`); numbers are 1-based and count every line. Raises
    InvalidInput at the first bad line, after yielding the lines before it."""
    for line_no, raw in enumerate(lines, start=1):
        if is_reproduction(raw):
            continue
        line = parse_numbered(raw, line_no, source_name)
        if line is not None:
            yield line


def read_file(path: str | Path) -> Iterator[ParsedLine]:
    """Yields the parsed lines of the JSON Lines file `path`, named by its file name in errors. Raises
    InvalidInput as `read_lines` does, OSError when the file cannot be read."""
    path = Path(path)
    with path.open("rb") as stream:
        yield from read_lines(bounded_lines(stream), path.name)
