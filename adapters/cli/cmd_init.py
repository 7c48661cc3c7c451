"""`chatrecord init`."""

from __future__ import annotations

from pathlib import Path

from adapters.cli.app import app, opened, say
from adapters.store.settings import (
    SQLITE_MODULES,
    describe_backend,
    store_env,
)


@app.command()
def init() -> None:
    """Creates the configured store's tables, if they are missing, and exits.

    Every command creates the tables it needs when they are missing (one process at a time,
    under a lock), so this is optional: it lets a deployment create them up front, with a role
    allowed to, before the chat's processes (or a read-only replica) use the store. Running it
    again changes nothing.

    Example:

        chatrecord init
    """
    backend = store_env()
    fresh = backend.get("PERSISTENCE_MODULE") in SQLITE_MODULES and not Path(backend["SQLITE_DBNAME"]).exists()
    with opened() as chatrecord:
        chatrecord.read_models  # noqa: B018 - the views' pointer and first generation
        fresh = fresh or bool(getattr(chatrecord.store.factory, "created", None))
        say(f"{'created the store' if fresh else 'the store exists already'}: {describe_backend(chatrecord.store)}")
