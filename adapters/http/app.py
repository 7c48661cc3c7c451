"""The HTTP service the chat calls (FastAPI).

The store is synchronous. The chat's routes hand work to a thread (`offload`); other handlers are sync
and run on FastAPI's threads. `create_app(chatrecord_factory, settings)` builds the app. The factory is
called once per process at start-up; the store is closed at shut-down. Each endpoint calls one
`Chatrecord` method and translates; errors are problems (`problems`). `/v1/healthz` and `/openapi.json`
need no token. All else needs `Authorization: Bearer <CHATRECORD_API_TOKEN>`, compared in constant time
(`bearer`).

No `from __future__ import annotations` here: FastAPI reads the handlers' annotations."""

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, FastAPI, Header, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import Route

from adapters.api import (
    MAX_KEY,
    BadSetting,
    Chatrecord,
    KeyInFlight,
    KeyReused,
    Replayed,
    VersionMismatch,
    beyond_the_reader,
    body_hash,
    json_problem,
)
from adapters.http import openapi, schemas
from adapters.http.bearer import CHALLENGE, check_bearer
from adapters.http.conversation_paths import ConversationRoute
from adapters.http.headers import (
    ANY,
    IDEMPOTENCY_KEY_PATTERN,
    IF_MATCH_PATTERN,
    JSON,
    NDJSON,
    READ_AFTER,
    charset_of,
    differs,
    etag,
    fingerprint,
    if_match,
    read_after,
    read_after_header,
)
from adapters.http.hot_routes import ChatrecordApp, HotRoutes
from adapters.http.offload import offload
from adapters.http.problem_details import ProblemDetails
from adapters.http.problems import PROBLEM, Problem, install, version_mismatch
from adapters.http.reads import Service, add_reads, json_response, service, turn_read
from adapters.http.reproductions import add_reproductions
from adapters.http.sessions import FIRST_WAIT, Throttle
from adapters.http.slow_bodies import DEFAULT_BODY_TIMEOUT_SECONDS, install_body_deadline
from adapters.http.ui import install_ui
from adapters.processes import end_with_parent
from projections.page_line import PageFilter

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""A request body may hold this many bytes (8 MiB) unless CHATRECORD_MAX_BODY_BYTES says otherwise."""
SOURCE = "request"
"""How errors name the request's body: `request: line 3, segment: …`."""


TOKEN_MIN = 16
"""The fewest characters a bearer token may have (`serve` refuses a shorter one)."""


@dataclass(frozen=True)
class HttpSettings:
    """`token`: the bearer token (None: no authentication). `max_body_bytes`: the body limit.
    `body_timeout`: seconds for a body to arrive. `wrong_token_wait`: seconds after the first wrong token
    (0: none)."""

    token: str | None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout: float = DEFAULT_BODY_TIMEOUT_SECONDS
    wrong_token_wait: float = FIRST_WAIT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, no_auth: bool = False) -> "HttpSettings":
        """Reads CHATRECORD_API_TOKEN (ignored with `no_auth`), CHATRECORD_MAX_BODY_BYTES,
        CHATRECORD_BODY_TIMEOUT_SECONDS and CHATRECORD_WRONG_TOKEN_WAIT_SECONDS. Raises BadSetting for: a
        limit not a whole number >= 1; a timeout not a number > 0 (a wait: >= 0); a token shorter than
        TOKEN_MIN; a token with a space or a character outside printable ASCII."""
        environ = os.environ if environ is None else environ
        text = (environ.get("CHATRECORD_MAX_BODY_BYTES") or "").strip()
        if text and not (text.isascii() and text.isdigit() and int(text) >= 1):
            raise BadSetting(f"CHATRECORD_MAX_BODY_BYTES must be a whole number >= 1, not {text!r}")
        token = None if no_auth else (environ.get("CHATRECORD_API_TOKEN") or None)
        if token is not None and not (token.isascii() and token.isprintable() and " " not in token):
            raise BadSetting(
                "CHATRECORD_API_TOKEN must be printable ASCII without spaces (the token the chat "
                "sends after 'Bearer '); no client could send this one"
            )
        if token is not None and len(token) < TOKEN_MIN:
            raise BadSetting(
                f"CHATRECORD_API_TOKEN is {len(token)} character{'s' if len(token) > 1 else ''} long; use at least {TOKEN_MIN} "
                "(a random one: python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
            )
        wait = seconds(environ, "CHATRECORD_WRONG_TOKEN_WAIT_SECONDS", FIRST_WAIT, least=0.0)
        return cls(token, int(text) if text else DEFAULT_MAX_BODY_BYTES, body_timeout(environ), wait)


def body_timeout(environ: Mapping[str, str]) -> float:
    """Returns CHATRECORD_BODY_TIMEOUT_SECONDS (default 30); raises BadSetting unless a number > 0."""
    return seconds(environ, "CHATRECORD_BODY_TIMEOUT_SECONDS", DEFAULT_BODY_TIMEOUT_SECONDS)


def seconds(environ: Mapping[str, str], name: str, default: float, least: float | None = None) -> float:
    """Returns the seconds `name` sets (`default` when unset). Raises BadSetting unless a finite number > 0
    (>= `least` when given)."""
    text = (environ.get(name) or "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = -1.0
    if not (value >= least if least is not None else value > 0) or value == float("inf"):
        bound = f">= {least:g}" if least is not None else "> 0"
        raise BadSetting(f"{name} must be a number of seconds {bound}, not {text!r}")
    return value


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"content": {PROBLEM: {"schema": ProblemDetails.model_json_schema()}}, "description": text}
    for status, text in {
        400: "Unreadable JSON or a bad parameter",
        401: "Missing or wrong token",
        429: "Too many wrong tokens from this address: wait Retry-After seconds (the token is not compared)",
        404: "Unknown conversation or turn",
        409: "Refused",
        500: "A stored event cannot be read back, or a bug",
        502: "The model endpoint does not answer, refuses the key, does not know the model or failed",
        503: "Write conflict or store down",
    }.items()
}


def create_app(chatrecord_factory: Callable[[], Chatrecord], settings: HttpSettings, *, hot: bool = True) -> FastAPI:
    """Returns the app: `/v1` endpoints over the Chatrecord the factory returns. `hot`: the chat's two
    hot requests are answered before FastAPI's routing and middleware (`hot_routes`); without it, by
    FastAPI's routes alone (the same responses, which the tests compare)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        chatrecord = chatrecord_factory()
        app.state.chatrecord = chatrecord
        try:
            yield
        finally:
            chatrecord.close()

    app = ChatrecordApp(
        title="chatrecord",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="What an AI agent's runs in a CMS chat did, recorded as events; the notes a later turn reads.",
    )
    install(app)
    install_body_deadline(app, settings.body_timeout)
    bearer = HTTPBearer(auto_error=False, description="CHATRECORD_API_TOKEN")
    throttle = Throttle(settings.wrong_token_wait)  # one for /v1, /ui and the sign-in form

    async def authorized(request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
        if settings.token is None:
            return
        # `credentials` only names the scheme in the OpenAPI document; the check reads the header exactly
        # as sent: "Bearer", one space, the token (no other space before or after)
        if not check_bearer(request, settings.token, throttle):
            raise Problem(401, "unauthorized", "send Authorization: Bearer <token>", headers=CHALLENGE)

    taken: dict[int, frozenset[str]] = {}

    async def known_query(request: Request) -> None:
        """Refuses (400) a query parameter the operation does not take, so a misspelt one is not ignored."""
        route = request.scope.get("route")
        dependant = getattr(route, "dependant", None)
        if dependant is None:
            return
        names = taken.get(id(route))
        if names is None:
            names = taken[id(route)] = frozenset(query_names(dependant))
        refuse_others(request, names)

    def refuse_others(request: Request, names: frozenset[str]) -> None:
        """Raises the 400 problem for the first query parameter of `request` not in `names`."""
        for name in request.query_params:
            if name not in names:
                takes = f"it takes {', '.join(sorted(names))}" if names else "it takes none"
                shown = name if len(name) <= 64 and name.isprintable() else repr(name[:64])
                raise Problem(
                    400, "bad-request", f"{shown} is not a query parameter of this operation; {takes}", where=f"query.{shown}"
                )

    async def body(request: Request) -> bytes:
        limit = settings.max_body_bytes
        length = request.headers.get("content-length", "")
        too_large = Problem(413, "body-too-large", f"the body may hold at most {limit} bytes", limit=limit)
        if length.isdigit() and int(length) > limit:
            raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    # every /v1 operation can answer these; a conversation's own operations add 404 and 409
    common: dict[int | str, dict[str, Any]] = {status: ERRORS[status] for status in (400, 401, 429, 500, 503)}
    of_a_conversation: dict[int | str, dict[str, Any]] = {status: ERRORS[status] for status in (404, 409)}
    v1 = APIRouter(
        prefix="/v1",
        dependencies=[Depends(authorized), Depends(known_query)],
        responses=common,
        route_class=ConversationRoute,
    )

    @v1.post(
        "/lines",
        response_model=schemas.Recorded,
        openapi_extra=openapi.LINES_BODY,
        responses=of_a_conversation
        | {
            409: ERRORS[409]
            | {
                "description": "Refused; a line that came too early (refused-line with early: true and "
                "waits_for, with Retry-After) or an Idempotency-Key whose first request is still in flight "
                "(request-in-progress, with Retry-After) is sent again later"
            },
            408: ERRORS[409] | {"description": "The body did not arrive within CHATRECORD_BODY_TIMEOUT_SECONDS"},
            412: ERRORS[409] | {"description": "If-Match names another version"},
            413: ERRORS[409] | {"description": "Body over the limit"},
            415: ERRORS[409] | {"description": "Neither JSON nor NDJSON"},
            422: ERRORS[409] | {"description": "A bad line, or an Idempotency-Key reused with another body"},
        },
    )
    async def post_lines(
        request: Request,
        chatrecord: Service,
        raw: Annotated[bytes, Depends(body)],
        if_match_header: Annotated[
            str | None,
            Header(
                alias="If-Match",
                json_schema_extra={"pattern": IF_MATCH_PATTERN},
                description='The version expected, as its ETag: "7"; '
                'a list ("7", "8") matches any of them, * any version of a conversation that exists (RFC 9110 13.1.1). '
                'A conversation not started yet is at version "0". An empty value is as none.',
            ),
        ] = None,
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                json_schema_extra={"maxLength": MAX_KEY, "pattern": IDEMPOTENCY_KEY_PATTERN},
                description="Retries with this key get the first response (with Idempotent-Replayed: true); "
                "the key is reserved before the request runs, so one sent while it is in flight gets a 409. "
                "An empty value is as none.",
            ),
        ] = None,
    ) -> Response:
        """Records one line (a JSON object) or a batch of lines of one conversation (JSON Lines,
        `application/x-ndjson`), all or nothing. A line recorded before is a repeat: nothing is
        appended and the first result is returned. The ETag is the conversation's version; where
        the service reads from standbys, Chatrecord-Read-After is the write's position, which a
        GET hands back to read nothing older."""
        content_type = request.headers.get("content-type") or JSON
        media = content_type.split(";")[0].strip().lower()
        if media != JSON and not media.endswith("+json") and media not in NDJSON:
            raise Problem(415, "unsupported-media-type", f"send {JSON} (one line) or {NDJSON[0]} (lines), not {media}")
        charset = charset_of(content_type)
        if charset not in (None, "utf-8", "utf8"):
            raise Problem(415, "unsupported-media-type", f"lines are JSON, which is UTF-8 (RFC 8259); not charset {charset}")
        text_of = raw.removeprefix(b"\xef\xbb\xbf")  # a BOM ignored (RFC 8259 8.1 allows it), as `chatrecord ingest` does
        lines = [text_of] if media not in NDJSON else text_of.splitlines()
        follows = if_match(if_match_header)
        key = idempotency_key if idempotency_key is not None and idempotency_key.strip() else ""  # an empty one is as none
        if key and not (len(key) <= MAX_KEY and key.isascii() and key.isprintable()):
            raise Problem(
                400,
                "bad-request",
                f"Idempotency-Key must be 1–{MAX_KEY} printable ASCII characters",
                where="header.Idempotency-Key",
            )
        if not key:
            return await offload(lambda: recorded(*answer(chatrecord, lines, follows)))
        return await offload(lambda: once(chatrecord, key, media, raw, if_match_header, lines, follows))

    def once(
        chatrecord: Chatrecord,
        key: str,
        media: str,
        raw: bytes,
        if_match_header: str | None,
        lines: list[bytes],
        follows: list[int] | None,
    ) -> Response:
        """Records `lines` once for Idempotency-Key `key`, on a store thread. Returns the first response, or
        the one kept for the key."""
        digest = fingerprint(media, raw)
        legacy = body_hash(media.encode(), (if_match_header or "").encode(), raw)
        try:
            # the key is checked before the body is read: a retry with another body is told so
            outcome = chatrecord.run_once(key, digest, lambda: answer(chatrecord, lines, follows), (legacy,))
        except KeyReused as error:
            raise Problem(
                422,
                "idempotency-key-reused",
                f"this Idempotency-Key was sent before with {differs(error.kept, digest)}; "
                "a retry sends the same Content-Type and body (If-Match may differ)",
                differs=differs(error.kept, digest),
            ) from None
        except KeyInFlight as error:
            raise Problem(409, "request-in-progress", str(error), headers={"Retry-After": "1"}) from None
        if isinstance(outcome, Replayed):
            return replayed(chatrecord, outcome)
        return recorded(outcome.result, outcome.response)

    def recorded(done: Any, text: str) -> Response:
        """Returns the response of lines recorded: `text`, the ETag, Chatrecord-Read-After."""
        return Response(text, media_type=JSON, headers=etag(done.version) | read_after(done.read_after))

    def readable(lines: list[bytes]) -> None:
        """Raises the 400 `unreadable-json` Problem for the first line that is not JSON."""
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    orjson.loads(line)
                except orjson.JSONDecodeError as error:
                    if beyond_the_reader(line, error.msg):
                        continue  # a line nested too deep is a bad line (422), as one nested 65 levels is
                    raise Problem(
                        400, "unreadable-json", f"{SOURCE}: line {number}: {json_problem(line, error)}", line=number
                    ) from None

    def answer(chatrecord: Chatrecord, lines: list[bytes], versions: list[int] | None) -> tuple[Any, str]:
        """Records `lines` (`record`) once each reads as JSON (`readable`); returns the result
        and its JSON."""
        readable(lines)
        done = record(chatrecord, lines, versions)
        return done, orjson.dumps(done.to_json()).decode()

    def record(chatrecord: Chatrecord, lines: list[bytes], versions: list[int] | None) -> Any:
        """Records `lines` following one of `versions` (any for ANY). The first is tried; on a mismatch, the
        actual version if asked for. The store checks again, so a concurrent writer still gets a 412."""
        if not versions:
            return chatrecord.record_lines(lines, SOURCE, None)
        follows = 1 if versions == [ANY] else versions[0]
        try:
            return chatrecord.record_lines(lines, SOURCE, follows)
        except VersionMismatch as error:
            if not (error.actual in versions or (versions == [ANY] and error.actual >= 1)):
                raise version_mismatch(error, "*" if versions == [ANY] else versions) from None
            return chatrecord.record_lines(lines, SOURCE, error.actual)

    def replayed(chatrecord: Chatrecord, kept: Replayed) -> Response:
        """Returns the response kept for a key, marked as replayed."""
        version = orjson.loads(kept.response)["version"]
        headers = etag(version) | {"Idempotent-Replayed": "true"}
        headers |= read_after(chatrecord.position())  # past the first write, whenever it was
        return Response(kept.response, status_code=kept.status, media_type=JSON, headers=headers)

    async def post_lines_directly(request: Request) -> Response:
        """`POST /v1/lines` without FastAPI's dependency solving. It runs the operation's dependencies in
        order (token, query, body) and reads headers as FastAPI does. Its route comes first; the
        operation stays in the OpenAPI document."""
        await authorized(request, None)
        refuse_others(request, frozenset())
        raw = await body(request)
        headers = request.headers
        return await post_lines(request, service(request), raw, headers.get("if-match"), headers.get("idempotency-key"))

    async def turn_directly(request: Request, conversation: str, pages: PageFilter, full: bool) -> Response:
        """`GET …/turn` for the hot path: the operation's dependencies in FastAPI's order (token,
        Chatrecord-Read-After; its query is read by `hot_routes.pages_of`), then the route's read."""
        await authorized(request, None)
        after = await read_after_header(request.headers.get(READ_AFTER))
        return await turn_read(service(request), conversation, pages, after, full)

    if hot:
        app.hot = HotRoutes(post_lines_directly, turn_directly)
    add_reads(v1, of_a_conversation)
    model_errors: dict[int | str, dict[str, Any]] = {
        409: ERRORS[409] | {"description": "Refused; a model that is not configured (model-not-set)"},
        502: ERRORS[502],
    }
    add_reproductions(v1, of_a_conversation, model_errors)
    app.include_router(v1)
    app.router.routes.insert(0, Route("/v1/lines", post_lines_directly, methods=["POST"], include_in_schema=False))
    app.openapi = lambda: app.openapi_schema or openapi.document(app)  # type: ignore[method-assign]  # FastAPI's way to serve a document of one's own
    install_ui(app, settings.token, throttle)

    @app.get("/v1/healthz", response_model=schemas.Health, responses={503: ERRORS[503]})
    def healthz(chatrecord: Service) -> Response:
        """Whether the store answers (no token needed)."""
        return json_response({"status": "ok", "position": chatrecord.health()})

    return app


def query_names(dependant: Any) -> set[str]:
    """Returns the query parameters a FastAPI operation (its `Dependant`) takes, its
    dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for dependency in dependant.dependencies:
        names |= query_names(dependency)
    return names


def app_from_env() -> FastAPI:
    """Returns the app on the environment's store and settings, for uvicorn's `--factory`. A worker of
    `serve --workers N` ends with the server process (`end_with_parent`)."""
    end_with_parent()
    no_auth = os.environ.get("CHATRECORD_API_NO_AUTH") == "1"
    return create_app(Chatrecord, HttpSettings.from_env(no_auth=no_auth))
