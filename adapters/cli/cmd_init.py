"""`chatrecord init`."""

from __future__ import annotations

from adapters.api import Chatrecord
from adapters.cli.app import app, say, warn


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
    created, backend = Chatrecord.init_store()
    say(f"{'created the store' if created else 'the store exists already'}: {backend}")
    warning = Chatrecord.upkeep_warning()
    if warning is not None:
        warn(f"warning: {warning}")
