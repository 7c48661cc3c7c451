"""The chat's two hot requests answered before FastAPI's routing and middleware (`ChatrecordApp`):
`POST /v1/lines` and `GET /v1/conversations/{id}/turn`, the path the chat waits on (issue 37).

Both stay declared in FastAPI (the OpenAPI document is the same), and what answers them is the same
code: the token (`authorized`), the body and its limit, the headers, the store call and the response
(`post_lines_directly`, `reads.turn_read`). What the hot path leaves out is only the framework's work
per request: FastAPI's middleware and router, the route's match, its dependency solving. Errors go
through the app's own exception handlers, in the middleware FastAPI builds around them:
Starlette's `ServerErrorMiddleware` (the 500 problem, the exception raised on for the server's log),
the app's own middleware (`BodyDeadline`: the 408 of a slow body) and `ExceptionMiddleware` (every
problem), built once around the two endpoints.

A request the hot path does not read exactly as FastAPI would goes to FastAPI unchanged: another
method (HEAD, PUT, …), a turn read whose query string holds anything but `visible_page` and
`hidden_page` as plain numbers and `messages=full` once (FastAPI answers the 400 of a bad or unknown
parameter), a path the route's pattern does not match, an app mounted under a root path, FastAPI's
own OpenTelemetry instrumentation switched on (its spans come from its stack), or a body limit of
FastAPI's own (`max_body_size`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from adapters.http.conversation_paths import named
from projections.page_line import PageFilter

LINES = "/v1/lines"
TURN = "/v1/conversations/{conversation:path}/turn"
ENDPOINT = "chatrecord.endpoint"
"""The scope key the hot path hands its endpoint in to the middleware built around it."""
TURN_PATH, _, TURN_CONVERTORS = compile_path(TURN)
"""The turn read's path as the router matches it (the route's own pattern; no route before it takes a
path ending in /turn: `tests/http/test_hot_routes.py`)."""
NO_PAGES = PageFilter(frozenset(), frozenset())

Lines = Callable[[Request], Awaitable[Response]]
Turn = Callable[[Request, str, PageFilter, bool], Awaitable[Response]]


@dataclass
class HotRoutes:
    """The two endpoints: `lines(request)`, `turn(request, conversation, pages, full)`."""

    lines: Lines
    turn: Turn
    stack: ASGIApp | None = None


class ChatrecordApp(FastAPI):
    """FastAPI, but for the two hot requests (`hot`), which it answers itself; see the module's doc."""

    hot: HotRoutes | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self.hot
        if hot is not None and scope["type"] == "http" and not scope.get("root_path") and not self.root_path:
            endpoint = self.hot_endpoint(hot, scope)
            if endpoint is not None and getattr(self, "max_body_size", None) is None and not self.instrumented():
                if hot.stack is None:
                    hot.stack = self.stack_around(dispatch)
                scope["app"] = self
                scope[ENDPOINT] = endpoint
                await hot.stack(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def instrumented(self) -> bool:
        """Whether FastAPI's own OpenTelemetry instrumentation is on (FastAPI 0.16x; none before)."""
        telemetry = getattr(self, "_native_telemetry", None)
        return telemetry is not None and bool(telemetry.enabled())

    def hot_endpoint(self, hot: HotRoutes, scope: Scope) -> Lines | None:
        """Returns what answers `scope` on the hot path, or None for FastAPI to answer it."""
        method, path = scope["method"], scope["path"]
        if method == "POST":
            # the router's first route is `post_lines_directly` at /v1/lines, whatever the query
            return hot.lines if path == LINES else None
        if method != "GET" or not path.endswith("/turn"):
            return None
        found = named(scope)  # the id as the routes find it: in the raw path, its %2F its own
        if found is not None:
            if found[2] != "turn":
                return None
            conversation = found[1]
        else:
            match = TURN_PATH.match(path)
            if match is None:
                return None
            conversation = TURN_CONVERTORS["conversation"].convert(match["conversation"])
        query = pages_of(scope["query_string"])
        if not conversation or query is None:
            return None
        pages, full = query
        turn = hot.turn
        return lambda request: turn(request, conversation, pages, full)

    def stack_around(self, app: ASGIApp) -> ASGIApp:
        """Returns `app` inside the error handling and middleware FastAPI builds around its router
        (`FastAPI.build_middleware_stack`): ServerErrorMiddleware with the app's 500 handler, the
        app's own middleware, ExceptionMiddleware with its other handlers."""
        error_handler, handlers = None, {}
        for key, value in self.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
            else:
                handlers[key] = value
        app = ExceptionMiddleware(app, handlers=handlers, debug=self.debug)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return ServerErrorMiddleware(app, handler=error_handler, debug=self.debug)


async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
    """Runs the hot path's endpoint (`scope[ENDPOINT]`) and sends its response."""
    response = await scope[ENDPOINT](Request(scope, receive, send))
    await response(scope, receive, send)


def pages_of(query_string: bytes) -> tuple[PageFilter, bool] | None:
    """Returns the turn read's page filter and whether `messages=full` is asked, from a query string of
    only `visible_page` and `hidden_page` (each a plain number: digits, no leading zero) and
    `messages=full` at most once; None for any other (FastAPI reads it, and answers its 400)."""
    if not query_string:
        return NO_PAGES, False
    pages: dict[str, list[int]] = {"visible_page": [], "hidden_page": []}
    full = False
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name in pages and value.isascii() and value.isdigit() and len(value) <= 18 and (value == "0" or value[0] != "0"):
            pages[name].append(int(value))
        elif name == "messages" and value == "full" and not full:
            full = True
        else:
            return None
    return PageFilter(frozenset(pages["visible_page"]), frozenset(pages["hidden_page"])), full
