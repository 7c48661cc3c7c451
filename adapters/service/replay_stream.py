"""Replay streamed turn by turn (`ReplayStreams.replay_stream`, `stream_file`). Each turn's JSON is written
as the log is folded: whole, or as changes since the turn before (`--changes`). A range of user messages
and a page of turns can be picked. Output and memory grow with the history, not its square."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from adapters.backends.settings import store_errors
from adapters.ingest import read_lines
from adapters.service.chain_looks import ChainLooks
from adapters.service.common import conversation_argument, in_store_terms
from adapters.service.conversation_reads import ConversationReads
from adapters.service.line_commands import fold_events
from adapters.service.replay import Conversations, EmptyInput, conversations_of, file_conversations
from adapters.store.application import ConversationStore
from adapters.store.verify import Verdict, chain_verdict
from adapters.views.gc_pause import gc_paused
from domain.errors import ChatrecordError
from domain.events import ConversationEvent
from projections.page_line import PageCheck, every_page
from projections.rules import DEFAULT_RULE_SET, resolve
from projections.turn import TurnInput, turn_input
from projections.turn_changes import Turn, TurnWriter, in_range, turn_states

ReplayForm = Literal["turns", "changes", "inputs"]
"""How a replay stream gives each turn: its JSON whole, its changes, its `TurnInput`."""
REPLAY_CURSOR_PATTERN = r"^t[0-9]{1,9}$"
"""The form of a replay page's cursor: `t` and the position of the page's first turn (from 0)."""
REPLAY_LIMIT_MAX = 1000
"""The most turns one page of `GET …/replay` holds."""


class BadReplayCursor(ChatrecordError):
    """Raised when a replay cursor is not one a page of the replay returned."""


def replay_cursor(start: int) -> str:
    """Returns the cursor of the page that starts at the `start`th turn (from 0)."""
    return f"t{start}"


def replay_start(cursor: str | None) -> int:
    """Returns the position of the first turn of the page `cursor` names (0 for None). Raises
    BadReplayCursor for any other form than `replay_cursor`'s."""
    if cursor is None:
        return 0
    if re.fullmatch(REPLAY_CURSOR_PATTERN, cursor) is None:
        raise BadReplayCursor(f"{cursor[:40]!r} is not a cursor of the replay; pass the next_cursor a page returned, or none")
    return int(cursor[1:])


@dataclass
class ReplayStream:
    """One conversation's turns as they are folded; iterate `turns` once. Each turn is whole JSON (`turns`),
    its changes (`changes`) or its `TurnInput` (`inputs`). After the last: `next_cursor` (None: no turn
    after), and `differs` and `chain` as `Replay`'s where the whole log was read under the live rule set."""

    conversation: str
    rules: str
    form: ReplayForm
    turns: Iterator[Any] = field(default_factory=lambda: iter(()))
    next_cursor: str | None = None
    differs: bool = False
    chain: Verdict | None = None
    shown: int = 0

    @property
    def broken(self) -> bool:
        """True when the read models differ because the log's hash chain does not verify."""
        return self.differs and self.chain is not None and not self.chain.ok

    def inputs(self) -> Iterator[TurnInput]:
        """The turns of a stream of form `inputs`: each turn's input."""
        assert self.form == "inputs"
        return self.turns

    def head(self) -> dict[str, Any]:
        """Returns the members of the replay object before `turns`."""
        return {"conversation": self.conversation, "rules": self.rules}


@dataclass(frozen=True)
class TurnRange:
    """Which turns a replay shows: of user messages `first`…`last` (inclusive, either open), from the
    `start`th turn (from 0), at most `limit` (None: all)."""

    first: int | None = None
    last: int | None = None
    start: int = 0
    limit: int | None = None

    def check(self) -> None:
        """Raises ValueError for a range no turn can be in."""
        if self.first is not None and self.last is not None and self.first > self.last:
            raise ValueError(f"--from {self.first} is after --to {self.last}; give the first message, then the last")


def _turns(
    stream: ReplayStream,
    events: Iterable[ConversationEvent],
    can_see_page: PageCheck,
    span: TurnRange,
    latest: list[Turn],
) -> Iterator[Any]:
    """Yields the JSON or input of each turn `span` picks, folding `events` once. `latest` receives the
    log's last turn when the fold reached the end. Else it sets `stream.next_cursor`."""
    rules = resolve(stream.rules)
    writer = TurnWriter(rules, can_see_page, stream.form == "changes")
    last: Turn | None = None
    for turn in turn_states(events, rules):
        if turn.index >= span.start and in_range(turn.message, span.first, span.last):
            if span.limit is not None and stream.shown >= span.limit:
                stream.next_cursor = replay_cursor(turn.index)
                return
            yield (
                turn_input(turn.state, turn.message, turn.at, rules, can_see_page)
                if stream.form == "inputs"
                else writer.json(turn)
            )
            stream.shown += 1
        writer.passed(turn)
        last = turn
    if last is not None:
        latest.append(last)


def stream_file(
    path: Path,
    rules: str = DEFAULT_RULE_SET,
    can_see_page: PageCheck = every_page,
    form: ReplayForm = "turns",
    span: TurnRange | None = None,
) -> Iterator[ReplayStream]:
    """Yields the streamed replay of each conversation of the JSON Lines file `path`, in memory; nothing is
    stored."""
    return stream_conversations(file_conversations(path), str(path), rules, can_see_page, form, span)


def stream_lines(
    lines: Iterable[str | bytes],
    source: str,
    rules: str = DEFAULT_RULE_SET,
    can_see_page: PageCheck = every_page,
    form: ReplayForm = "turns",
    span: TurnRange | None = None,
) -> Iterator[ReplayStream]:
    """Yields the streamed replay of each conversation of JSON Lines `lines` (named `source` in errors), as
    `stream_file` does."""
    conversations = conversations_of(fold_events(read_lines(lines, source)))
    return stream_conversations(conversations, source, rules, can_see_page, form, span)


def stream_conversations(
    conversations: Conversations,
    source: str,
    rules: str = DEFAULT_RULE_SET,
    can_see_page: PageCheck = every_page,
    form: ReplayForm = "turns",
    span: TurnRange | None = None,
) -> Iterator[ReplayStream]:
    """Yields the streamed replay of each conversation of `source` (a file or standard input), in memory;
    nothing is checked. Raises EmptyInput for a source without conversations. Raises ValueError for a
    range no turn can be in. Both raise before anything is yielded."""
    span = span or TurnRange()
    span.check()
    if not conversations:
        raise EmptyInput(f"{source} holds no conversation; replay a JSON Lines file the chat wrote")
    rule_set = resolve(rules).id
    return _streams(conversations, rule_set, can_see_page, form, span)


def _streams(
    conversations: Conversations, rule_set: str, can_see_page: PageCheck, form: ReplayForm, span: TurnRange
) -> Iterator[ReplayStream]:
    for name, events in conversations:
        stream = ReplayStream(name, rule_set, form)
        stream.turns = _turns(stream, events, can_see_page, span, [])
        yield stream


class ReplayStreams:
    """The streamed replay of a stored conversation, a Chatrecord method, through `reads` and the chain
    looks (`looks`)."""

    def __init__(self, reads: ConversationReads, looks: ChainLooks) -> None:
        self.reads = reads
        self.looks = looks

    @property
    def store(self) -> ConversationStore:
        """The store read."""
        return self.reads.store

    @in_store_terms
    def replay_stream(
        self,
        conversation: str,
        rules: str | None = None,
        can_see_page: PageCheck = every_page,
        *,
        form: ReplayForm = "turns",
        span: TurnRange | None = None,
    ) -> ReplayStream:
        """Returns the turns of a stored conversation that `span` picks, under `rules` (default: live).
        `form`: whole, changes since the turn before, or `TurnInput`s. Iterate `ReplayStream.turns` once;
        the log is read once and one turn's JSON is held at a time. A fold reaching the latest turn under
        the live rule set compares it as `replay` does (`differs`, `chain`). Raises UnknownConversation,
        UnknownRuleSet, and ValueError for a range no turn can be in."""
        span = span or TurnRange()
        span.check()
        name = conversation_argument("replay", conversation)
        events = self.reads.events(name)
        read_models = self.reads.opened.read_models
        active = read_models.active_rules()
        stored = self.reads.opened.stored_id(name)
        stream = ReplayStream(stored, resolve(rules or active).id, form)
        latest: list[Turn] = []
        picked = span

        def written() -> Iterator[Any]:
            with gc_paused(), store_errors(self.store):
                yield from _turns(stream, events, can_see_page, picked, latest)
                if latest and stream.rules == active:
                    self._check(stream, stored, latest[0], can_see_page)

        stream.turns = written()
        return stream

    def _check(self, stream: ReplayStream, stored: str, latest: Turn, can_see_page: PageCheck) -> None:
        """Sets `stream.differs` (and `chain`) where the read models' latest turn is not the
        log's `latest` (as `ConversationReads._checked`)."""
        live = self.reads.live_turn(stored, can_see_page)
        mine = turn_input(latest.state, latest.message, latest.at, resolve(stream.rules), can_see_page)
        stream.differs = live is None or live.to_json() != mine.to_json()
        if stream.differs:
            stream.chain = self.looks.held(chain_verdict(self.store, stored))
