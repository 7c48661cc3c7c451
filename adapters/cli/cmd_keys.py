"""`chatrecord keys status|wrap|rotate|unwrap`: the master key's state and its explicit changes, registered
after the other commands."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from adapters.api import NEW_MASTER_KEY_VARIABLE, Chatrecord, KeyChange, KeyState, open_store
from adapters.cli.app import print_json, say
from adapters.cli.stdio import require_store

keys_app = typer.Typer(
    help="The master key: show the store's key state, bind it to a master key, rotate or remove it.\n\n"
    "Reading and writing commands never change the key state; these do, each in one transaction.\n\n"
    "Example:\n\n    chatrecord keys status",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


@contextmanager
def opened(reading: bool = False) -> Iterator[Chatrecord]:
    """Yields the service layer on the configured store and closes it after. It opens even where
    CHATRECORD_MASTER_KEY is set and data keys are unwrapped, which other commands refuse. `reading`: as
    `app.opened`'s."""
    chatrecord = Chatrecord(open_store(reading=reading, MASTER_KEY_UNBOUND="allow"))
    try:
        yield chatrecord
    finally:
        chatrecord.close()


JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _counts(state: KeyState) -> str:
    return f"{state.wrapped} wrapped, {state.unwrapped} unwrapped, {state.erased} erased"


def _report(change: KeyChange, store: str, as_json: bool, line: str) -> None:
    if as_json:
        print_json({**change.to_json(), "store": store})
    else:
        say(line)
        if change.rekeyed:
            say(
                f"{store}: recomputed {change.rekeyed} link{'' if change.rekeyed == 1 else 's'} of the hash chain under the new key"
            )


@keys_app.command()
def status(as_json: JsonOption = False) -> None:
    """Prints whether a master key protects the store and how many data keys it keeps wrapped,
    unwrapped and erased. Changes nothing.

    Example:

        chatrecord keys status --json
    """
    require_store()
    with opened(reading=True) as chatrecord:
        state = chatrecord.key_state()
        store = chatrecord.description()
    if as_json:
        print_json({**state.to_json(), "store": store})
    else:
        protection = "a master key protects it" if state.protected else "no master key"
        say(f"{store}: {protection}; data keys: {_counts(state)}")


@keys_app.command()
def wrap(as_json: JsonOption = False) -> None:
    """Binds the store to CHATRECORD_MASTER_KEY: wraps every data key it keeps unwrapped.

    All keys and the store's check value are written in one transaction (a crash leaves the
    store as it was), the hash chain re-keyed in it (every link checked under the old key first). From then on every command on the store needs that key. Running it again
    changes nothing.

    Example (CHATRECORD_MASTER_KEY set to the key):

        chatrecord keys wrap
    """
    require_store()
    with opened() as chatrecord:
        change = chatrecord.wrap_keys()
        store = chatrecord.description()
    if not change.changed:
        line = f"{store}: every data key is wrapped by CHATRECORD_MASTER_KEY already ({_counts(change.state)}); nothing changed"
    else:
        line = (
            f"{store}: wrapped {change.rewrapped} data key{'' if change.rewrapped == 1 else 's'} with "
            "CHATRECORD_MASTER_KEY; from now on every command on this store needs that key"
        )
    _report(change, store, as_json, line)


@keys_app.command()
def rotate(as_json: JsonOption = False) -> None:
    """Rewraps every data key with CHATRECORD_NEW_MASTER_KEY (the old key in CHATRECORD_MASTER_KEY).

    All keys and the store's check value are written in one transaction (a crash leaves the
    store as it was), the hash chain re-keyed in it (every link checked under the old key first). From then on the store needs the new key and the old one opens nothing;
    processes still running with the old key store no new text until restarted with it.

    Example (CHATRECORD_MASTER_KEY set to the old key, CHATRECORD_NEW_MASTER_KEY to the new one):

        chatrecord keys rotate
    """
    require_store()
    with opened() as chatrecord:
        change = chatrecord.rotate_keys(os.environ.get(NEW_MASTER_KEY_VARIABLE, ""))
        store = chatrecord.description()
    _report(
        change,
        store,
        as_json,
        f"{store}: rewrapped {change.rewrapped} data key{'' if change.rewrapped == 1 else 's'} with "
        f"{NEW_MASTER_KEY_VARIABLE}; set CHATRECORD_MASTER_KEY to it for every command from now on",
    )


@keys_app.command()
def unwrap(as_json: JsonOption = False) -> None:
    """Removes the store's master key: every data key is stored unwrapped again.

    Needs the store's key in CHATRECORD_MASTER_KEY. All keys are written and the store's check
    value deleted in one transaction (a crash leaves the store as it was), the hash chain made
    unkeyed (plain SHA-256) in it. Afterwards the texts
    are protected only by erasing: whoever reads the database can read them.

    Example (CHATRECORD_MASTER_KEY set to the store's key):

        chatrecord keys unwrap
    """
    require_store()
    with opened() as chatrecord:
        change = chatrecord.unwrap_keys()
        store = chatrecord.description()
    if not change.changed:
        line = f"{store}: no master key and no wrapped data key; nothing changed"
    else:
        line = (
            f"{store}: unwrapped {change.rewrapped} data key{'' if change.rewrapped == 1 else 's'} and removed "
            "the master key; commands need no CHATRECORD_MASTER_KEY now, and whoever reads the database can "
            "read the texts"
        )
    _report(change, store, as_json, line)
