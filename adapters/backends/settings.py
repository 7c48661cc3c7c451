"""Which database the store uses, read from the environment.

- `CHATRECORD_DATABASE_URL=postgresql://user[:password]@host[:port]/dbname[?schema=S&...]` selects
  PostgreSQL; the password may be empty. Every parameter but `schema` goes to libpq
  (`postgres_env`). A silent server fails after 5 s. The schema must exist (`SCHEMA_NAME`).
- Otherwise a SQLite file, `CHATRECORD_DB` (default `./chatrecord.sqlite`). A writer waits up to
  `SQLITE_LOCK_TIMEOUT` seconds for another process's write.
- `store_env(memory=True)`: the library's in-memory store, for tests.
- `CHATRECORD_READ_DATABASE_URL`: hot standbys for reads (`read_store_env`).
- `CHATRECORD_READ_WAIT_MS` (default 1000): how long a read waits for a standby.
- `CHATRECORD_WRITE_RETRY_SECONDS`: how long a write with a lost connection retries. Default 30 with
  several hosts, else 0. See docs/scaling.md.
- `CHATRECORD_SNAPSHOT_INTERVAL` (default 100): versions between snapshots.

`store_problem` words the errors a setting or another process causes, through the backend."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from eventsourcing.persistence import InterfaceError, OperationalError, PersistenceError

from adapters.backends import (
    MEMORY_MODULE,
    POSTGRES_MODULE,
    SQLITE_MODULE,
    backend_named,
    backend_of_error,
    driver_errors,
    one_line,
)
from adapters.store.application import ConversationStore
from domain.errors import ChatrecordError

DEFAULT_DB = "./chatrecord.sqlite"
SQLITE_LOCK_TIMEOUT = 10
"""Seconds a SQLite writer waits for another process's write transaction to end."""
SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
"""A PostgreSQL schema name the store accepts: it goes into SQL as it is, unquoted."""


class BadSetting(ChatrecordError):
    """Raised when a CHATRECORD_* environment variable holds a value the store cannot use."""


class BadDatabaseURL(BadSetting):
    """Raised when CHATRECORD_DATABASE_URL is not a postgresql:// URL the store can use."""


class StoreUnusable(ChatrecordError):
    """Raised when the configured database cannot be opened or used. For example: not a SQLite file, a
    missing schema, a silent server, a file locked too long."""


def postgres_env(url: str, variable: str = "CHATRECORD_DATABASE_URL") -> dict[str, str]:
    """Returns the library's POSTGRES_* keys for a `postgresql://` URL.

    `POSTGRES_CONNINFO` is the whole URL but `schema`; every connection uses it. Raises
    BadDatabaseURL when the scheme, user, host or database is missing, a port is not 1–65535, a
    parameter is given twice, a parameter is unknown (naming a likely typo), or `?schema=` is not a
    SCHEMA_NAME. `variable` is the setting the messages name."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from adapters.backends.postgres import WRITE_LOCK_TIMEOUT  # here: a SQLite store needs no psycopg

    if not url.strip():
        raise BadDatabaseURL(
            f"{variable} is blank; give postgresql://user[:pw]@host[:port]/db, or unset it to use the SQLite file"
        )
    parts = urlsplit(url.strip())
    if parts.scheme not in ("postgresql", "postgres"):
        raise BadDatabaseURL(
            f"{variable} must start with postgresql://, not {parts.scheme + '://' if parts.scheme else repr(url[:40])}"
        )
    query = parse_qs(parts.query, keep_blank_values=True)
    repeated = sorted(name for name, values in query.items() if len(values) > 1)
    if repeated:
        raise BadDatabaseURL(f"{variable} names {', '.join(repeated)} more than once; give each once")
    kept = [item for item in parts.query.split("&") if item and unquote(item.partition("=")[0]) != "schema"]
    libpq_url = urlunsplit(parts._replace(query="&".join(kept)))
    try:
        params = {key: str(value) for key, value in conninfo_to_dict(libpq_url).items()}
    except ProgrammingError as error:
        raise BadDatabaseURL(_libpq_refusal(str(error), variable)) from None
    dbname, host, user = params.get("dbname"), params.get("host") or params.get("hostaddr"), params.get("user")
    if not (user and host and dbname):
        raise BadDatabaseURL(f"{variable} needs user, host and database: postgresql://user[:pw]@host[:port]/db")
    port = params.get("port") or "5432"
    for one in port.split(","):
        if one and not (one.isascii() and one.isdigit() and 1 <= int(one) <= 65535):
            raise BadDatabaseURL(f"{variable} has a bad port: {one!r} is not a number from 1 to 65535")
    env = {
        "PERSISTENCE_MODULE": POSTGRES_MODULE,
        "POSTGRES_DBNAME": dbname,
        "POSTGRES_HOST": host,
        "POSTGRES_PORT": port,
        "POSTGRES_USER": user,
        "POSTGRES_PASSWORD": params.get("password") or "",
        "POSTGRES_CONNINFO": make_conninfo(**params),
        # the library waits 30 s for a connection by default; a server that does not answer
        # should be one quick error line, not half a minute of silence
        "POSTGRES_CONNECT_TIMEOUT": "5",
        # a write waits this long for another's lock, then fails instead of holding the store
        "POSTGRES_LOCK_TIMEOUT": str(WRITE_LOCK_TIMEOUT),
    }
    schema = query.get("schema")
    if schema:
        if not SCHEMA_NAME.fullmatch(schema[-1]):
            raise BadDatabaseURL(
                f"{variable}: schema {schema[-1]!r} is not a schema name; use 1–63 of A-Za-z0-9_, not starting with a digit"
            )
        env["POSTGRES_SCHEMA"] = schema[-1]
    return env


def _libpq_refusal(reason: str, variable: str = "CHATRECORD_DATABASE_URL") -> str:
    """Returns the one line for a URL libpq refuses, naming an unknown parameter and its likely typo."""
    import difflib

    from psycopg import pq

    found = re.search(r'invalid URI query parameter: "([^"]*)"', reason)
    if found is None:
        return f"{variable} cannot be read: {reason}"
    name = found.group(1)
    known = ["schema", *(option.keyword.decode() for option in pq.Conninfo.get_defaults())]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return (
        f"{variable}: unknown parameter {name!r}{hint}; give schema or a connection parameter "
        "libpq knows (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PARAMKEYWORDS)"
    )


def sqlite_env(path: str | os.PathLike[str]) -> dict[str, str]:
    """Returns the library's keys for a SQLite file at `path`; writers wait up to SQLITE_LOCK_TIMEOUT
    seconds."""
    return {
        "PERSISTENCE_MODULE": SQLITE_MODULE,
        "SQLITE_DBNAME": os.fspath(path),
        "SQLITE_LOCK_TIMEOUT": str(SQLITE_LOCK_TIMEOUT),
    }


def memory_env() -> dict[str, str]:
    """Returns the library's keys for the in-memory store."""
    return {"PERSISTENCE_MODULE": MEMORY_MODULE}


def store_env(environ: Mapping[str, str] | None = None, *, memory: bool = False) -> dict[str, str]:
    """Returns the store's env for `environ` (default: os.environ). PostgreSQL when
    CHATRECORD_DATABASE_URL is set, else the SQLite file CHATRECORD_DB; memory if `memory`. Raises
    BadDatabaseURL for a URL it cannot use. Raises BadSetting for a snapshot interval that is not a
    whole number >= 1."""
    environ = os.environ if environ is None else environ
    if memory:
        env = memory_env()
    elif environ.get("CHATRECORD_DATABASE_URL"):
        env = postgres_env(environ["CHATRECORD_DATABASE_URL"])
    else:
        env = sqlite_env(environ.get("CHATRECORD_DB") or DEFAULT_DB)
    if environ.get("CHATRECORD_SNAPSHOT_INTERVAL"):
        env["SNAPSHOT_INTERVAL"] = snapshot_interval(environ["CHATRECORD_SNAPSHOT_INTERVAL"])
    if env.get("PERSISTENCE_MODULE") == POSTGRES_MODULE:
        given = environ.get(WRITE_RETRY)
        several = "," in env.get("POSTGRES_HOST", "")
        if given or several:  # one host and no setting: the library's few tries only, as before
            env["WRITE_RETRY_SECONDS"] = whole_number(WRITE_RETRY, given, 0) if given else str(DEFAULT_WRITE_RETRY_SECONDS)
    return env


READ_URL = "CHATRECORD_READ_DATABASE_URL"
"""The standbys' URL: what only reads is read there (`read_store_env`)."""
READ_WAIT = "CHATRECORD_READ_WAIT_MS"
"""How long a read given a write's position waits for a standby to replay it (`read_wait`)."""
DEFAULT_READ_WAIT_MS = 1000
WRITE_RETRY = "CHATRECORD_WRITE_RETRY_SECONDS"
"""How long a write whose connection was lost tries again (`ConversationStore.handle`)."""
DEFAULT_WRITE_RETRY_SECONDS = 30
"""The default of WRITE_RETRY where CHATRECORD_DATABASE_URL names several hosts (a failover
can move the primary); 0 (no retry past the library's own few) for one host."""


def read_store_env(environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """Returns the reading store's env on CHATRECORD_READ_DATABASE_URL; None when unset or blank. It
    never creates a table. Its schema is CHATRECORD_DATABASE_URL's. Raises BadSetting when
    CHATRECORD_DATABASE_URL is not set too. Raises BadDatabaseURL for a bad URL, another schema, or
    `load_balance_hosts` other than `disable`."""
    environ = os.environ if environ is None else environ
    url = environ.get(READ_URL) or ""
    if not url.strip():
        return None
    if not environ.get("CHATRECORD_DATABASE_URL"):
        raise BadSetting(
            f"{READ_URL} is set, CHATRECORD_DATABASE_URL is not: standbys follow a PostgreSQL "
            "primary, which CHATRECORD_DATABASE_URL names; set it, or unset "
            f"{READ_URL}"
        )
    primary = store_env(environ)
    env = postgres_env(url, READ_URL)
    from psycopg.conninfo import conninfo_to_dict

    balance = str(conninfo_to_dict(env["POSTGRES_CONNINFO"]).get("load_balance_hosts") or "disable")
    if balance != "disable":
        raise BadDatabaseURL(
            f"{READ_URL}: load_balance_hosts={balance} would spread one process's "
            "connections over several standbys, each at its own position; leave it out "
            "(libpq then connects to the first host that answers)"
        )
    schema = primary.get("POSTGRES_SCHEMA") or "public"
    if env.setdefault("POSTGRES_SCHEMA", schema) != schema:
        raise BadDatabaseURL(
            f"{READ_URL} names schema {env['POSTGRES_SCHEMA']!r}, CHATRECORD_DATABASE_URL "
            f"{schema!r}; the standbys hold the primary's schema, so name the same one or leave "
            "?schema= out"
        )
    env["CREATE_TABLE"] = "n"
    for key in ("SNAPSHOT_INTERVAL",):
        if key in primary:
            env[key] = primary[key]
    return env


def read_wait(environ: Mapping[str, str] | None = None) -> float:
    """Returns CHATRECORD_READ_WAIT_MS (default 1000) in seconds. A read waits that long for a standby
    before the primary answers. Raises BadSetting unless it is a whole number >= 0."""
    environ = os.environ if environ is None else environ
    given = environ.get(READ_WAIT)
    return int(whole_number(READ_WAIT, given, 0)) / 1000 if given else DEFAULT_READ_WAIT_MS / 1000


def whole_number(variable: str, value: str, least: int) -> str:
    """Returns `value` as a whole number's digits; raises BadSetting naming `variable` unless it is
    one >= `least`."""
    text = value.strip()
    if not (text.isascii() and text.isdigit() and int(text) >= least):
        raise BadSetting(f"{variable} must be a whole number >= {least}, not {value!r}")
    return str(int(text))


def snapshot_interval(value: str) -> str:
    """Returns CHATRECORD_SNAPSHOT_INTERVAL's `value` as the library's SNAPSHOT_INTERVAL.

    Raises BadSetting unless it is a whole number >= 1.
    """
    text = value.strip()
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise BadSetting(f"CHATRECORD_SNAPSHOT_INTERVAL must be a whole number >= 1, not {value!r}")
    return str(int(text))


def describe_backend(env: Mapping[str, str] | ConversationStore | None = None) -> str:
    """Returns one line naming the backend of a store or env, never the password. The default env is
    what os.environ picks."""
    if env is None:
        env = store_env()
    if isinstance(env, ConversationStore):
        env = {key: env.env.get(key) or "" for key in _DESCRIBED}
    return backend_named(env.get("PERSISTENCE_MODULE")).describe(env)


_DESCRIBED = (
    "PERSISTENCE_MODULE",
    "SQLITE_DBNAME",
    "POSTGRES_USER",
    "POSTGRES_HOST",
    "POSTGRES_PORT",
    "POSTGRES_DBNAME",
    "POSTGRES_SCHEMA",
)


def _driver_error(error: BaseException) -> BaseException | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, driver_errors()):
            return seen
        seen = seen.__cause__
    return None


def server_reason(env: Mapping[str, str]) -> str | None:
    """Returns why the server of `env` refuses a connection, in one line; None when it connects or
    there is no server."""
    return backend_named(env.get("PERSISTENCE_MODULE")).server_reason(env)


def store_problem(error: BaseException, env: Mapping[str, str] | ConversationStore | None = None) -> StoreUnusable | None:
    """Returns the one-line StoreUnusable for a database error a setting or another process caused.
    Returns None for any other error, which is a bug. `env` defaults to what os.environ picks."""
    if isinstance(env, ConversationStore):
        env = env.env
    if env is None:
        try:
            env = store_env()
        except BadSetting:
            env = {}
    backend = describe_backend(env)
    driver = _driver_error(error)
    text = one_line(str(driver or error))
    text = text or type(error).__name__
    if driver is not None:
        message = backend_of_error(driver).problem(driver, env, text, backend)
        return StoreUnusable(message) if message is not None else None
    if isinstance(error, (OperationalError, InterfaceError)):  # e.g. no connection within the pool's timeout
        return StoreUnusable(f"the store ({backend}) cannot be used: {text}")
    return None


@contextmanager
def store_errors(env: Mapping[str, str] | ConversationStore | None = None) -> Iterator[None]:
    """Raises StoreUnusable for a database error a setting or another process caused. Any other
    database error is a bug and goes through. `env` as for `store_problem`."""
    try:
        yield
    except Exception as error:  # not the SystemExit every command ends with: naming the drivers' errors imports them
        if not isinstance(error, (PersistenceError, *driver_errors())):
            raise
        problem = store_problem(error, env)
        if problem is None:
            raise
        raise problem from error
