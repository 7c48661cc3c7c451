"""Each input line to its domain command (`COMMANDS`), with the check of the version a line `follows`.
`decide` decides a line for every write. `fold_events` and `read_events` decide lines in memory.
`adapters.ingest` reads and validates the lines."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from adapters.ingest import at_line, read_file
from adapters.ingest.line_models import Line, ParsedLine
from domain import conversation as domain
from domain.errors import ChatrecordError, LineOutOfOrder
from domain.events import ConversationEvent

COMMANDS: dict[str, Callable[..., list[ConversationEvent]]] = {
    "conversation_started": domain.start_conversation,
    "user_message": domain.post_user_message,
    "segment_returned": domain.return_segment,
    "card_decided": domain.decide_card,
    "question_answered": domain.answer_question,
    "turn_retried": domain.retry_turn,
    "tour_ended": domain.end_tour,
    "message_edited": domain.edit_message,
    "transcript_replaced": domain.replace_transcript,
    "legacy_row": domain.import_legacy_row,
}
"""The domain command each line type calls (`adapters.ingest.LINE_TYPES` names the same types)."""

DECIDED_BY_STATE = frozenset({"tour_ended"})
"""The lines whose deciding depends on the state, not on what was recorded: a `tour_ended` with
no tour running stores nothing. One that comes before the version it `follows` is not taken as
a repeat there (it may end a tour by then); it waits like any other line."""


def decide(
    line: Line, state: domain.Conversation | None, history: domain.History, source: str | None = None
) -> list[ConversationEvent]:
    """Returns the events the line's command decides on `state`, each with `source`: the line's digest
    as the store keys it (`adapters.store.line_digests`), its plain digest when None. A repeat decides
    nothing, also one stored under the plain digest before. Raises its ChatrecordError when an
    invariant would break. Raises LineOutOfOrder when the conversation is not at the version the line
    `follows`."""
    command = COMMANDS[line.type]
    facts = line.kept_facts
    source = source or line.digest
    if source != line.digest and history.source(line.digest) is not None:
        return []  # stored before digests were keyed: the same line again
    if line.follows is not None:
        version = state.version if state is not None else 0
        if version != line.follows and history.source(source) is None:
            try:
                repeat = command(state, **facts(), at=line.at, source=source, history=history) == []
            except ChatrecordError:
                repeat = False
            if repeat and version < line.follows and line.type in DECIDED_BY_STATE:
                repeat = False  # what it decides is decided at the version it follows, which is still to come
            if not repeat:
                raise out_of_order(line, version)
    return command(state, **facts(), at=line.at, source=source, history=history)


def recorded(line: Line, source: str, history: domain.History) -> bool:
    """Says whether `history` holds the line, by `source` (its digest as the store keys it) or by its
    plain digest (stored before digests were keyed)."""
    return history.source(source) is not None or (source != line.digest and history.source(line.digest) is not None)


def out_of_order(line: Line, version: int) -> LineOutOfOrder:
    """Returns the refusal of a line that `follows` another version than the conversation's `version`."""
    assert line.follows is not None  # asked only of a line that names the version it follows
    start = f"the line follows version {line.follows} of conversation {line.conversation!r}, which is at version {version}"
    if version < line.follows:
        return LineOutOfOrder(f"{start}; it waits for the lines before it (nothing of it was stored)", line.follows, version)
    return LineOutOfOrder(
        f"{start} already; it was written for an earlier state (nothing of it was stored)", line.follows, version
    )


def fold_events(lines: Iterable[ParsedLine]) -> Iterator[ConversationEvent]:
    """Yields the events each line decides, folded in memory per conversation. Raises InvalidInput at a bad
    line, or the domain's ChatrecordError prefixed with the line's file and number. Earlier lines' events
    are yielded first."""
    states: dict[str, domain.Conversation | None] = {}
    histories: dict[str, domain.MemoryHistory] = {}
    for line in lines:
        state = states.get(line.conversation)
        history = histories.setdefault(line.conversation, domain.MemoryHistory())
        try:
            events = decide(line, state, history)
        except ChatrecordError as error:
            raise at_line(error, line.source_name, line.line) from error
        history.record(state, events)
        states[line.conversation] = domain.project_conversation(state, events)
        yield from events


def read_events(path: str | Path) -> list[ConversationEvent]:
    """Returns the events of every line of the file `path`, in order (see `fold_events`). Raises
    InvalidInput or the domain's ChatrecordError at the first line that fails."""
    return list(fold_events(read_file(path)))
