"""A request body that does not arrive in time is answered 408 and its connection closed. `BodyDeadline`
gives each body CHATRECORD_BODY_TIMEOUT_SECONDS (default 30) from the headers' arrival. A read past that
raises BodyTimeout, answered 408 with `Connection: close`. Once the body is whole, reads wait as before."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapters.http.problems import Problem

DEFAULT_BODY_TIMEOUT_SECONDS = 30.0


class BodyTimeout(Exception):
    """Raised by a read of a request's body that has not arrived within its time."""


class BodyDeadline:
    """ASGI middleware: a request's body must arrive within `seconds` of its headers."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        whole = False

        async def timed() -> Message:
            nonlocal whole
            if whole:
                return await receive()
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.0)):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(f"the request's body did not arrive within {self.seconds:g} s") from None
            whole = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed, send)


def install_body_deadline(app: FastAPI, seconds: float) -> None:
    """Gives every request's body `seconds` to arrive, and answers one that does not with 408."""
    app.add_middleware(BodyDeadline, seconds=seconds)

    @app.exception_handler(BodyTimeout)
    async def too_slow(request: Request, error: BodyTimeout) -> Response:
        return Problem(408, "body-timeout", f"{error}; send it again", headers={"Connection": "close"}).response()
