"""Identifier rules and field types of the chat's JSON Lines (docs/spec-map.md, D7).

- Names (tool, field, skill): `[A-Za-z0-9_.:-]`, others dropped, at most 128. A longer one is cut
  and gets the original's hash, as an id does.
- Ids (conversation, segment, run): also `/`, as in nr-llm's `<run uuid>/<n>`. A changed id gets
  `:h` and 16 hex of the original's sha256, so ids never collide silently. A stored form
  (`chat17:h9a90eaf363ff759f`) is kept as it is: reducing is idempotent. Two ids share a stored id
  only when one is the other's stored form, or on a hash collision.

A table must match `[A-Za-z0-9_]{1,64}` and a uid be an integer >= 1. Each check raises ValueError
with the expectation; `adapters.ingest` makes it `InvalidInput`."""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import UTC, date, datetime
from hashlib import sha256
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
)

from domain.limits import (
    AT_MAX,
    AT_MIN,
    DURATION_MS_MAX,
    INT_MAX,
    SHOWN_MAX,
    TEXT_MAX,
)
from domain.values import CARD_ANSWERS, IDENTIFIER_MAX

NAME_MAX = IDENTIFIER_MAX
_NOT_ID = re.compile(r"[^A-Za-z0-9_.:/-]")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.:-]")
_TABLE = re.compile(r"[A-Za-z0-9_]{1,64}")
_HASH_MARKER = re.compile(r":h[0-9a-f]{16}\Z")
"""How a reduced id ends: `:h` and 16 hex of the sha256 of the original id."""


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_invisible(text: str) -> str:
    """Returns `text` with characters of categories Cc, Cf, Zl, Zp, Co, Cn, Cs written as Python escapes."""
    if text.isprintable():
        return text
    return "".join(_escaped(c) if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs") else c for c in text)


_JSON_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def show(value: Any, limit: int = SHOWN_MAX) -> str:
    """Returns a short excerpt of a rejected `value`, cut to about `limit` characters. A string is
    shown as JSON with invisible characters escaped. A long value is never echoed whole."""
    if isinstance(value, str):
        head = value[: limit + 1]
        text = '"' + escape_invisible(head.translate(_JSON_ESCAPES)) + '"'
        if len(value) > limit or len(text) > limit + 2:
            text = text[:limit] + "…"
        return text
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a number of more than 64 bits"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def reduce_name(value: str, what: str = "name") -> str:
    """Returns the stored form of a name: characters outside `[A-Za-z0-9_.:-]` dropped. A name longer
    than 128 is cut and gets `:h` and 16 hex of the sha256 of `value`. Raises ValueError when no
    character is kept."""
    kept = _NOT_NAME.sub("", value)
    if not kept:
        raise ValueError(
            f"{show(value)} is not a {what}; it needs at least one of A-Za-z0-9_.:- "
            f"(other characters are left out, and a {what} longer than {NAME_MAX} is shortened)"
        )
    if len(kept) <= NAME_MAX:
        return kept
    digest = sha256(value.encode("utf-8")).hexdigest()[:16]
    return f"{kept[: NAME_MAX - 18]}:h{digest}"


def reduce_id(value: str, what: str = "id") -> str:
    """Returns the stored form of an id. Unchanged when it is 1–128 of `[A-Za-z0-9_.:/-]`, a stored
    form included. Else the kept characters, cut to 110, plus `:h` and 16 hex of the sha256 of
    `value`. Raises ValueError when no character is kept."""
    kept = _NOT_ID.sub("", value)
    if kept == value and 0 < len(value) <= NAME_MAX:
        return value
    if not kept:
        raise ValueError(
            f"{show(value)} is not an {what}; it needs at least one of A-Za-z0-9_.:/- "
            f"(other characters are left out, and an {what} longer than {NAME_MAX} is shortened)"
        )
    digest = sha256(value.encode("utf-8")).hexdigest()[:16]
    return f"{kept[: NAME_MAX - 18]}:h{digest}"


def earlier_stored_id(value: str) -> str | None:
    """Returns the id an earlier store gave `value`, when that differs; else None. For an id ending in
    the hash marker it is the id reduced once more. Lookups try it second."""
    if not _HASH_MARKER.search(value) or _NOT_ID.search(value) or len(value) > NAME_MAX:
        return None
    return f"{value[: NAME_MAX - 18]}:h{sha256(value.encode('utf-8')).hexdigest()[:16]}"


def lookup_id(value: str) -> str:
    """Returns the stored form of a conversation id to look up, as `reduce_id` gives it. Returns the id
    itself when no character is kept."""
    try:
        return reduce_id(value)
    except ValueError:
        return value


def check_table(value: str) -> str:
    """Returns `value` if it is a table name (`[A-Za-z0-9_]{1,64}`); raises ValueError if not."""
    if not _TABLE.fullmatch(value):
        raise ValueError(f"{show(value)} is not a table name; use 1–64 of A-Za-z0-9_")
    return value


def check_uid(value: int) -> int:
    """Returns `value` if it is a record uid (1 to INT_MAX); raises ValueError if not."""
    if value < 1:
        raise ValueError(f"{value} is not a uid; use a whole number >= 1")
    if value > INT_MAX:
        raise ValueError(f"{show(value)} is not a uid; use a whole number <= {INT_MAX}, the largest a store keeps")
    return value


def parse_at(value: Any) -> datetime:
    """Returns the ISO-8601 date and time `value` as an aware UTC datetime; no offset means UTC. Raises
    ValueError for a date alone, a date with only an offset, and a time outside years 2000–9998 in
    UTC (`domain.limits.AT_MIN`, `AT_MAX`)."""
    example = "use ISO-8601 UTC like 2026-10-28T09:00:00Z"
    if not isinstance(value, str):
        raise ValueError(f"expected a time as a string; {example}")
    text = value[:64]
    if text.endswith("z"):  # RFC 3339 5.6 allows a lower-case z (and t), which fromisoformat does not read
        text = text[:-1] + "Z"
    try:
        at = datetime.fromisoformat(text)
        if len(value) > 64:
            raise ValueError
    except ValueError:
        raise ValueError(f"{show(value)} is not a time; {example}") from None
    if _is_date(value) or not any(separator in value for separator in _TIME_SEPARATORS):
        raise ValueError(
            f"{show(value)} is a date without a time of day; expected ISO-8601 date and time in UTC like 2026-10-28T09:00:00Z"
        )
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    try:
        at = at.astimezone(UTC)
        inside = AT_MIN <= at <= AT_MAX
    except OverflowError:  # before year 1 or after year 9999 in UTC: outside either way
        inside = False
    if not inside:
        raise ValueError(f"{show(value)} is outside years 2000–9998 (UTC); {example}")
    return at


_TIME_SEPARATORS = ("T", "t", " ")
"""What may stand between an ISO-8601 date and its time of day (`T`; RFC 3339 allows `t` and a space)."""


def _is_date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def check_answer(value: str) -> str:
    """Returns `value` if it is one of CARD_ANSWERS; raises ValueError if not."""
    if value not in CARD_ANSWERS:
        raise ValueError(f"{show(value)} is not a card answer; use one of {', '.join(CARD_ANSWERS)}")
    return value


# The JSON Schema of each type (docs/openapi.json) says what the validator accepts: every value
# the schema allows is accepted (tests/http/test_contract.py). `WithJsonSchema` only describes;
# it adds no work to validation (the append is a hot path).
ID_PATTERN = "[A-Za-z0-9_.:/-]"
"""An id holds at least one of these characters (others are dropped, `reduce_id`)."""
NAME_PATTERN = "[A-Za-z0-9_.:-]"
"""A name holds at least one of these characters (others are dropped, `reduce_name`)."""
TABLE_PATTERN = "^[A-Za-z0-9_]{1,64}$"
AT_PATTERN = (
    r"^(200[1-9]|20[1-9][0-9]|2[1-9][0-9]{2}|[3-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-7])"
    r"-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?([Zz]|[+-][0-9]{2}:[0-9]{2})?$"
)
"""What the schema promises of `at`: an RFC 3339 date and time whose year (2001–9997) is inside
years 2000–9998 in UTC whatever its offset; `parse_at` accepts the whole range and more forms."""


def _id_schema(what: str) -> WithJsonSchema:
    return WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "pattern": ID_PATTERN,
            "description": f"The {what}: 1–{NAME_MAX} of A-Za-z0-9_.:/- is kept as it is; other characters are "
            f"dropped and a changed or longer id gets a hash appended (docs/input-format.md).",
        }
    )


def _name_schema(what: str) -> WithJsonSchema:
    return WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "pattern": NAME_PATTERN,
            "description": f"A {what}: characters outside A-Za-z0-9_.:- are dropped; at most {NAME_MAX} are kept.",
        }
    )


ReducedId = Annotated[str, AfterValidator(reduce_id), _id_schema("id")]
ToolName = Annotated[str, AfterValidator(lambda v: reduce_name(v, "tool name")), _name_schema("tool name")]
FieldName = Annotated[str, AfterValidator(lambda v: reduce_name(v, "field name")), _name_schema("field name")]
Skill = Annotated[str, AfterValidator(lambda v: reduce_name(v, "skill")), _name_schema("skill")]
Provider = Annotated[str, AfterValidator(lambda v: reduce_name(v, "provider name")), _name_schema("provider name")]
ModelName = Annotated[str, AfterValidator(lambda v: reduce_id(v, "model name")), _id_schema("model name")]
Table = Annotated[str, AfterValidator(check_table), WithJsonSchema({"type": "string", "pattern": TABLE_PATTERN})]
Uid = Annotated[int, AfterValidator(check_uid), WithJsonSchema({"type": "integer", "minimum": 1, "maximum": INT_MAX})]
At = Annotated[
    datetime,
    BeforeValidator(parse_at),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": AT_PATTERN,
            "description": "ISO-8601 date and time, years 2000–9998 in UTC; without an offset it is UTC.",
        }
    ),
]
MessageNo = Annotated[int, Field(ge=1, le=INT_MAX)]
Whole = Annotated[int, Field(ge=0, le=INT_MAX)]
"""A whole number from 0 to INT_MAX (2,147,483,647), the largest every store keeps."""
Duration = Annotated[float, Field(ge=0.0, le=DURATION_MS_MAX, allow_inf_nan=False)]
"""A step's duration in ms: a finite number from 0 to DURATION_MS_MAX."""
Text = Annotated[str, Field(max_length=TEXT_MAX)]
"""A text of at most TEXT_MAX characters."""


def pair(uid: int | None, info: ValidationInfo, table_field: str, uid_field: str) -> int | None:
    """Returns `uid` if it comes with a table, or neither is given (a RecordRef needs both)."""
    if table_field not in info.data:
        return uid  # the table itself failed; its error is reported first
    table = info.data[table_field]
    if table is not None and uid is None:
        raise ValueError(f"is missing; {table_field} {show(table)} needs a {uid_field} beside it")
    if table is None and uid is not None:
        raise ValueError(f"needs a {table_field} beside it; a record is a table and a uid")
    return uid


def drop_null(*fields: str, schema: dict[str, Any] | None = None) -> Any:
    """Returns a `json_schema_extra` listing `fields` without their `null` branch, plus `schema`'s
    keys. It shapes the JSON Schema only; validation is unchanged."""

    def extra(target: dict[str, Any]) -> None:
        for name in fields:
            branches = target["properties"][name].pop("anyOf", None)
            if branches:
                target["properties"][name].update(next(b for b in branches if b != {"type": "null"}))
            target["properties"][name].pop("default", None)
        target.update(schema or {})

    return extra


class InputModel(BaseModel):
    """Base of the input models: strict types, unknown keys ignored, frozen."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
