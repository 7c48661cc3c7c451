"""`chatrecord audit`."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.app import JsonOption, RulesOption, app, emit, opened, print_json, say
from adapters.cli.habits import (
    require_store,
)
from adapters.cli.render import audit_table
from adapters.cli.verify import chain_line
from adapters.ingest.names import lookup_key
from adapters.store.verify import chain_verdict


@app.command()
def audit(
    conversation: Annotated[str, typer.Argument(help="The conversation id, as the chat names it.")],
    rules: RulesOption = None,
    as_json: JsonOption = False,
) -> None:
    """Prints a conversation's whole history, in order, with times.

    Every segment with its trigger, outcome and tool calls (ran, failed, held, declined, not
    permitted), the records written and how complete, every decision, card outcome, card left
    undecided, edit and what it cut. Facts only: no tool arguments or results, no model or user text. --json prints the rows
    as one JSON list. The last line says whether the conversation's hash chain verified (see
    verify); in --json each row's "verified" says whether its event lies before any broken link.

    Example:

        chatrecord audit conv-demo-seo --json
    """
    require_store()
    with opened() as chatrecord:
        rule_set, rows = chatrecord.audit(conversation, rules.value if rules else None)
        verdict = chain_verdict(chatrecord.store, lookup_key(conversation))
    if as_json:
        intact = None if verdict is None else (verdict.version + 1 if verdict.ok else verdict.version)
        print_json([{**row.to_json(), "verified": intact is not None and row.version < intact} for row in rows])
    else:
        emit(audit_table(conversation, rows, rule_set))
        say(chain_line(verdict))
