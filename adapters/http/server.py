"""`chatrecord serve`: checks the settings and the store once, then runs uvicorn. It refuses to start
without CHATRECORD_API_TOKEN unless `--no-auth` is given, and `--no-auth` only on a loopback host. The
store's tables (and the idempotency table) are made here, by one process, before the workers start."""

from __future__ import annotations

import ipaddress
import os
import socket

import uvicorn

from adapters.api import BadSetting, Chatrecord
from adapters.http.app import HttpSettings
from adapters.processes import PARENT


def loopback(host: str) -> bool:
    """Returns True when `host` is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check(host: str, no_auth: bool) -> HttpSettings:
    """Returns the settings, or raises BadSetting when the service must not start."""
    settings = HttpSettings.from_env(no_auth=no_auth)
    if no_auth and not loopback(host):
        raise BadSetting(
            f"--no-auth listens on a loopback host only (127.0.0.1, ::1, localhost), not {host}; "
            "set CHATRECORD_API_TOKEN to listen on other hosts"
        )
    if settings.token is None and not no_auth:
        raise BadSetting(
            "CHATRECORD_API_TOKEN is not set; set it to the bearer token the chat sends, or give --no-auth on a loopback host"
        )
    return settings


def prepare() -> str:
    """Opens the configured store once, making its and the idempotency keys' tables; returns its
    description."""
    return Chatrecord.prepare_service()


def start(host: str, no_auth: bool) -> str:
    """Checks the settings (see `check`), prepares the store, marks --no-auth for the workers,
    and returns the store's description. Raises BadSetting, or the store's error."""
    check(host, no_auth)
    backend = prepare()
    if no_auth:
        os.environ["CHATRECORD_API_NO_AUTH"] = "1"
    else:
        os.environ.pop("CHATRECORD_API_NO_AUTH", None)
    return backend


def trusted(proxies: str | None) -> list[str]:
    """Returns the proxy addresses (or networks) of `--trusted-proxies`, comma-separated; raises
    BadSetting for one that is neither. `*` trusts every peer."""
    found = [p.strip() for p in (proxies or "").split(",") if p.strip()]
    for proxy in found:
        try:
            ipaddress.ip_network(proxy, strict=False) if proxy != "*" else None
        except ValueError:
            raise BadSetting(f"--trusted-proxies: {proxy!r} is not an IP address or network (e.g. 10.0.0.0/8)") from None
    return found


def run(host: str, port: int, workers: int, access_log: bool = False, proxies: list[str] | None = None) -> None:
    """Runs uvicorn with `workers` processes on `app_from_env`'s app. With several, each ends with the
    server process (`end_with_parent`). X-Forwarded-For and -Proto are read only from `proxies` (none:
    from no peer)."""
    if workers > 1:
        os.environ[PARENT] = str(os.getpid())
    uvicorn.run(
        "adapters.http.app:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        access_log=access_log,
        log_level="info",
        proxy_headers=bool(proxies),
        forwarded_allow_ips=list(proxies) if proxies else None,
    )


def listenable(host: str, port: int) -> None:
    """Raises BadSetting (one line) when nothing can listen on `host`:`port`: an unresolvable host, a taken
    port, or a port below 1024 without the right."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as error:
        raise BadSetting(f"--host {host}: not an address this machine can listen on ({error})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as error:
            raise BadSetting(
                f"cannot listen on {host}:{port} ({error.strerror or error}); give another --port, or end what holds it"
            ) from None
