"""The bearer token of /v1 and /ui, and the wait after wrong ones (`sessions.Throttle`). `Authorization:
Bearer <token>` is compared in constant time. A wrong token makes its client wait: the connection's
address, or the one a trusted proxy forwards. Meanwhile its requests get 429 with Retry-After, the token
not compared. A right token costs one look-up."""

from __future__ import annotations

import hmac
import math

from fastapi import Request

from adapters.http.problems import Problem
from adapters.http.sessions import Throttle

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="chatrecord"'}


def client_of(request: Request) -> str:
    """Returns the address the throttle counts `request` under."""
    return request.client.host if request.client else ""


def waiting(throttle: Throttle, client: str) -> Problem | None:
    """Returns the 429 problem of a client that must still wait (None: it need not)."""
    wait = throttle.wait(client)
    if wait <= 0:
        return None
    seconds = math.ceil(wait)
    return Problem(
        429,
        "too-many-wrong-tokens",
        f"too many wrong tokens from this address; try again in {seconds} s",
        headers={"Retry-After": str(seconds)} | CHALLENGE,
    )


def bearer_of(request: Request) -> bytes | None:
    """Returns the token of `Authorization: Bearer <token>` exactly as sent, or None when there is none."""
    scheme, space, token = (request.headers.get("authorization") or "").partition(" ")
    return token.encode() if scheme.lower() == "bearer" and space else None


def check_bearer(request: Request, token: str, throttle: Throttle) -> bool:
    """Returns whether the request carries the right bearer token. Raises the 429 problem while
    its client waits (nothing compared); a wrong token is counted, a missing one is not."""
    problem = waiting(throttle, client_of(request))
    if problem is not None:
        raise problem
    given = bearer_of(request)
    if given is None:
        return False
    if hmac.compare_digest(given, token.encode()):
        throttle.passed(client_of(request))
        return True
    throttle.failed(client_of(request))
    return False
