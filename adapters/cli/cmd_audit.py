"""`chatrecord audit`."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.app import JsonOption, app, emit, opened, print_json, rules_option, say
from adapters.cli.render import audit_table, chain_line, stream_line
from adapters.cli.stdio import require_store
from projections.rules import Rules


@app.command()
def audit(
    conversation: Annotated[str, typer.Argument(metavar="CONVERSATION", help="The conversation id, as the chat names it.")],
    rules: Annotated[Rules | None, rules_option("Rule set (default: the store's).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Prints a conversation's whole history, in order, with times.

    Every segment with its trigger, outcome and tool calls (ran, failed, held, declined, not
    permitted), the records written and how complete, every decision, card outcome, card left
    undecided, edit and what it cut. Facts only: no tool arguments or results, no model or user text. --json prints the rows
    as one JSON list. The last line says whether the conversation's hash chain verified (see
    verify); in --json each row's "verified" says whether its event lies before any broken link.
    Before that line, one line per reproduction of the conversation (chatrecord reproduce): when, under
    which rule set, the model, how many answers and how the judge counted them.
    A chain that does not verify ends the audit with exit status 1, as verify does, --json or not.

    Example:

        chatrecord audit conv-demo-seo --json
    """
    require_store()
    with opened(reading=True) as chatrecord:
        done = chatrecord.audit(conversation, rules.value if rules else None, chain=True)
        reproduced = [] if as_json else chatrecord.reproductions(done.conversation)
    if as_json:
        print_json(done.to_json())
    else:
        emit(audit_table(done.conversation, done.rows, done.rules, done.erasure_unfinished))
        for kept in reproduced:  # the turns sent to a model again (chatrecord reproduce): facts only
            say(f"reproduced: {stream_line(kept)}")
        say(chain_line(done.chain))
    if done.chain is not None and not done.chain.ok:
        raise typer.Exit(1)
