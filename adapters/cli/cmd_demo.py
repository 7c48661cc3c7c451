"""`chatrecord demo`."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.api import DEMO_CONVERSATION
from adapters.cli.app import app, emit, opened, rules_option, say, warn
from adapters.cli.render import broken_chain_warning, comparison, turn_view
from projections.rules import Rules


@app.command()
def demo(
    rules: Annotated[
        Rules | None, rules_option("Print the same turn under this rule set too, after the store's, and compare.")
    ] = None,
) -> None:
    """Replays the demo SEO tour and prints what the model is sent three days later.

    The question is "was ist hier passiert?"; the chat record's notes are boxed. The tour (six approved cards on page 42) ships with the package. It is ingested into the
    configured store; ingesting it again changes nothing. The turn is read from the store's
    read models, under the store's rule set. With --rules transcript-only the
    turn is printed again as it was before the chat record existed (no notes: the model
    answered that nothing had been saved), followed by a comparison.

    Example:

        chatrecord demo --rules transcript-only
    """
    with opened() as chatrecord:
        done = chatrecord.demo(rules.value if rules else None)
    say(f"{done.report.summary()} ({done.backend})")
    emit(turn_view(DEMO_CONVERSATION, done.turn, done.rules))
    if done.other is not None:
        emit("")
        emit(turn_view(DEMO_CONVERSATION, done.other[1], done.other[0]))
        emit(comparison([(done.rules, done.turn), done.other]))
    broken = broken_chain_warning(done.broken, "the turn was read from the read models, which may not match its log")
    if broken is not None:  # as timeline, export and audit: the turn printed, exit 1
        warn(broken)
        raise typer.Exit(1)
