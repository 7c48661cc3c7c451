"""Identifier rules and field types of the chat's JSON Lines (docs/spec-map.md, D7).

Identifiers are reduced to the characters identifiers use:
- names (tool, field, skill): `[A-Za-z0-9_.:-]`, other characters dropped, at most 128 (a
  longer one is cut and gets the hash of the original appended, as an id does);
- ids (conversation, segment, run ids): also `/`, because nr-llm segment ids are
  `<run uuid>/<n>` and `/` keeps them readable and unique. An id that had to be changed
  (characters dropped or cut at 128) gets `:h` and 16 hex of the sha256 of the original
  appended, so two different ids never collide silently, and the same id maps to the same stored id
  everywhere (a `card_decided` finds its segment). An id that is already a stored form
  (`chat17:h9a90eaf363ff759f`, the reduced form of `chat 17`, as `export` writes it) is kept
  as it is, so reducing is idempotent and an exported conversation comes back under its own
  stored id; it then names the conversation of the id it is the stored form of (as every command
  already reads it). Two distinct ids share a stored id only when one is the stored form of the
  other (or on a collision of the 64-bit hash): a kept id has no character outside the id
  characters, a reduced one always ends in the marker and its hex is the hash of an id that had
  one (or was longer than 128), so a made-up `x:h<16 hex>` that is the hash of no such id
  names a conversation of its own.
A table must match `[A-Za-z0-9_]{1,64}` and a uid be an integer >= 1, else the line fails.
Each check raises ValueError with the message's expectation part; pydantic turns it into an
error at the field, and `adapters.ingest` into `InvalidInput`.
"""

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
    """Returns `text` with every control, format, line or paragraph separator and private or
    unassigned character (categories Cc, Cf, Zl, Zp, Co, Cn, Cs) written as a Python escape."""
    if text.isprintable():
        return text
    return "".join(_escaped(c) if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs") else c for c in text)


_JSON_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def show(value: Any, limit: int = SHOWN_MAX) -> str:
    """Returns a short excerpt of a rejected `value` for an error message: JSON for a string
    (control and invisible characters escaped), cut to about `limit` characters; a number or
    another value as it is, cut the same way. A long value is never echoed whole."""
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
    """Returns the stored form of a name (tool, field, skill): `value` with every character
    outside `[A-Za-z0-9_.:-]` dropped; a name still longer than 128 is cut and gets `:h` and 16
    hex of the sha256 of `value`, as an id does, so two long names that share their first 128
    characters never read as one. Raises ValueError when no character is kept.
    """
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
    """Returns the stored form of a conversation, segment or run id: unchanged when it is 1–128
    of `[A-Za-z0-9_.:/-]` (a stored form `chat17:h9a90eaf363ff759f` included: reducing twice
    gives what reducing once gave), else the kept characters (cut to 110) plus `:h` and 16 hex
    of the sha256 of `value`. A reduced id always ends in that marker, with the hash of an id
    that is not kept as it is; so an id kept as it is equals the reduced form of another only
    when it is that id's stored form (or on a collision of the hash), and two ids neither of
    which is a stored form stay distinct. Raises ValueError when no character is kept.
    """
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
    """Returns the id a store gave `value` before stored forms were kept as they are, when that
    differs: for an id that ends in the hash marker (`chat17:h9a90eaf363ff759f`), the id reduced
    once more (`chat17:h9a90eaf363ff759f:hcc09425c04d37e82`); None for any other id. A lookup
    tries it after the id itself, so a conversation stored under it then is found by its id."""
    if not _HASH_MARKER.search(value) or _NOT_ID.search(value) or len(value) > NAME_MAX:
        return None
    return f"{value[: NAME_MAX - 18]}:h{sha256(value.encode('utf-8')).hexdigest()[:16]}"


def lookup_id(value: str) -> str:
    """Returns the stored form of a conversation id a user or the chat looks up, reduced as
    `reduce_id` reduces it at ingest (`chat 17` is found as it was stored); the id itself when
    no character is kept (it names no stored conversation then)."""
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
    """Returns the ISO-8601 time `value` (a date and a time of day, `T` or a space between
    them) as an aware UTC datetime (a time without offset is taken as UTC). Raises ValueError
    for anything else: a date alone (`2026-11-02`, which Python reads as midnight), a date with
    only an offset (`2026-11-02+01:00`, which Python reads as 01:00), and a time outside years
    2000–9998 after conversion to UTC (`domain.limits.AT_MIN`/`AT_MAX`)."""
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
    """Returns a `json_schema_extra` that lists `fields` without their `null` branch (a pair of
    fields that go together is described as both present or both absent) and adds `schema`'s
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
