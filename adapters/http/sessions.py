"""The page's sign-in sessions and the wait after wrong tokens.

A session's cookie holds its issue time (Unix seconds), 16 random bytes (hex) and their HMAC-SHA256 under
a key derived from the API token. So every worker accepts it, a changed token ends all sessions, and the
cookie never holds the token. A session lasts SESSION_SECONDS (8 hours). A sign-out deletes the cookie
and revokes the session in that server process.

After a wrong token the client (its address) waits FIRST_WAIT seconds, or `serve`'s setting. Each further
one doubles the wait, up to LONGEST_WAIT. An attempt while waiting gets 429, the token not compared. One
throttle counts the form's and the bearer tokens. A right token clears the count; a client quiet for
FORGET_SECONDS past its wait starts afresh. At most CLIENTS clients are counted."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time

SESSION_SECONDS = 8 * 3600
FIRST_WAIT = 1.0
LONGEST_WAIT = 300.0
FORGET_SECONDS = 900.0
CLIENTS = 10_000
_VERSION = "v2"


def clock() -> float:
    """The throttle's clock: seconds, monotonic."""
    return time.monotonic()


def _key(token: str) -> bytes:
    return hmac.new(token.encode(), b"chatrecord ui session key v2", hashlib.sha256).digest()


def _mac(token: str, issued: int, session: str) -> str:
    return hmac.new(_key(token), f"{_VERSION}.{issued}.{session}".encode(), hashlib.sha256).hexdigest()


def new_session(token: str, now: float | None = None) -> str:
    """Returns the cookie value of a new session under `token`, issued `now` (default: now)."""
    issued = int(time.time() if now is None else now)
    session = secrets.token_hex(16)
    return f"{_VERSION}.{issued}.{session}.{_mac(token, issued, session)}"


def session_id(cookie: str) -> str:
    """Returns the session's own random part of a cookie value ('' for a value of no session)."""
    parts = cookie.split(".")
    return parts[2] if len(parts) == 4 else ""


class Sessions:
    """The sessions of one server process under `token`: which cookies are live, which were signed out here."""

    def __init__(self, token: str) -> None:
        self.token = token
        self._revoked: dict[str, int] = {}  # session id -> when it would have expired anyway

    def new(self) -> str:
        """Returns the cookie value of a new session, issued now."""
        return new_session(self.token)

    def valid(self, cookie: str, now: float | None = None) -> bool:
        """Whether `cookie` is a session signed under the token, not expired, not signed out."""
        now = time.time() if now is None else now
        parts = cookie.split(".")
        if len(parts) != 4 or parts[0] != _VERSION or not parts[1].isdigit() or len(parts[1]) > 12:
            return False
        issued, session, mac = int(parts[1]), parts[2], parts[3]
        if not hmac.compare_digest(mac.encode(), _mac(self.token, issued, session).encode()):
            return False
        return issued <= now + 60 and now < issued + SESSION_SECONDS and session not in self._revoked

    def revoke(self, cookie: str, now: float | None = None) -> None:
        """Ends the session of `cookie` in this process (a value of no live session: nothing)."""
        now = time.time() if now is None else now
        if not self.valid(cookie, now):
            return
        self._revoked = {s: end for s, end in self._revoked.items() if end > now}
        self._revoked[session_id(cookie)] = int(cookie.split(".")[1]) + SESSION_SECONDS


class Throttle:
    """Wrong tokens per client and each one's wait. `first`: the wait after the first wrong token (0: never
    wait)."""

    def __init__(self, first: float = FIRST_WAIT) -> None:
        self.first = first
        self._clients: dict[str, tuple[int, float]] = {}  # client -> (wrong tokens in a row, waits until)
        self._lock = threading.Lock()  # the sync handlers run in threads

    def wait(self, client: str, now: float | None = None) -> float:
        """Returns how many seconds `client` must still wait before its next attempt (0: none)."""
        if not self._clients:  # the usual case: no wrong token lately, nothing to look up
            return 0.0
        now = clock() if now is None else now
        _, until = self._clients.get(client, (0, 0.0))
        return max(0.0, until - now)

    def failed(self, client: str, now: float | None = None) -> float:
        """Counts a wrong token of `client`; returns the wait it now has."""
        if self.first <= 0:
            return 0.0
        now = clock() if now is None else now
        with self._lock:
            wrong, until = self._clients.pop(client, (0, 0.0))
            if now > until + FORGET_SECONDS:
                wrong = 0
            wait: float = min(self.first * 2.0 ** min(wrong, 30), LONGEST_WAIT)
            if len(self._clients) >= CLIENTS:
                self._clients = {c: (n, end) for c, (n, end) in self._clients.items() if now <= end + FORGET_SECONDS}
                while len(self._clients) >= CLIENTS:  # the longest-known client is forgotten first
                    del self._clients[next(iter(self._clients))]
            self._clients[client] = (wrong + 1, now + wait)
            return wait

    def passed(self, client: str) -> None:
        """A right token from `client`: its count starts again."""
        if client in self._clients:
            with self._lock:
                self._clients.pop(client, None)
