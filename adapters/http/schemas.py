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


def _line_schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns the schema of one input line (a union discriminated on `type`) and its
    components, made from the parser's own models (`adapters.ingest.lines`): the bounds are
    those the ingester enforces (`domain.limits`)."""
    from pydantic import TypeAdapter

    from adapters.ingest.lines import ParsedLine

    schema = TypeAdapter(ParsedLine).json_schema(ref_template="#/components/schemas/{model}")
    components = schema.pop("$defs")
    schema["description"] = "One line of the chat's input format (docs/input-format.md), by its `type`."
    return schema, components


def _demo_examples() -> dict[str, Any]:
    """Returns the demo tour's lines (`chatrecord demo`) as examples, one per line type."""
    import json
    from importlib.resources import files

    examples: dict[str, Any] = {}
    for text in files("adapters.data").joinpath("demo_seo_tour.jsonl").read_text("utf-8").splitlines():
        line = json.loads(text)
        examples.setdefault(line["type"], {"summary": f"a {line['type']} line of the demo tour", "value": line})
    return examples


ETAG = {"description": 'The conversation\'s version as a strong ETag, e.g. "7" (send it as If-Match).',
        "schema": {"type": "string", "pattern": '^"[0-9]+"$'}}
REPLAYED = {"description": "true when this is the kept response to an Idempotency-Key sent before.",
            "schema": {"type": "string", "enum": ["true"]}}
ERASED = {"description": "true when the conversation was erased: its texts read [erased].",
          "schema": {"type": "string", "enum": ["true"]}}
PROBLEM_TYPES = {
    400: ["unreadable-json", "bad-request"], 401: ["unauthorized"],
    404: ["unknown-conversation", "no-such-turn", "not-found"], 405: ["method-not-allowed"],
    409: ["refused-line", "no-turn", "chain-broken", "conflict"],
    412: ["version-mismatch"], 413: ["body-too-large"], 415: ["unsupported-media-type"],
    422: ["bad-line", "idempotency-key-reused"], 500: ["unreadable-event", "internal"],
    503: ["write-conflict", "store-unavailable"],
}
"""The problem `type`s (`urn:chatrecord:problem:<name>`, adapters.http.problems) each status carries."""


def document(app: Any) -> dict[str, Any]:
    """Returns the OpenAPI document of `app` (kept as `app.openapi_schema`): FastAPI's, with the
    line schemas of `POST /v1/lines`, the headers and problem types each response really has,
    links from a recorded line to its conversation's reads, and no 422 that never occurs (a bad
    parameter is a 400 problem)."""
    from fastapi.openapi.utils import get_openapi

    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    line, components = _line_schemas()
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(components)
    schemas["Line"] = line
    reads = {}
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):  # an optional parameter is left out, never "null"
                branches = parameter["schema"].pop("anyOf", None)
                if branches:
                    parameter["schema"].update(next(b for b in branches if b != {"type": "null"}))
            responses = operation.get("responses", {})
            if "HTTPValidationError" in str(responses.get("422", "")):
                del responses["422"]
            for status, response in responses.items():
                if status.isdigit() and int(status) in PROBLEM_TYPES and "content" in response:
                    names = PROBLEM_TYPES[int(status)]
                    response["content"] = {"application/problem+json": {"schema": {"allOf": [
                        {"$ref": "#/components/schemas/ProblemDetails"},
                        {"properties": {"type": {"enum": [f"urn:chatrecord:problem:{n}" for n in names]}}}]}}}
                    response["description"] += " (problem type: " + ", ".join(names) + ")"
            if method == "get" and path.startswith("/v1/conversations/{conversation}/"):
                reads[path.rsplit("/", 1)[1]] = operation["operationId"]
    for name in ("HTTPValidationError", "ValidationError"):
        if name in schemas and name not in str(doc["paths"]):
            del schemas[name]
    post = doc["paths"]["/v1/lines"]["post"]
    post["requestBody"] = {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Line"}, "examples": _demo_examples()},
        "application/x-ndjson": {"schema": {"type": "string", "description": (
            "JSON Lines: one Line object a line, all of one conversation; recorded all or nothing.")}},
    }}
    ok = post["responses"]["200"]
    ok["headers"] = {"ETag": ETAG, "Idempotent-Replayed": REPLAYED}
    ok["links"] = {name: {"operationId": operation, "parameters": {"conversation": "$response.body#/conversation"},
                          "description": f"The conversation's {name} after the line."}
                   for name, operation in sorted(reads.items())}
    turn = doc["paths"].get("/v1/conversations/{conversation}/turn", {}).get("get")
    if turn:
        turn["responses"]["200"]["headers"] = {"ETag": ETAG}
    schemas["ProblemDetails"] = ProblemDetails.model_json_schema()
    schemas["ProblemDetails"]["properties"]["type"]["pattern"] = "^urn:chatrecord:problem:[a-z-]+$"
    app.openapi_schema = doc
    return doc
