"""`chatrecord serve`."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.api import Chatrecord
from adapters.cli.app import app, say, warn


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8765,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Server processes (each keeps its own wrong-token waits and sign-outs; on SQLite they share one writer).",
        ),
    ] = 1,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="No bearer token (loopback hosts only).")] = False,
    access_log: Annotated[
        bool, typer.Option("--access-log/--no-access-log", help="Log a line for each request (default: not).")
    ] = False,
    trusted_proxies: Annotated[
        str | None,
        typer.Option(
            "--trusted-proxies",
            envvar="CHATRECORD_TRUSTED_PROXIES",
            help="Addresses of the reverse proxies whose X-Forwarded-For/-Proto are believed, comma-separated (default: none).",
        ),
    ] = None,
) -> None:
    """Serves the HTTP API the chat calls (/v1/lines, /v1/conversations/ID/turn, …).

    Requires the bearer token in CHATRECORD_API_TOKEN (at least 16 characters) unless
    --no-auth is given on a loopback host. Bodies over CHATRECORD_MAX_BODY_BYTES (default 8
    MiB) are refused, and so are bodies that do not arrive within
    CHATRECORD_BODY_TIMEOUT_SECONDS (default 30). The OpenAPI document is served at
    /openapi.json. After a wrong token its client waits 1 s, twice as long after each
    further one (CHATRECORD_WRONG_TOKEN_WAIT_SECONDS sets the first wait; 0: none); the
    client is the connection's address, or the one a --trusted-proxies proxy forwards.

    It runs one process; --workers N runs N, each with its own wrong-token waits and its own
    signed-out sessions (on SQLite they take turns at the file's one writer, so more help little).
    Requests are not logged unless --access-log is given.

    Example:

        chatrecord serve --port 8765
    """
    from adapters.http.server import listenable, run, start, trusted

    proxies = trusted(trusted_proxies)
    backend = start(host, no_auth)
    listenable(host, port)
    say(f"chatrecord serve: {backend} on http://{host}:{port} ({'no authentication' if no_auth else 'bearer token required'})")
    warning = Chatrecord.upkeep_warning()
    if warning is not None:  # once, before the workers start
        warn(f"warning: {warning}")
    run(host, port, workers, access_log, proxies)
