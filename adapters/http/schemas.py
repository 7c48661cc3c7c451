"""The shapes of the HTTP service's bodies, for the OpenAPI document (`docs/openapi.json`)
the PHP side generates its client from. The handlers write the JSON themselves (orjson); these
models only describe it."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Full(str, Enum):
    full = "full"


class ProblemDetails(BaseModel):
    """RFC 9457 problem details; `type` is `urn:chatrecord:problem:<name>`."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str


class EventRef(BaseModel):
    type: str = Field(description="The event's class, e.g. SegmentReturned.")
    version: int = Field(description="The event's version in its conversation (1-based).")


class LineResult(BaseModel):
    line: int = Field(description="1-based number of the line in the request (blank lines are not listed).")
    appended: int = Field(description="Events the line appended; 0 for a line recorded before.")
    repeated: bool


class Recorded(BaseModel):
    """What `POST /v1/lines` stored."""

    conversation: str
    version: int = Field(description="The conversation's version afterwards (also the ETag).")
    appended: int = Field(description="Events appended by the request.")
    repeated: bool = Field(description="True when every line was recorded before; nothing was appended.")
    events: list[EventRef] = Field(description="The events appended; for one repeated line, those that recorded it first.")
    lines: list[LineResult]


class PlacedNote(BaseModel):
    text: str = Field(description="The labelled note, exactly as the model reads it.")
    index: int = Field(description="0-based index into the transcript the chat holds (no system message).")
    into: Literal["assistant", "user", "new"] = Field(
        description="Joins the assistant or user message at `index`, or `new`: an assistant message of its own "
                    "inserted before the message at `index`.")
    at: int | None = Field(description="For `assistant`: the character offset in that message's text where the "
                                       "note goes, after a blank line.")


class TurnNotes(BaseModel):
    """The chat's read of the next turn."""

    conversation: str
    rules: str
    version: int
    page_line: str = Field(description="The system message's text.")
    notes: list[PlacedNote]
    messages: list[dict[str, str]] | None = Field(
        None, description="With ?messages=full: every message the model is sent, {role, content}.")


class Health(BaseModel):
    status: Literal["ok"]
    position: int = Field(description="The position of the newest stored event.")


LINE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["type", "conversation", "at"],
    "properties": {"type": {"type": "string"}, "conversation": {"type": "string"},
                   "at": {"type": "string", "format": "date-time"}},
    "additionalProperties": True,
    "description": "One line of the chat's input format (docs/input-format.md).",
}
LINES_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": LINE_SCHEMA},
            "application/x-ndjson": {"schema": {"type": "string", "description": "JSON Lines: lines of one conversation."}},
        },
    },
}
