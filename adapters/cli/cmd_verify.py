"""`chatrecord verify` (registered by `adapters.cli` after the other commands, where `--help` lists it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapters.api import head_line
from adapters.cli.app import opened, print_json, say, warn
from adapters.cli.stdio import require_store


def verify(
    conversation: Annotated[
        str | None, typer.Argument(metavar="CONVERSATION", help="Only this conversation (default: every one).")
    ] = None,
    heads: Annotated[bool, typer.Option("--heads", help="Print each head as NAME VERSION HASH, to keep elsewhere.")] = False,
    against: Annotated[
        Path | None,
        typer.Option("--against", metavar="FILE", help="Also compare with heads kept earlier (verify --heads or --json output)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per conversation, one per line.")] = False,
    rows: Annotated[
        bool, typer.Option("--rows", help="Also hold each conversation's read-model rows against a fold of its log.")
    ] = False,
    upgrade: Annotated[
        bool, typer.Option("--upgrade", help="First chain the conversations stored before the chain existed (logged).")
    ] = False,
) -> None:
    """Recomputes each conversation's hash chain and reports ok or the first broken link.

    A broken link names the conversation, the version and what happened: an event changed,
    deleted, inserted or reordered, or a hash changed. Exit status 1 on any break. --heads
    prints each conversation's head (last version and its hash) for an operator to keep
    elsewhere; --against FILE compares with such kept heads, which also finds the newest
    events cut off or the whole log rewritten. Reads in pages: memory stays flat. The
    conversations are listed in the order of their ids. --upgrade first chains each
    conversation stored before the chain existed (`unchained`), saying so on stderr: an append
    to such a conversation, as to any whose previous event has no hash, is refused. --rows
    also folds each conversation's log and compares its read-model rows (head, transcript, run
    record, card outcomes) with the fold: a row rewritten in the database is named here, not
    by a turn read; chatrecord rebuild writes the rows again. Exit status 1 when rows differ.
    A chain keyed with the master key's chain key (HMAC-SHA256) is said so after the count; with
    CHATRECORD_MASTER_KEY set, a chain of plain SHA-256 links does not verify (`unkeyed`).
    A conversation with reproductions (chatrecord reproduce) gets a line for their streams' hash
    chains (--json: an object {"reproductions_of", "streams", "ok", "broken"}); a broken one is
    exit status 1 too.

    Example:

        chatrecord verify --heads > heads.txt && chatrecord verify --against heads.txt
    """
    require_store()
    broken = total = streams_broken = 0
    kind = None
    with opened(reading=not upgrade) as chatrecord:
        kind = chatrecord.chain_kind()
        if upgrade:  # each conversation chained is logged (stderr): `adapters.store.chain_upgrade.upgrade`
            chatrecord.upgrade_chains(conversation)
        for verdict in chatrecord.verify(conversation, against, record="chatrecord verify"):
            total += 1
            broken += not verdict.ok
            if as_json:
                print_json(verdict.to_json())
            elif heads:
                say(head_line(verdict)) if verdict.ok else warn(verdict.line())
            else:
                say(verdict.line())
            chains = chatrecord.reproduction_chains(verdict.conversation)  # the streams of `reproduce`, if any
            streams_broken += not chains.ok
            if chains.streams and as_json:
                print_json(chains.to_json())
            elif chains.streams and (not heads or not chains.ok):
                (say if chains.ok else warn)(chains.line())
        differ = checked = 0
        if rows:
            for found in chatrecord.verify_rows(conversation):
                checked += 1
                differ += not found.ok
                if as_json:
                    print_json(found.to_json())
                elif not heads:
                    say(found.line())
                elif not found.ok:
                    warn(found.line())
    if not as_json and not heads:
        done = "checked" if broken else "verified"  # "verified" only where every chain is ok
        say(f"{total} conversation{'' if total == 1 else 's'} {done}: {total - broken} ok, {broken} broken")
        if kind is not None:  # an unkeyed chain, as every store's before keyed chains, says nothing
            say(f"the hash chain is {kind}")
        if rows:
            say(
                f"rows of {checked} conversation{'' if checked == 1 else 's'} held against "
                f"{'its log' if checked == 1 else 'their logs'}: {checked - differ} ok, {differ} differ"
            )
    if broken or differ or streams_broken:
        raise typer.Exit(1)
