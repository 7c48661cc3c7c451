"""The reproduction record (issue 40): one reproduction stream as one JSON line, which `chatrecord
export --with-reproductions` writes after a conversation's lines and `chatrecord ingest` reads
back (docs/input-format.md, "Reproduction records"). It is not a line of the chat's: the chat's
endpoint (`POST /v1/lines`) refuses it, and `replay FILE` passes over it.

Its fields are the stream's as kept (`adapters.store.reproductions`): the first event's facts
beside `type`, `conversation`, `at` (when it was started) and `reproduction` (its UUID), and
`answers`, each answer's facts with its text opened (`[erased]` for an erased conversation's).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from adapters.ingest.error_messages import input_path
from domain.errors import InvalidInput
from domain.limits import LINE_BYTES_MAX, TEXT_MAX

REPRODUCTION = "reproduction"
"""The record's `type`."""


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class KeptVerdict(_Model):
    """A judge's verdict as an answer keeps it (`projections.answer_judge.Verdict.to_json`)."""

    denies: bool
    names_writes: bool
    rubric: str = Field(max_length=200)
    judge: str = Field(max_length=200)
    reason: str = Field(max_length=2000)


class KeptWrites(_Model):
    records: list[str]
    fields: list[str]


class KeptAnswer(_Model):
    """One answer of the stream: its text opened, the facts kept beside it."""

    at: str
    text: str = Field(max_length=TEXT_MAX)
    latency_ms: int = Field(ge=0)
    usage: dict[str, Any]
    finish_reason: str | None
    verdict: KeptVerdict
    judged: KeptVerdict | None = None


class ReproductionLine(_Model):
    """One reproduction stream as the export writes it; `line` is its 1-based line number."""

    type: str
    conversation: str = Field(min_length=1)
    at: str
    reproduction: str
    place: int = Field(ge=0)
    rules: str
    message: int = Field(ge=1)
    log_version: int = Field(ge=1)
    model: str
    url: str
    parameters: dict[str, Any]
    input_sha256: str = Field(pattern="^[0-9a-f]{64}$")
    writes: KeptWrites
    answers: list[KeptAnswer] = Field(min_length=1)
    line: int = 0

    @field_validator("reproduction")
    @classmethod
    def _uuid(cls, value: str) -> str:
        if str(UUID(value)) != value:
            raise ValueError("expected a reproduction id as the export writes it (a lower-case UUID)")
        return value

    def started(self) -> dict[str, Any]:
        """Returns the facts of the stream's first event (`reproduction_started`)."""
        return self.model_dump(exclude={"type", "reproduction", "answers", "line"}, mode="json")


def is_reproduction(raw: str | bytes) -> bool:
    """Returns True when the line `raw` is a reproduction record (a JSON object of `type`
    `reproduction`); cheap for the chat's lines, which are read only when they name the type."""
    named = REPRODUCTION.encode() in raw if isinstance(raw, bytes) else REPRODUCTION in raw
    if not named:
        return False
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(data, dict) and data.get("type") == REPRODUCTION


def parse_reproduction(raw: str | bytes, line_no: int, source_name: str) -> ReproductionLine:
    """Returns the reproduction record `raw` (line `line_no` of `source_name`, which
    `is_reproduction`). Raises InvalidInput naming the field and what was expected."""
    if len(raw) > LINE_BYTES_MAX:
        raise InvalidInput(source_name, line_no, "(line)", f"is longer than {LINE_BYTES_MAX:,} bytes, the most a line may be")
    data = orjson.loads(raw)
    try:
        return ReproductionLine.model_validate({**data, "line": line_no})
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        expected = first["msg"][0].lower() + first["msg"][1:]
        raise InvalidInput(source_name, line_no, input_path(tuple(first["loc"])) or "(line)", expected) from None
