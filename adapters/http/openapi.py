"""The OpenAPI document (`docs/openapi.json`, served at /openapi.json): FastAPI's, completed by `document`.
It adds the line schemas of `POST /v1/lines`, each response's real headers and problem types, links from
a line to its conversation's reads, and the demo tour's answers as examples. The bodies' shapes are in
`adapters.http.schemas`."""

from __future__ import annotations

from typing import Any

from adapters.http.problem_details import ProblemDetails

LINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "conversation", "at"],
    "properties": {
        "type": {"type": "string"},
        "conversation": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
    },
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
    """Returns the schema of one input line (a union on `type`) and its components, from the parser's
    models. The bounds are those the ingester enforces (`domain.limits`)."""
    from pydantic import TypeAdapter

    from adapters.api import ParsedLine

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


DEMO = "conv-demo-seo"
"""The demo tour's conversation (`chatrecord demo`), whose answers are the reads' examples."""


def _demo_reads() -> dict[str, dict[str, Any]]:
    """Returns, by path, the example 200 of each read: the demo tour's real answer, cut to first rows and
    the latest turn."""
    from adapters.api import Chatrecord, open_store

    chatrecord = Chatrecord(open_store(memory=True))
    try:
        chatrecord.demo()
        rows = chatrecord.audit(DEMO, chain=True).to_json()
        segments = [s.model_dump(mode="json") for s in chatrecord.activity(DEMO)]
        cut = next(n for n, row in enumerate(rows, start=1) if row["kind"] == "card_outcome")
        read = "/v1/conversations/{conversation}/"
        return {
            "/v1/conversations": {"summary": "the store of `chatrecord demo`", "value": chatrecord.conversations().to_json()},
            read + "turn": {"summary": "the demo tour's next turn", "value": chatrecord.turn_notes(DEMO).to_json()},
            read + "audit": {"summary": f"the first {cut} of the demo tour's {len(rows)} rows", "value": rows[:cut]},
            read + "activity": {"summary": f"the first 2 of the demo tour's {len(segments)} segments", "value": segments[:2]},
            read + "replay": {
                "summary": "the demo tour's latest turn (?at=3)",
                "value": chatrecord.replay(DEMO, at=3).to_json(),
            },
            read + "replay/changes": {
                "summary": "the demo tour's turns as what changed (?limit=1: its first page)",
                "value": changes_page(chatrecord),
            },
        }
    finally:
        chatrecord.close()


def changes_page(chatrecord: Any) -> dict[str, Any]:
    """Returns the first page of one turn of the demo tour's `GET …/replay/changes`."""
    from adapters.api import TurnRange

    stream = chatrecord.replay_stream(DEMO, form="changes", span=TurnRange(limit=1))
    turns = list(stream.turns)
    return {**stream.head(), "turns": turns, "next_cursor": stream.next_cursor}


ETAG = {
    "description": 'The conversation\'s version as a strong ETag, e.g. "7" (send it as If-Match): the number '
    'of events it holds, "0" before its first line.',
    "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
}
REPLAYED = {
    "description": "true when this is the kept response to an Idempotency-Key sent before.",
    "schema": {"type": "string", "enum": ["true"]},
}
READ_AFTER_HEADER = {
    "description": "The write's position, where the service reads from standbys "
    "(CHATRECORD_READ_DATABASE_URL): a GET sent with it as Chatrecord-Read-After is never older "
    "than this write. Opaque (PostgreSQL's WAL position, e.g. 0/3016040); absent otherwise.",
    "schema": {"type": "string", "pattern": "^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$"},
}
ERASED = {
    "description": "true when the conversation was erased: its texts read [erased].",
    "schema": {"type": "string", "enum": ["true"]},
}
RETRY_AFTER = {
    "description": "Seconds to wait before sending the same request again: on a line that came too early "
    "(refused-line with early: true; it waits for waits_for, which another request delivers) and on "
    "request-in-progress. A 409 without it is final: sent again, the line is refused again.",
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
WAIT_AFTER_WRONG_TOKENS = {
    "description": "Seconds the client must wait before its next attempt: after a wrong token it waits "
    "1 s, twice as long after each further one, at most 300 s.",
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
CHAIN_BROKEN = {
    "description": "broken when the conversation's hash chain does not verify: the lines hold the events as the store holds them now, a changed one among them (`chatrecord verify` names the break).",
    "schema": {"type": "string", "enum": ["broken"]},
}
AUDIT_CHAIN_BROKEN = {
    "description": "broken when the conversation's hash chain does not verify: the rows after the break are not `verified` (`chatrecord verify` names the break).",
    "schema": {"type": "string", "enum": ["broken"]},
}
TURN_CHAIN_BROKEN = {
    "description": "broken when the store keeps a break of the conversation's hash chain (found by `chatrecord verify`, any look, or the store's guard): the notes were read from the read models, which a changed or removed event may not match (`chatrecord verify` names the break). No hash is recomputed for this read.",
    "schema": {"type": "string", "enum": ["broken"]},
}
PROBLEM_TYPES = {
    400: ["unreadable-json", "bad-request"],
    401: ["unauthorized"],
    404: ["unknown-conversation", "no-such-turn", "not-found"],
    405: ["method-not-allowed"],
    408: ["body-timeout"],
    409: ["refused-line", "no-turn", "chain-broken", "conflict", "request-in-progress", "model-not-set"],
    412: ["version-mismatch"],
    413: ["body-too-large"],
    415: ["unsupported-media-type"],
    422: ["bad-line", "idempotency-key-reused"],
    429: ["too-many-wrong-tokens"],
    500: ["unreadable-event", "internal"],
    502: ["model-unavailable"],
    503: ["write-conflict", "store-unavailable"],
}
"""The problem `type`s (`urn:chatrecord:problem:<name>`, adapters.http.problems) each status carries."""


def document(app: Any) -> dict[str, Any]:
    """Returns the OpenAPI document of `app`, kept as `app.openapi_schema`. FastAPI's, plus the line
    schemas, real headers and problem types, links and examples (see the module). It drops the 422s that
    never occur; a bad parameter is a 400 problem."""
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
            if "429" in responses:
                responses["429"]["headers"] = {"Retry-After": WAIT_AFTER_WRONG_TOKENS}
            for status, response in responses.items():
                if status.isdigit() and int(status) in PROBLEM_TYPES and "content" in response:
                    names = PROBLEM_TYPES[int(status)]
                    response["content"] = {
                        "application/problem+json": {
                            "schema": {
                                "allOf": [
                                    {"$ref": "#/components/schemas/ProblemDetails"},
                                    {"properties": {"type": {"enum": [f"urn:chatrecord:problem:{n}" for n in names]}}},
                                ]
                            }
                        }
                    }
                    response["description"] += " (problem type: " + ", ".join(names) + ")"
            if method == "get" and path.startswith("/v1/conversations/{conversation}/"):
                reads[path.rsplit("/", 1)[1]] = operation["operationId"]
    for name in ("HTTPValidationError", "ValidationError"):
        if name in schemas and name not in str(doc["paths"]):
            del schemas[name]
    post = doc["paths"]["/v1/lines"]["post"]
    post["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Line"}, "examples": _demo_examples()},
            "application/x-ndjson": {
                "schema": {
                    "type": "string",
                    "description": ("JSON Lines: one Line object a line, all of one conversation; recorded all or nothing."),
                }
            },
        },
    }
    ok = post["responses"]["200"]
    ok["headers"] = {"ETag": ETAG, "Idempotent-Replayed": REPLAYED, "Chatrecord-Read-After": READ_AFTER_HEADER}
    post["responses"]["409"]["headers"] = {"Retry-After": RETRY_AFTER}
    ok["links"] = {
        name: {
            "operationId": operation,
            "parameters": {"conversation": "$response.body#/conversation"},
            "description": f"The conversation's {name} after the line.",
        }
        for name, operation in sorted(reads.items())
    }
    for path, example in _demo_reads().items():
        doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["examples"] = {"demo": example}
    turn = doc["paths"].get("/v1/conversations/{conversation}/turn", {}).get("get")
    if turn:
        turn["responses"]["200"]["headers"] = {"ETag": ETAG}
    schemas["ProblemDetails"] = ProblemDetails.model_json_schema()
    schemas["ProblemDetails"]["properties"]["type"]["pattern"] = "^urn:chatrecord:problem:[a-z-]+$"
    app.openapi_schema = doc
    return doc
