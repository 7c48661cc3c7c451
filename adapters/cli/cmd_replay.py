"""`chatrecord replay`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from adapters.api import ReplayForm, ReplayStream, TurnRange, Verdict, replay_file, replay_lines, stream_file, stream_lines
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
    json_bytes,
    require_store,
    stdin_lines,
)
from domain.limits import INT_MAX
from projections.page_line import PageCheck
from projections.rules import DEFAULT_RULE_SET, Rules


@app.command()
def replay(
    file: Annotated[
        Path | None, typer.Argument(metavar="FILE", help="Replay this JSON Lines file in memory; - reads standard input.")
    ] = None,
    conversation: Annotated[str | None, typer.Option("--conversation", "-c", help="Replay this stored conversation.")] = None,
    rules: RulesOption = None,
    at: Annotated[int | None, typer.Option("--at", min=1, help="Only the turn of user message N, as it was then.")] = None,
    deny_page: Annotated[
        list[int] | None, typer.Option("--deny-page", min=1, max=INT_MAX, help="A page the user may not see (repeatable).")
    ] = None,
    as_json: JsonOption = False,
    first: Annotated[
        int | None, typer.Option("--from", min=1, help="Only the turns of user messages from N on (with --to: a range).")
    ] = None,
    last: Annotated[int | None, typer.Option("--to", min=1, help="Only the turns of user messages up to N.")] = None,
    changes: Annotated[
        bool, typer.Option("--changes", help="Each turn as what changed since the turn before, as JSON (see below).")
    ] = False,
) -> None:
    """Prints every turn's model input, each exactly as the model saw it then.

    Give a FILE (read in memory, nothing stored; - reads standard input) or --conversation ID
    (the configured store, which must exist). --at N travels back to the turn of user message
    N (from a store, only the log up to that turn is read); --deny-page hides a page from the
    user, so no prompt names it. --json prints one object per conversation, one per line:
    {"conversation", "rules", "turns"}, each turn {"message", "at", "view_context", "messages"
    (exactly as sent), "notes", "record", "card_outcomes"} as that turn saw them, written turn
    by turn as the log is folded. --from N / --to M keep the turns of user messages N to M.

    --changes prints the same object with each turn as what changed since the turn before, so a
    whole history's output grows with its length, not its square: {"message", "at",
    "view_context", "page_line" (null: unchanged), "kept" and "appended" (the transcript without
    the notes: the turn before's first "kept" messages, then these), "notes" {"added", "moved",
    "dropped"} (each note's place and "n", its position among the turn's notes), "record"
    {"dropped", "changed"}, "card_outcomes" {"kept", "appended"}} (README: Replay).

    Example:

        chatrecord replay tests/data/demo_seo_tour.jsonl --at 1 --json
    """
    if (file is None) == (conversation is None):
        raise typer.BadParameter("give a FILE or --conversation ID, not both or neither", param_hint="FILE")
    if at is not None and (first is not None or last is not None or changes):
        raise typer.BadParameter("--at N is one turn, whole: give it without --from, --to and --changes", param_hint="--at")
    if first is not None and last is not None and first > last:
        raise typer.BadParameter(
            f"--from {first} is after --to {last}; give the first message, then the last", param_hint="--from"
        )
    can_see = page_check(deny_page or ())
    if at is None:
        streamed(
            file, conversation, rules, can_see, TurnRange(first, last), "changes" if changes else "turns" if as_json else "inputs"
        )
        return
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
        check_warning(replays[0].broken, replays[0].differs, replays[0].chain, pinned)
    for done in replays:
        if as_json:
            print_json(done.to_json())
            continue
        for turn in done.turns:
            emit(turn_view(done.conversation, turn, done.rules))


def check_warning(broken: bool, differs: bool, verdict: Verdict | None, pinned: str) -> None:
    """Warns (stderr) where the read models differ from the log for the latest turn."""
    if broken:
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
    elif differs:
        warn(
            "warning: the read models differ from the log for the latest turn; the log's is shown. "
            f"Run: chatrecord rebuild --rules {pinned}"
        )


def streamed(
    file: Path | None, conversation: str | None, rules: Rules | None, can_see: PageCheck, span: TurnRange, form: ReplayForm
) -> None:
    """Writes the replay of every turn `span` picks as the log is folded: the JSON head, each turn, the end,
    or each turn's text. One turn is held at a time."""
    if file is not None:
        rule_set = rules.value if rules else DEFAULT_RULE_SET
        if is_stdin(file):
            streams = stream_lines(stdin_lines(), STDIN_NAME, rule_set, can_see, form, span)
        else:
            streams = stream_file(readable_file(file), rule_set, can_see, form, span)
        for stream in streams:
            written(stream)
        return
    require_store()
    assert conversation is not None  # checked above: a FILE or a conversation
    with opened(reading=True) as chatrecord:
        stream = chatrecord.replay_stream(conversation, rules.value if rules else None, can_see, form=form, span=span)
        shown = written(stream)
        pinned = chatrecord.active_rules()
    if shown == 0 and span == TurnRange():  # nothing printed: say why
        warn(f"{conversation}: no turns to replay: the conversation has no user messages yet")
    check_warning(stream.broken, stream.differs, stream.chain, pinned)


def written(stream: ReplayStream) -> int | None:
    """Writes one conversation's streamed replay to stdout; returns the turns printed as text, None for
    JSON."""
    if stream.form == "inputs":
        count = 0
        for turn in stream.inputs():
            emit(turn_view(stream.conversation, turn, stream.rules))
            count += 1
        return count
    out = sys.stdout.buffer
    sys.stdout.flush()
    out.write(json_bytes(stream.head())[:-1] + b',"turns":[')
    for index, turn in enumerate(stream.turns):
        out.write((b"," if index else b"") + json_bytes(turn))
    out.write(b"]}\n")
    out.flush()
    return None
