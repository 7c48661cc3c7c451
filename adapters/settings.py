"""Which database the store uses, read from the environment.

- `CHATRECORD_DATABASE_URL=postgresql://user[:password]@host[:port]/dbname[?schema=S]` selects
  PostgreSQL (psycopg 3); an empty or missing password is allowed (trust auth).
  A server that does not answer fails after 5 s (`POSTGRES_CONNECT_TIMEOUT`).
- Otherwise the embedded default: a SQLite file, `CHATRECORD_DB` (default `./chatrecord.sqlite`).
  Its store tables keep the library's names (`stored_events`, `stored_snapshots`); the
  materialised projections live in the same file under their own table names.
- `open_store(memory=True)`: the library's in-memory store (`eventsourcing.popo`), for tests.

`CHATRECORD_SNAPSHOT_INTERVAL` (default 100) sets how many versions lie between snapshots.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import parse_qs, unquote, urlsplit

from adapters.application import ConversationStore
from domain.errors import ChatrecordError

DEFAULT_DB = "./chatrecord.sqlite"


class BadDatabaseURL(ChatrecordError):
    """Raised when CHATRECORD_DATABASE_URL is not a postgresql:// URL the store can use."""


def postgres_env(url: str) -> dict[str, str]:
    """Returns the library's POSTGRES_* keys for a `postgresql://` URL.

    Raises BadDatabaseURL when the scheme, user, host or database name is missing.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise BadDatabaseURL(
            f"CHATRECORD_DATABASE_URL must start with postgresql://, not {parts.scheme or 'nothing'}://"
        )
    dbname = unquote(parts.path.lstrip("/"))
    if not (parts.username and parts.hostname and dbname):
        raise BadDatabaseURL(
            "CHATRECORD_DATABASE_URL needs user, host and database: postgresql://user[:pw]@host[:port]/db"
        )
    try:
        port = parts.port or 5432
    except ValueError as e:
        raise BadDatabaseURL(f"CHATRECORD_DATABASE_URL has a bad port: {e}") from None
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": dbname,
        "POSTGRES_HOST": parts.hostname,
        "POSTGRES_PORT": str(port),
        "POSTGRES_USER": unquote(parts.username),
        "POSTGRES_PASSWORD": unquote(parts.password or ""),
        # the library waits 30 s for a connection by default; a server that does not answer
        # should be one quick error line, not half a minute of silence
        "POSTGRES_CONNECT_TIMEOUT": "5",
    }
    schema = parse_qs(parts.query).get("schema")
    if schema:
        env["POSTGRES_SCHEMA"] = schema[-1]
    return env


def sqlite_env(path: str | os.PathLike[str]) -> dict[str, str]:
    """Returns the library's keys for a SQLite file at `path`."""
    return {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": os.fspath(path)}


def memory_env() -> dict[str, str]:
    """Returns the library's keys for the in-memory store."""
    return {"PERSISTENCE_MODULE": "eventsourcing.popo"}


def store_env(environ: Mapping[str, str] | None = None, *, memory: bool = False) -> dict[str, str]:
    """Returns the store's env for `environ` (default: os.environ): PostgreSQL when
    CHATRECORD_DATABASE_URL is set, else the SQLite file CHATRECORD_DB; in memory if `memory`.

    Raises BadDatabaseURL for a URL it cannot use.
    """
    environ = os.environ if environ is None else environ
    if memory:
        env = memory_env()
    elif environ.get("CHATRECORD_DATABASE_URL"):
        env = postgres_env(environ["CHATRECORD_DATABASE_URL"])
    else:
        env = sqlite_env(environ.get("CHATRECORD_DB") or DEFAULT_DB)
    if environ.get("CHATRECORD_SNAPSHOT_INTERVAL"):
        env["SNAPSHOT_INTERVAL"] = environ["CHATRECORD_SNAPSHOT_INTERVAL"]
    return env


def open_store(
    environ: Mapping[str, str] | None = None, *, memory: bool = False, **overrides: str
) -> ConversationStore:
    """Returns a ConversationStore on the backend `store_env(environ, memory=memory)` picks;
    `overrides` are library env keys (e.g. SNAPSHOT_INTERVAL="10") that win over it.

    Raises BadDatabaseURL for a bad URL; the library's errors when the database cannot be opened.
    """
    return ConversationStore(env={**store_env(environ, memory=memory), **overrides})


def describe_backend(env: Mapping[str, str] | ConversationStore | None = None) -> str:
    """Returns one line naming the backend of a store or env (default: what os.environ picks),
    never the password."""
    if env is None:
        env = store_env()
    if isinstance(env, ConversationStore):
        env = {key: env.env.get(key) or "" for key in _DESCRIBED}
    module = env.get("PERSISTENCE_MODULE", "eventsourcing.popo")
    if module == "eventsourcing.sqlite":
        return f"SQLite file {env.get('SQLITE_DBNAME')}"
    if module == "eventsourcing.postgres":
        schema = env.get("POSTGRES_SCHEMA") or "public"
        return (
            f"PostgreSQL {env.get('POSTGRES_USER')}@{env.get('POSTGRES_HOST')}:"
            f"{env.get('POSTGRES_PORT') or 5432}/{env.get('POSTGRES_DBNAME')} (schema {schema})"
        )
    return "in memory (nothing is kept after the process ends)"


_DESCRIBED = (
    "PERSISTENCE_MODULE",
    "SQLITE_DBNAME",
    "POSTGRES_USER",
    "POSTGRES_HOST",
    "POSTGRES_PORT",
    "POSTGRES_DBNAME",
    "POSTGRES_SCHEMA",
)
