"""`chatrecord replay`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapters.api import replay_file, replay_lines
from adapters.cli.app import (
    JsonOption,
    RulesOption,
    app,
    emit,
    opened,
    print_json,
    warn,
)
from adapters.cli.args import page_check, readable_file
from adapters.cli.render import turn_view
from adapters.cli.stdio import (
    STDIN_NAME,
    is_stdin,
    require_store,
    stdin_lines,
)
from projections.rules import DEFAULT_RULE_SET


@app.command()
def replay(
    file: Annotated[
        Path | None, typer.Argument(metavar="FILE", help="Replay this JSON Lines file in memory; - reads standard input.")
    ] = None,
    conversation: Annotated[str | None, typer.Option("--conversation", "-c", help="Replay this stored conversation.")] = None,
    rules: RulesOption = None,
    at: Annotated[int | None, typer.Option("--at", min=1, help="Only the turn of user message N, as it was then.")] = None,
    deny_page: Annotated[
        list[int] | None, typer.Option("--deny-page", min=1, help="A page the user may not see (repeatable).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Prints every turn's model input, each exactly as the model saw it then.

    Give a FILE (read in memory, nothing stored; - reads standard input) or --conversation ID
    (the configured store, which must exist). --at N travels back to the turn of user message
    N (from a store, only the log up to that turn is read); --deny-page hides a page from the
    user, so no prompt names it. --json prints one object per conversation, one per line:
    {"conversation", "rules", "turns"}, each turn {"message", "at", "view_context", "messages"
    (exactly as sent), "notes", "record", "card_outcomes"} as that turn saw them.

    Example:

        chatrecord replay tests/data/demo_seo_tour.jsonl --at 1 --json
    """
    if (file is None) == (conversation is None):
        raise typer.BadParameter("give a FILE or --conversation ID, not both or neither", param_hint="FILE")
    can_see = page_check(deny_page or ())
    if file is not None:
        rule_set = rules.value if rules else DEFAULT_RULE_SET
        if is_stdin(file):
            replays = replay_lines(stdin_lines(), STDIN_NAME, rule_set, at, can_see)
        else:
            replays = replay_file(readable_file(file), rule_set, at, can_see)
    else:
        require_store()
        assert conversation is not None  # checked above: a FILE or a conversation
        with opened(reading=True) as chatrecord:
            replays = [chatrecord.replay(conversation, rules.value if rules else None, at, can_see)]
            pinned = chatrecord.active_rules()  # the rule set a rebuild it advises keeps
        if replays[0].broken:
            verdict = replays[0].chain
            assert verdict is not None  # a broken replay carries its chain's verdict
            warn(
                f"warning: the log's hash chain is broken at version {verdict.version} ({verdict.problem}), "
                "so the read models differ from it; the log's turns are shown as they read now. "
                "Run: chatrecord verify (do not rebuild: "
                + (
                    "the read models still remember the removed events)"
                    if verdict.problem in ("cut_off", "deleted")
                    else "it would fold the changed events in)"
                )
            )
        elif replays[0].differs:
            warn(
                "warning: the read models differ from the log for the latest turn; the log's is shown. "
                f"Run: chatrecord rebuild --rules {pinned}"
            )
    for done in replays:
        if as_json:
            print_json(done.to_json())
            continue
        for turn in done.turns:
            emit(turn_view(done.conversation, turn, done.rules))
