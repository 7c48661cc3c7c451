"""Errors of the HTTP service as RFC 9457 problem details (`application/problem+json`).

Every error class has a stable `type` URI, `urn:chatrecord:problem:<name>`:

| status | name                   | when                                                          |
|--------|------------------------|---------------------------------------------------------------|
| 400    | unreadable-json        | a body (or an NDJSON line) that is not JSON or not UTF-8      |
| 400    | bad-request            | a query parameter or header of the wrong form                 |
| 401    | unauthorized           | no `Authorization: Bearer …` or the wrong token               |
| 404    | unknown-conversation   | a conversation id the store does not hold                     |
| 404    | no-such-turn           | `at=N` names a user message that started no turn, `upto=N`    |
|        |                        | (export) one the conversation does not have                   |
| 404    | not-found              | no such path                                                  |
| 405    | method-not-allowed     | a path that does not take this method                         |
| 409    | refused-line           | a line the conversation refuses (`rule` names the rule); one  |
|        |                        | that came too early (`early: true`, `waits_for` names what it |
|        |                        | waits for) has `Retry-After: 1`: send it again later          |
| 409    | no-turn                | a conversation with no user message yet has no turn to read   |
| 409    | chain-broken           | an append to a conversation whose hash chain is broken        |
|        |                        | (`version`, `problem` as `chatrecord verify` names them)      |
| 409    | model-not-set          | a reproduction asked of a server whose model is not           |
|        |                        | configured (CHATRECORD_MODEL_URL, CHATRECORD_MODEL)           |
| 409    | conflict               | any other refusal of the store (its class in `rule`)          |
| 409    | request-in-progress    | an `Idempotency-Key` whose first request is still in flight   |
|        |                        | (`Retry-After: 1`; retried, it gets that request's response)  |
| 412    | version-mismatch       | `If-Match` names another version than the conversation's      |
|        |                        | (`expected`: the version named, a list, or `*`; `actual`)     |
| 413    | body-too-large         | a body over `CHATRECORD_MAX_BODY_BYTES`                       |
| 415    | unsupported-media-type | a body that is neither JSON nor NDJSON                        |
| 422    | bad-line               | a line of the wrong shape (`line`, `field`, `expected`)       |
| 422    | idempotency-key-reused | an `Idempotency-Key` sent before with another body            |
| 429    | too-many-wrong-tokens  | the client sent a wrong token lately and must wait (the token |
|        |                        | is not compared; `Retry-After` says how long)                 |
| 503    | write-conflict         | a write that kept conflicting with other writers; retry       |
| 503    | store-unavailable      | the database does not answer or cannot be used                |
| 500    | internal               | a bug; the server's log has the traceback                     |
| 502    | model-unavailable      | the model endpoint of a reproduction does not answer, refuses |
|        |                        | the key, does not know the model or fails after its retries   |
|        |                        | (the answers completed before it are kept)                    |

A problem never holds a traceback, and never a stored value: only what the request itself sent
(a line's field path, a conversation id), rule names and numbers.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from eventsourcing.persistence import IntegrityError, PersistenceError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from adapters.api import ModelNotSet, ModelUnusable, NoSuchMessage, TurnNotFound, VersionMismatch
from domain.errors import ChatrecordError, InvalidInput, LineOutOfOrder, UnknownConversation, shown_id
from projections.turn import NoTurnYet

PROBLEM = "application/problem+json"
TYPE_PREFIX = "urn:chatrecord:problem:"
TITLES = {
    "unreadable-json": "The body is not readable JSON",
    "bad-request": "A parameter or header has the wrong form",
    "unauthorized": "A valid bearer token is required",
    "unknown-conversation": "No such conversation",
    "no-such-turn": "No such turn",
    "not-found": "No such resource",
    "method-not-allowed": "Method not allowed",
    "refused-line": "The conversation refuses this line",
    "no-turn": "The conversation has no turn yet",
    "conflict": "The store refuses this request",
    "request-in-progress": "A request with this Idempotency-Key is still being processed",
    "version-mismatch": "The conversation is at another version",
    "body-too-large": "The body is too large",
    "body-timeout": "The body did not arrive in time",
    "unsupported-media-type": "Send application/json or application/x-ndjson",
    "bad-line": "A line does not have the input format's shape",
    "idempotency-key-reused": "This Idempotency-Key was used with another body",
    "too-many-wrong-tokens": "Too many wrong tokens from this address; wait before the next attempt",
    "write-conflict": "The write kept conflicting with other writers",
    "store-unavailable": "The store cannot be used now",
    "unreadable-event": "A stored event of the conversation cannot be read",
    "chain-broken": "The conversation's hash chain is broken; nothing was appended",
    "internal": "Internal error",
    "model-not-set": "No model is configured for reproductions",
    "model-unavailable": "The model endpoint cannot be used",
}
RETRY_LATER = {"Retry-After": "1"}
"""The header of a line that came too early: the chat sends it again (after the lines it waits for)."""
log = logging.getLogger("chatrecord.http")


class Problem(Exception):
    """An error response: `status`, problem `name` (see TITLES), `detail` and extra members."""

    def __init__(self, status: int, name: str, detail: str, headers: dict[str, str] | None = None, **members: Any) -> None:
        super().__init__(detail)
        self.status, self.name, self.detail = status, name, detail
        self.headers = headers or {}
        self.members = members

    def response(self) -> JSONResponse:
        """Returns the problem as an `application/problem+json` response."""
        body = {
            "type": TYPE_PREFIX + self.name,
            "title": TITLES[self.name],
            "status": self.status,
            "detail": self.detail,
            **self.members,
        }
        return JSONResponse(body, status_code=self.status, headers=self.headers, media_type=PROBLEM)


def from_error(error: ChatrecordError) -> Problem:
    """Returns the problem of an error the service layer raised."""
    if isinstance(error, InvalidInput):
        return Problem(422, "bad-line", str(error), line=error.line, field=error.field, expected=error.expected)
    if isinstance(error, VersionMismatch):
        return Problem(412, "version-mismatch", str(error), expected=error.expected, actual=error.actual)
    if isinstance(error, UnknownConversation):
        return Problem(404, "unknown-conversation", "no conversation of this id in the store; check the id or record it first")
    if isinstance(error, TurnNotFound):
        return Problem(404, "no-such-turn", str(error).replace("--at ", "at="))
    if isinstance(error, NoSuchMessage):
        return Problem(404, "no-such-turn", str(error).replace("--upto ", "upto="))
    if isinstance(error, NoTurnYet):
        return Problem(409, "no-turn", str(error))
    if isinstance(error, ModelNotSet):
        return Problem(
            409,
            "model-not-set",
            "no model is configured for reproductions; the operator sets CHATRECORD_MODEL_URL and CHATRECORD_MODEL",
        )
    if isinstance(error, ModelUnusable):  # its message names the endpoint the server is configured with: for an operator
        log.error("model error: %s", error)
        kept = f"{error.recorded} complete answer(s) were kept" if error.recorded else "no answer was kept"
        return Problem(502, "model-unavailable", f"the model endpoint cannot be used now (the server's log says why); {kept}")
    rule = type(error).__name__
    if rule == "UnreadableEvent":  # damaged or reordered data, or a newer version's: for an operator
        log.error("unreadable event: %s", error)
        return Problem(
            500,
            "unreadable-event",
            f"a stored event of the conversation cannot be read (version "
            f"{getattr(error, 'version', None)}); its chain can be checked with chatrecord verify",
            version=getattr(error, "version", None),
        )
    if rule == "ChainBroken":  # an event written beside the store, or one stored before the chain: for an operator
        log.error("append refused: %s", error)
        problem = getattr(error, "problem", None)
        step = "chatrecord verify --upgrade" if problem == "unchained" else "chatrecord verify"
        return Problem(
            409,
            "chain-broken",
            f"the conversation's hash chain is broken at version "
            f"{getattr(error, 'version', None)} ({problem}); nothing was appended; an operator runs {step}",
            version=getattr(error, "version", None),
            problem=problem,
        )
    if rule in ("StoreUnusable", "PrimaryGone"):  # its message names the store's settings: the server's log has it
        log.error("store error: %s", error)
        return Problem(503, "store-unavailable", "the store cannot be used now; try again later", headers={"Retry-After": "5"})
    if rule == "WriteConflict":
        return Problem(
            503, "write-conflict", "the write kept conflicting with other writers; send it again", headers={"Retry-After": "1"}
        )
    if isinstance(error, LineOutOfOrder) and error.early is not None:
        # its versions are what the 412 of If-Match shows too; what else the store holds is not shown
        when = "too early: it waits for the lines before it" if error.early else "too late: it was written for an earlier state"
        return Problem(
            409,
            "refused-line",
            f"{_where(error)}: refused: the line came {when} (the conversation is "
            f"at version {error.actual}; the line follows version {error.follows}); nothing of it was stored",
            headers=RETRY_LATER if error.early else None,
            rule=rule,
            field=error.field,
            follows=error.follows,
            actual=error.actual,
            early=error.early,
            **({"waits_for": error.waits_for} if error.early else {}),
        )
    if type(error).__module__ == "domain.errors" and error.waits_for is not None:
        # what it waits for is named by the line itself (a message number, a segment id, a line type)
        return Problem(
            409,
            "refused-line",
            f"{refusal(error)}: the line came too early: it waits for {error.waits_for}; nothing of it was "
            "stored, send it again later",
            headers=RETRY_LATER,
            rule=rule,
            field=error.field,
            early=True,
            waits_for=error.waits_for,
        )
    if type(error).__module__ == "domain.errors":
        return Problem(409, "refused-line", refusal(error), rule=rule, field=error.field)
    return Problem(409, "conflict", refusal(error), rule=rule)


def version_mismatch(error: VersionMismatch, expected: str | list[int]) -> Problem:
    """Returns the 412 of an If-Match that matched no version. `expected` is "*" for `If-Match: *` (any
    version from 1), or the version or list of versions named."""
    if isinstance(expected, str):  # "*"
        return Problem(
            412,
            "version-mismatch",
            f"conversation {shown_id(error.conversation, 'repr')} is not started (version 0): If-Match: * "
            'matches a conversation at any version from 1; send its first line without If-Match, or with If-Match: "0"',
            expected="*",
            actual=error.actual,
        )
    if len(expected) == 1:
        return from_error(VersionMismatch(error.conversation, expected[0], error.actual))
    named = ", ".join(map(str, expected))
    return Problem(
        412,
        "version-mismatch",
        f"conversation {shown_id(error.conversation, 'repr')} is at version {error.actual}, not one of {named}; read it again",
        expected=list(expected),
        actual=error.actual,
    )


def refusal(error: ChatrecordError) -> str:
    """Returns where the refused line is (`request: line 2, segment`) and the rule's own words (its class's
    docstring). The error's message may quote stored values, which a problem never shows."""
    doc = " ".join((type(error).__doc__ or "").split("\n\n")[0].split())
    reason = doc.removeprefix("Raised when ").rstrip(".") or "the store refuses it"
    return f"{_where(error)}: refused: {reason}"


def _where(error: ChatrecordError) -> str:
    """Returns where a refused line is: `request: line 2, segment` (its field, if it names one)."""
    where = re.match(r"^(.*?: line \d+)", str(error))
    return (where.group(1) if where else "request") + (f", {error.field}" if error.field else "")


def allowed(request: Request) -> str:
    """Returns the methods of every route with `request`'s path, as an `Allow` header value."""
    methods: set[str] = set()
    routes = list(request.app.router.routes)
    while routes:
        route = routes.pop()
        included = getattr(route, "original_router", None)  # FastAPI's included router (its routes keep their prefix)
        if included is not None:
            routes.extend(included.routes)
            continue
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def invalid_request(error: RequestValidationError) -> Problem:
    """Returns the 400 problem of a parameter of the wrong form: where it is (`query.before`) and what is wrong."""
    first = error.errors()[0] if error.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    return Problem(400, "bad-request", f"{where}: {first.get('msg', 'invalid')}", where=where)


def install(app: FastAPI) -> None:
    """Makes every error of `app` a problem: its own, the service layer's, the framework's."""

    @app.exception_handler(Problem)
    async def problem(request: Request, error: Problem) -> JSONResponse:
        return error.response()

    @app.exception_handler(ChatrecordError)
    async def chatrecord_error(request: Request, error: ChatrecordError) -> JSONResponse:
        return from_error(error).response()

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return invalid_request(error).response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        name = {404: "not-found", 405: "method-not-allowed"}.get(error.status_code, "bad-request")
        headers = dict(error.headers or {})
        if error.status_code == 405:  # every route of the path, not only the first that matched it (POST and GET …/reproductions)
            headers["Allow"] = allowed(request) or headers.get("Allow", "")
        return Problem(error.status_code, name, str(error.detail), headers=headers).response()

    @app.exception_handler(IntegrityError)
    async def conflict(request: Request, error: IntegrityError) -> JSONResponse:
        return Problem(
            503, "write-conflict", "the write kept conflicting with other writers; send it again", headers={"Retry-After": "1"}
        ).response()

    @app.exception_handler(PersistenceError)
    async def store_down(request: Request, error: PersistenceError) -> JSONResponse:
        log.error("store error: %s", type(error).__name__)
        return Problem(
            503, "store-unavailable", "the store cannot be used now; try again later", headers={"Retry-After": "5"}
        ).response()

    @app.exception_handler(ClientDisconnect)
    async def gone(request: Request, error: ClientDisconnect) -> Response:
        # the client went away while sending its body: nothing of it was stored, no one to answer
        log.info("client disconnected during %s %s; nothing of its request was stored", request.method, request.url.path)
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def bug(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return Problem(500, "internal", "an internal error; the server's log has the details").response()
