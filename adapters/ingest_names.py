"""Identifier rules and field types of the chat's JSON Lines (DESIGN.md, "Input").

Identifiers are reduced to the characters identifiers use:
- names (tool, field, skill): `[A-Za-z0-9_.:-]`, other characters dropped, at most 128;
- keys (conversation, segment, run ids): also `/`, because nr-llm segment ids are
  `<run uuid>/<n>` and `/` keeps them readable and unique. A key that had to be changed
  (characters dropped or cut at 128) gets `:h` and 16 hex of the sha256 of the original
  appended, so two different ids never collide silently, and the same id maps to the same key
  everywhere (a `card_decided` finds its segment).
A table must match `[A-Za-z0-9_]{1,64}` and a uid be an integer >= 1, else the line fails.
Each check raises ValueError with the message's expectation part; pydantic turns it into an
error at the field, and `adapters.ingest` into `InvalidInput`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from hashlib import sha256
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
)

from domain.values import CARD_ANSWERS, IDENTIFIER_MAX, reduce_identifier

NAME_MAX = IDENTIFIER_MAX
_NOT_KEY = re.compile(r"[^A-Za-z0-9_.:/-]")
_TABLE = re.compile(r"[A-Za-z0-9_]{1,64}")


def show(value: Any, limit: int = 60) -> str:
    """Returns `value` as JSON for an error message, cut to about `limit` characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def reduce_name(value: str, what: str = "name") -> str:
    """Returns `value` with every character outside `[A-Za-z0-9_.:-]` dropped, cut to 128.

    Raises ValueError when nothing is left.
    """
    reduced = reduce_identifier(value)
    if not reduced:
        raise ValueError(f"{show(value)} is not a {what}; use 1–{NAME_MAX} of A-Za-z0-9_.:-")
    return reduced


def reduce_key(value: str, what: str = "id") -> str:
    """Returns the stored form of a conversation, segment or run id: unchanged when it is 1–128
    of `[A-Za-z0-9_.:/-]`, else the kept characters (cut) plus `:h` and 16 hex of the sha256 of
    `value`, so different ids stay different. Raises ValueError when no character is kept.
    """
    kept = _NOT_KEY.sub("", value)
    if kept == value and 0 < len(value) <= NAME_MAX:
        return value
    if not kept:
        raise ValueError(f"{show(value)} is not an {what}; use 1–{NAME_MAX} of A-Za-z0-9_.:/-")
    digest = sha256(value.encode("utf-8")).hexdigest()[:16]
    return f"{kept[: NAME_MAX - 18]}:h{digest}"


def check_table(value: str) -> str:
    """Returns `value` if it is a table name (`[A-Za-z0-9_]{1,64}`); raises ValueError if not."""
    if not _TABLE.fullmatch(value):
        raise ValueError(f"{show(value)} is not a table name; use 1–64 of A-Za-z0-9_")
    return value


def check_uid(value: int) -> int:
    """Returns `value` if it is a record uid (>= 1); raises ValueError if not."""
    if value < 1:
        raise ValueError(f"{value} is not a uid; use a whole number >= 1")
    return value


def parse_at(value: Any) -> datetime:
    """Returns the ISO-8601 time `value` as an aware UTC datetime (a time without offset is
    taken as UTC). Raises ValueError for anything else."""
    example = "use ISO-8601 UTC like 2026-10-28T09:00:00Z"
    if not isinstance(value, str):
        raise ValueError(f"expected a time as a string; {example}")
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{show(value)} is not a time; {example}") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return at.astimezone(timezone.utc)


def check_answer(value: str) -> str:
    """Returns `value` if it is one of CARD_ANSWERS; raises ValueError if not."""
    if value not in CARD_ANSWERS:
        raise ValueError(f"{show(value)} is not a card answer; use one of {', '.join(CARD_ANSWERS)}")
    return value


Key = Annotated[str, AfterValidator(reduce_key)]
ToolName = Annotated[str, AfterValidator(lambda v: reduce_name(v, "tool name"))]
FieldName = Annotated[str, AfterValidator(lambda v: reduce_name(v, "field name"))]
Skill = Annotated[str, AfterValidator(lambda v: reduce_name(v, "skill"))]
Table = Annotated[str, AfterValidator(check_table)]
Uid = Annotated[int, AfterValidator(check_uid)]
At = Annotated[datetime, BeforeValidator(parse_at)]
MessageNo = Annotated[int, Field(ge=1)]


def pair(uid: int | None, info: ValidationInfo, table_key: str, uid_key: str) -> int | None:
    """Returns `uid` if it comes with a table, or neither is given (a RecordRef needs both)."""
    if table_key not in info.data:
        return uid  # the table itself failed; its error is reported first
    table = info.data[table_key]
    if table is not None and uid is None:
        raise ValueError(f"is missing; {table_key} {show(table)} needs a {uid_key} beside it")
    if table is None and uid is not None:
        raise ValueError(f"needs a {table_key} beside it; a record is a table and a uid")
    return uid


class Tolerant(BaseModel):
    """Base of the input models: strict types, unknown keys ignored, frozen."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
