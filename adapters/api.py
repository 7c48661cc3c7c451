"""The service layer: every use case of chatrecord, for the CLI, the Python API and HTTP.

    from adapters.api import Chatrecord

    record = Chatrecord()                          # the store the environment configures
    record.record({"type": "user_message", ...})   # one line of the chat's input (docs/spec-map.md, D7)
    notes = record.turn_notes("conv-demo-seo", can_see_page=lambda page: page != 13)
    notes.page_line, notes.notes                   # what the chat adds to its transcript
    turn = record.turn_input("conv-demo-seo")      # or the whole model input
    turn.model_messages()                          # [{"role": "system", "content": ...}, ...]

With CHATRECORD_READ_DATABASE_URL set, what only reads is served by the standbys, and a write's
`read_after` handed back (`record.turn_notes(conv, after=result.read_after)`) keeps a read from
going back in time (docs/scaling.md).

Every line goes through one path (`adapters.service.record_lines`: `parse`, then the store command
`RecordLines`), whichever entrypoint sent it, so a bad line and a refused line read the same
everywhere. Reads of a turn come from the read models after they caught up with
the conversation's last event, so a turn never reads a record older than its own log.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path
from threading import Lock
from typing import Any, TypeVar

from adapters.ingest import ParsedLine, bounded_lines, check_follows, line_text
from adapters.service import master_key as master_keys
from adapters.service.batched_ingest import BATCH_LINES, Ingestion
from adapters.service.conversations import ConversationPage, Export, export_lines, list_conversations, stored_id
from adapters.service.master_key import KeyChange
from adapters.service.record_lines import IngestReport, Recorded, RecordLines, VersionMismatch, parse
from adapters.service.replay import (
    DEMO_CONVERSATION,
    DEMO_FILE,
    Audit,
    Demo,
    Replay,
    demo_lines,
    no_turn_among,
    replay_file,
    replay_lines,
    stored_conversation,
    unknown_conversation,
)
from adapters.service.timeline import (
    PAGE_TURNS,
    KeptOverview,
    OverviewPoint,
    TimelinePage,
    TurnView,
    timeline_page,
    turn_at,
    turn_view,
)
from adapters.store.application import ConversationStore, HandleResult, connection_lost
from adapters.store.chain import ChainedRecorder
from adapters.store.crypto import TextsErased
from adapters.store.erasure import Erasure, erase
from adapters.store.keys import KeyState
from adapters.store.replicas import check_position, recovery_conflict, replayed, write_position, wrote_on_standby
from adapters.store.settings import StoreUnusable, describe_backend, open_read_store, open_store, read_wait, store_errors
from adapters.store.verify import Verdict, chain_verdict, upgrade, verdicts, verify_after
from adapters.views.readmodels import ConversationDiff, ReadModels, RebuildReport
from adapters.views.verify_rows import RowsVerdict, check_rows, rows_verdicts
from domain.errors import ChatrecordError, InvalidInput, UnknownConversation, shown_id
from domain.events import ConversationEvent, conversation_uuid
from projections import activity
from projections.activity import SegmentActivity
from projections.audit import AuditRow
from projections.audit import audit as audit_rows
from projections.audit import initial as audit_initial
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn import TurnInput, build_turn_input, replay_turns, turns_of
from projections.turn_notes import PlacedNote, TurnNotes, apply_notes

__all__ = [
    "DEMO_CONVERSATION",
    "DEMO_FILE",
    "Audit",
    "Chatrecord",
    "Demo",
    "IngestReport",
    "PlacedNote",
    "Recorded",
    "Replay",
    "TurnNotes",
    "VersionMismatch",
    "apply_notes",
    "demo_lines",
    "replay_file",
    "replay_lines",
]

Progress = Callable[[int, int], None]
WRITER_LOCKS = 64
"""Writes of one process are serialised per conversation through this many locks (a conversation
id picks one by its hash), so concurrent requests on one conversation queue rather than conflict."""


Method = TypeVar("Method", bound=Callable[..., Any])


def _in_store_terms(method: Method) -> Method:
    """Makes a Chatrecord method (or generator method) raise its store's errors as `store_errors` does."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generate(self: Chatrecord, *args: Any, **kwargs: Any) -> Any:
            with store_errors(self.store):
                return (yield from method(self, *args, **kwargs))

        return generate  # type: ignore[return-value]  # functools.wraps: the method's own signature

    @functools.wraps(method)
    def call(self: Chatrecord, *args: Any, **kwargs: Any) -> Any:
        with store_errors(self.store):
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]  # functools.wraps: the method's own signature


RECOVERY_CONFLICT_TRIES = 3
"""Tries of a read on the standby that recovery cancelled, before the primary answers it."""


def _reads(method: Method) -> Method:
    """Makes a Chatrecord method that only reads, which declares `after` (keyword only: a write's
    `read_after` position, or None) and run on the store `Chatrecord._reader(after)` picks: the
    standby, or the primary where the standby has not replayed `after` in time. A try on the
    standby that recovery cancelled is made again (RECOVERY_CONFLICT_TRIES tries in all); when the
    last is cancelled too, the standby's connection failed, or the read had to write (read models
    to bring up to date, which a standby refuses), the primary answers: none is shown to the
    caller."""

    @functools.wraps(method)
    def call(self: Chatrecord, *args: Any, after: str | None = None, **kwargs: Any) -> Any:
        reader = self._reader(after)
        if reader is not self._standby:  # no reading store, or the primary answers
            return method(reader, *args, **kwargs)
        for attempt in range(1, RECOVERY_CONFLICT_TRIES + 1):
            try:
                return method(reader, *args, **kwargs)
            except ChatrecordError as error:
                to_primary = connection_lost(error) or wrote_on_standby(error)
                if not (to_primary or recovery_conflict(error)):
                    raise
                if to_primary or attempt == RECOVERY_CONFLICT_TRIES:
                    break
        return method(self._on_primary, *args, **kwargs)

    return call  # type: ignore[return-value]


class Chatrecord:
    """A conversation store with its read models: every use case the entrypoints call.

    `store` defaults to `adapters.store.settings.open_store()` (SQLite `CHATRECORD_DB`, or PostgreSQL
    when `CHATRECORD_DATABASE_URL` is set). `source_name` names `record`'s lines in errors.
    Opening it raises BadSetting for a setting it cannot use and StoreUnusable, in the words the
    command line prints, for a database that cannot be opened (a file on a read-only file
    system, a server that does not answer). `reading=True` (a caller that only reads: audit,
    verify, replay, activity) opens a SQLite file it cannot write read-only, so an archive on a
    read-only file system can be inspected (`open_store(reading=True)`).

    Every method raises StoreUnusable (a ChatrecordError, one line naming what to do) when the
    database cannot be used: a server that stopped answering, a file another process kept
    locked. Nothing of the call is stored then; the next call tries the database again.

    **Standbys.** `read_store` (default: `open_read_store()`, on CHATRECORD_READ_DATABASE_URL
    where it is set) is where the methods that only read are served: the turn read, replay,
    audit, activity, the list, export, verify, the timeline. Writes, `init_store`, `rebuild`,
    `diff`, `erase`, the key commands and `health` stay on `store`. With a reading store, a write
    (`record`, `record_lines`) answers with `read_after`, its position (`position()`); each
    reading method takes `after=` (keyword only): given a position, it is served by the standby
    only once that has replayed it, waiting up to `read_wait` seconds (CHATRECORD_READ_WAIT_MS,
    default 1000 ms), else by the primary, so a caller never reads older than its own write.
    Without `after` a standby may answer from a little in the past (its replication lag).
    Without a reading store, `read_after` is None and `after` changes nothing.
    """

    def __init__(
        self,
        store: ConversationStore | None = None,
        source_name: str = "api",
        *,
        reading: bool = False,
        read_store: ConversationStore | None = None,
        read_wait: float | None = None,
    ) -> None:
        if store is None:
            with store_errors():  # a file that cannot be opened, a server that does not answer
                read_store = read_store if read_store is not None else open_read_store()
                # a caller that only reads, with standbys: the primary is opened when first needed
                store = None if reading and read_store is not None else open_store(reading=reading)
        self._store = store
        self._reading = reading
        self._standby = Chatrecord(read_store, source_name) if read_store is not None else None
        """The same use cases on the reading store (it has none of its own), where one is set."""
        self.read_wait = read_wait if read_wait is not None else _read_wait()
        self.source_name = source_name
        self._lines = 0
        self._writers = [Lock() for _ in range(WRITER_LOCKS)]
        self._overviews: dict[tuple[str, str], KeptOverview] = {}
        self._overviews_lock = Lock()
        self._chains: dict[str, Verdict] = {}
        """The last ok verdict of each conversation's chain this process made (`chain`)."""

    @property
    def store(self) -> ConversationStore:
        """The store written to (the primary), opened on first use where a caller that only reads
        (`reading=True`) has a reading store: such a caller works while the primary is down."""
        if self._store is None:
            with store_errors():
                self._store = open_store(reading=self._reading)
        return self._store

    @cached_property
    def read_models(self) -> ReadModels:
        """The read models (their tables are made on first use)."""
        return ReadModels(self.store)

    def close(self) -> None:
        """Closes the store's connections (and the reading store's)."""
        if self._store is not None:
            self._store.close()
        if self._standby is not None:
            self._standby.close()

    def position(self) -> str | None:
        """Returns the read-after position of every write this store committed so far (the
        primary's WAL insert position, text such as '0/3016040', opaque to the caller; one
        statement), None without a reading store (`adapters.store.replicas.write_position`)."""
        if self._standby is None:
            return None
        with store_errors(self.store):
            return write_position(self.store)

    def _reader(self, after: str | None) -> Chatrecord:
        """Returns the Chatrecord a read given `after` runs on: this one without a reading store;
        else the standby's, where `after` is None or the standby replays it within `read_wait`
        seconds; else `_on_primary`. Raises ValueError for an `after` no write returned."""
        if self._standby is None:
            return self
        if after is None:
            return self._standby
        with store_errors(self._standby.store):
            caught_up = replayed(self._standby.store, check_position(after), self.read_wait)
        return self._standby if caught_up else self._on_primary

    @cached_property
    def _on_primary(self) -> Chatrecord:
        """This Chatrecord reading on the primary: a copy sharing its store, read models and
        locks, without the reading store (so what it calls reads there too)."""
        self.read_models  # noqa: B018 - made first, so the copy shares them
        pinned = copy.copy(self)
        pinned._standby = None
        return pinned

    @classmethod
    def init_store(cls) -> tuple[bool, str]:
        """Opens the configured store, making its tables and its read models' where they are
        missing, closes it again, and returns whether this created the store (a SQLite file that
        did not exist, PostgreSQL tables that were missing) and the store's description."""
        chatrecord = cls()
        try:
            chatrecord.read_models  # noqa: B018 - the views' pointer and first generation
            return bool(getattr(chatrecord.store.factory, "created", None)), describe_backend(chatrecord.store)
        finally:
            chatrecord.close()

    # ------------------------------------------------------------ writes

    @_in_store_terms
    def record(self, line: Mapping[str, Any] | str | bytes, follows: int | None = None) -> HandleResult:
        """Stores one input line (a dict, or its JSON text) and returns what was appended; a line
        recorded before appends nothing and returns the first result (`HandleResult.repeated`).

        `follows`: the version the conversation must be at (0: not started yet), checked
        atomically with the append. Raises InvalidInput (naming `source_name`, the call's number
        and the field) for a line of the wrong shape, VersionMismatch, or the domain's
        ChatrecordError (with `source_name: line N, field:` in front) when the conversation
        refuses it; nothing of a refused line is stored.
        """
        if not isinstance(line, (Mapping, str, bytes)):
            raise TypeError(f"record takes one line as a dict or its JSON text, not {type(line).__name__}")
        self._lines += 1
        follows = check_follows(follows, self.source_name, self._lines)
        text = line_text(line, self._lines, self.source_name) if isinstance(line, Mapping) else line
        parsed = _required(parse(text, self._lines, self.source_name), self.source_name, self._lines)
        result = self._handle(RecordLines([parsed], follows))
        return dataclasses.replace(result, read_after=self.position()) if self._standby is not None else result

    @_in_store_terms
    def record_lines(self, lines: Iterable[str | bytes], source: str, follows: int | None = None) -> Recorded:
        """Stores the lines (JSON Lines text, blank lines skipped, numbered from 1 in errors) of
        one conversation all or nothing, and returns what was stored.

        Raises InvalidInput for a line of the wrong shape, for no line at all or for lines of
        more than one conversation; VersionMismatch when `follows` is not the conversation's
        version; the domain's ChatrecordError, naming the line, when the conversation refuses
        one. Nothing is stored then. Raises TypeError when `lines` is one str or bytes (a text is
        not a list of lines: split it first, e.g. `text.splitlines()`).
        """
        _lines_argument("record_lines", lines)
        follows = check_follows(follows, source, 1)
        parsed: list[ParsedLine] = []
        for line_no, raw in enumerate(lines, start=1):
            line = parse(raw, line_no, source)
            if line is None:
                continue
            if parsed and line.conversation != parsed[0].conversation:
                raise InvalidInput(
                    source,
                    line_no,
                    "conversation",
                    f"one request holds the lines of one conversation, {parsed[0].conversation!r}",
                )
            parsed.append(line)
        if not parsed:
            raise InvalidInput(source, 1, "(line)", "expected at least one line, got none")
        command = RecordLines(parsed, follows)
        recorded = Recorded.of(self._handle(command), command)
        return dataclasses.replace(recorded, read_after=self.position()) if self._standby is not None else recorded

    def _handle(self, command: RecordLines) -> HandleResult:
        """Hands `command` to the store, one writer of its conversation at a time in this
        process: threads queue instead of conflicting (other processes still conflict and
        retry, as the store's optimistic concurrency makes them)."""
        with self._writers[hash(command.conversation) % WRITER_LOCKS]:
            try:
                return self.store.handle(command)
            except TextsErased as error:  # raised as the texts are sealed: name the line and the field
                raise command.erased(error) from None

    def ingest(
        self,
        lines: Iterable[str | bytes],
        source: str,
        skip_bad: bool = False,
        batch_lines: int = BATCH_LINES,
        progress: Callable[[IngestReport], object] | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> IngestReport:
        """Stores every line of `lines` (named `source`) and returns the report. A binary file
        or stream is read a line at a time, each cut after LINE_BYTES_MAX + 1 bytes
        (`adapters.ingest.bounded_lines`): a line of any length costs at most that much.

        Lines are decided one by one and stored in batches of at most `batch_lines` lines, each
        batch in one transaction (`adapters.service.batched_ingest`); `progress(report)` is called after
        each batch, and `guard()` is entered around each write (see `Ingestion`).

        A bad line (InvalidInput, or a refusal named with source and line) ends the ingestion
        (`report.stopped`; the lines before it stay stored) unless `skip_bad`, which rejects it
        and goes on (`report.rejected`, one message per line). A store that cannot be used
        ends it too, `skip_bad` or not (`report.stopped` is the StoreUnusable). An interrupt
        (KeyboardInterrupt) ends it with `report.interrupted`, every batch before it stored.
        Raises TypeError when `lines` is one str or bytes, ValueError for `batch_lines` < 1.
        """
        _lines_argument("ingest", lines)
        if isinstance(lines, (io.BufferedIOBase, io.RawIOBase)):  # a file: each line read bounded
            lines = bounded_lines(lines)  # type: ignore[arg-type]  # io's binary streams are BinaryIO but for the name
        return Ingestion(self._handle_in_store_terms, self._handle_batch, source, skip_bad, batch_lines, progress, guard).run(
            lines
        )

    def _handle_in_store_terms(self, command: RecordLines) -> HandleResult:
        with store_errors(self.store):
            return self._handle(command)

    def _handle_batch(self, commands: Sequence[RecordLines]) -> list[HandleResult]:
        """Hands `commands` (each of another conversation) to the store as one batch
        (`ConversationStore.handle_batch`), holding the writer locks of all their conversations
        (taken in one order, so two batches never wait for each other)."""
        locks = sorted({hash(command.conversation) % WRITER_LOCKS for command in commands})
        with contextlib.ExitStack() as held, store_errors(self.store):
            for number in locks:
                held.enter_context(self._writers[number])
            return self.store.handle_batch(commands)

    @_in_store_terms
    def demo(self, rules: str | None = None) -> Demo:
        """Ingests the demo SEO tour (package data) and returns its latest turn under the live
        rule set, and under `rules` too when that is another one. Raises the ingestion's error."""
        report = self.ingest(demo_lines(), DEMO_FILE)
        if report.stopped is not None:
            raise report.stopped
        active = self.active_rules(after=self.position())
        now = self.turn_input(DEMO_CONVERSATION, after=self.position())
        other = None
        if rules is not None and rules != active:
            other = (rules, build_turn_input(self.store.events(DEMO_CONVERSATION), rules))
        return Demo(report, describe_backend(self.store), active, now, other)

    # ------------------------------------------------------------ reads

    def _stored_id(self, conversation: str) -> str:
        """Returns the key `conversation` (the chat's id, or the stored form a command printed)
        is stored under (`adapters.service.conversations.stored_id`)."""
        return stored_id(self.store, conversation)

    @_reads
    @_in_store_terms
    def conversations(
        self, limit: int = 50, cursor: str | None = None, since: datetime | None = None, *, after: str | None = None
    ) -> ConversationPage:
        """Returns one page of the store's conversations, newest activity first: at most `limit`
        (1–1000) after `cursor` (the `cursor` of the page before; None: the first page), only
        those active at or after `since` (aware datetime) if given. Each with its stored id (as
        every method accepts it), kind, messages, segments, events, first and last activity and
        whether it was erased (`ConversationSummary`). Reads a page at a time; see
        `adapters.service.conversations.list_conversations`. Raises ValueError for a bad
        `limit`, BadCursor for a cursor no page returned."""
        return list_conversations(self.read_models, limit, cursor, since)

    @_reads
    @_in_store_terms
    def export(self, conversation: str, upto: int | None = None, *, after: str | None = None) -> Export:
        """Returns the conversation as the chat's JSON Lines objects (docs/input-format.md), made
        from its stored events in the store's order, up to user message `upto` and what belongs
        to it if given (`export_lines`). Ingested into an empty store they give the same turns,
        audit rows and notes. An erased conversation's texts read `[erased]` (`Export.erased`).
        Raises UnknownConversation for an id the store does not hold."""
        return export_lines(self.events(_conversation_argument("export", conversation)), upto)

    @_reads
    @_in_store_terms
    def active_rules(self, *, after: str | None = None) -> str:
        """Returns the rule set of the live read models."""
        return self.read_models.active_rules()

    @_reads
    @_in_store_terms
    def events(self, conversation: str, *, after: str | None = None) -> list[ConversationEvent]:
        """Returns the conversation's log. Raises UnknownConversation (naming the store and a few
        stored ids) for an id the store does not hold."""
        return stored_conversation(self.store, _conversation_argument("events", conversation), describe_backend(self.store))

    @_reads
    @_in_store_terms
    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page, *, after: str | None = None) -> TurnInput:
        """Returns the input of the conversation's latest turn under the live rule set: the system
        message's page line, the transcript with the notes placed, the read models it saw.

        Raises UnknownConversation for an id the store does not hold, NoTurnYet when no
        user message has started a turn yet.
        """
        return self.read_models.turn_input(self._stored_id(_conversation_argument("turn_input", conversation)), can_see_page)

    @_reads
    @_in_store_terms
    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page, *, after: str | None = None) -> TurnNotes:
        """Returns what the chat adds to the transcript it holds for the next model call: the
        system message's page line and each note with its place (`TurnNotes.to_json()`:
        `{"conversation", "rules", "version", "page_line", "notes": [{"text", "index", "into",
        "at"}]}`; `apply_notes` shows how they go in and gives `turn_input(...).messages`). A page
        `can_see_page` refuses is never named. Reads a bounded few rows: its cost does not grow
        with the conversation's history.

        Raises UnknownConversation for an id the store does not hold.
        """
        return self.read_models.turn_notes(self._stored_id(_conversation_argument("turn_notes", conversation)), can_see_page)

    @_reads
    def verify(
        self, conversation: str | None = None, against: Path | None = None, *, after: str | None = None
    ) -> Iterator[Verdict]:
        """Yields the verdict of each conversation's hash chain (only `conversation`'s if
        given), in the order of their ids: ok with the head, or the first broken link; checked
        against the heads kept in the file `against` too, if given. Reads in pages: memory
        stays flat.

        Raises NoChain for a store that keeps no chain, BadHeadsFile for a heads file it cannot
        read, UnknownConversation (after the last verdict) when `conversation` has none."""
        key = self._stored_id(_conversation_argument("verify", conversation)) if conversation is not None else None
        return self._verdicts(conversation, key, against)

    @_in_store_terms
    def _verdicts(self, conversation: str | None, key: str | None, against: Path | None) -> Iterator[Verdict]:
        found = False
        for verdict in verdicts(self.store, key, against):
            found = True
            yield verdict
        if conversation is not None and not found:
            raise UnknownConversation("no conversation " + shown_id(conversation, "'") + f" in {describe_backend(self.store)}")

    @_reads
    @_in_store_terms
    def verify_rows(self, conversation: str | None = None, *, after: str | None = None) -> Iterator[RowsVerdict]:
        """Yields, per conversation (only `conversation` if given; else every one, in the order
        of their ids, as `verify`), whether its read-model rows (head, transcript, run record entries, card
        outcomes) are the fold of its log (`adapters.views.verify_rows`): a row rewritten in the
        database is found here, not by a turn read. Reads each whole log. Raises
        UnknownConversation for an id the store does not hold."""
        if conversation is not None:
            key = self._stored_id(_conversation_argument("verify_rows", conversation))
            return iter([check_rows(self.read_models, key)])
        return rows_verdicts(self.read_models, sorted(self.store.conversation_ids()))  # as `verify` lists them

    @_in_store_terms
    def upgrade_chains(self, conversation: str | None = None) -> list[Verdict]:
        """The explicit upgrade of a store an earlier version wrote: chains each conversation
        stored before the hash chain existed (verdict `unchained`; only `conversation`'s if
        given), logging each, and returns their verdicts after it (`adapters.store.verify.upgrade`).
        An append to such a conversation is refused until then (`ChainBroken`). A conversation
        with any hash row is never touched. Raises NoChain for a store without a chain."""
        key = self._stored_id(_conversation_argument("upgrade_chains", conversation)) if conversation is not None else None
        return upgrade(self.store, key)

    @_in_store_terms
    def erase(self, conversation: str) -> Erasure:
        """Erases the conversation's free texts (deletes its data key) and scrubs its read
        models; idempotent. Raises UnknownConversation for an id the store does not hold (worded
        as `audit` and `replay` word it)."""
        try:
            return erase(self.store, self._stored_id(_conversation_argument("erase", conversation)), self.read_models)
        except UnknownConversation:
            raise unknown_conversation(self.store, conversation, describe_backend(self.store)) from None

    @_reads
    @_in_store_terms
    def activity(self, conversation: str, rules: str | None = None, *, after: str | None = None) -> tuple[SegmentActivity, ...]:
        """Returns the activity list the chat shows the editor, segment by segment (German labels
        of the amendment's table: "noch nicht ausgeführt", "nicht ausgeführt: nicht mehr
        freigegeben", "fehlgeschlagen", "Von dir abgelehnt: Behalten", …), read from the log under
        `rules` (default: the live rule set) with the same step reading as the run record.

        Raises UnknownConversation for an id the store does not hold.
        """
        events = self.events(_conversation_argument("activity", conversation))
        rule_set = rules or self.active_rules()
        state = activity.initial()
        for event in events:
            state = activity.apply(state, event, rule_set)
        return state.segments

    @_reads
    @_in_store_terms
    def audit(self, conversation: str, rules: str | None = None, chain: bool = False, *, after: str | None = None) -> Audit:
        """Returns the conversation's audit: its rows in order under `rules` (default: the live
        rule set) and, with `chain`, the verdict of its hash chain (`Audit.chain`; None on a
        store that keeps no chain). Raises UnknownConversation for an id the store does not hold."""
        events = self.events(_conversation_argument("audit", conversation))
        rule_set = rules or self.active_rules()
        rows: list[AuditRow] = audit_rows(events, rule_set)
        verdict = chain_verdict(self.store, self._stored_id(conversation)) if chain else None
        return Audit(conversation, rule_set, rows, verdict)

    @_reads
    @_in_store_terms
    def replay(
        self,
        conversation: str,
        rules: str | None = None,
        at: int | None = None,
        can_see_page: PageCheck = every_page,
        *,
        after: str | None = None,
    ) -> Replay:
        """Returns every turn of a stored conversation (only those of user message `at` if
        given), each as the model saw it then, under `rules` (default: the live rule set).
        Under the live rule set the latest turn is checked against the read
        models' (`Replay.differs`; also True where they lag and a read-only store keeps them
        from catching up). Raises UnknownConversation, TurnNotFound for an `at` that
        started no turn, UnknownRuleSet."""
        events = self.events(_conversation_argument("replay", conversation))
        active = self.active_rules()
        rule_set = resolve(rules or active).id
        if at is None:
            turns = replay_turns(events, rule_set, can_see_page)
            last = turns[-1] if turns else None
        else:  # one pass, building only the turns of message `at` and the latest (for the check)
            turns, last, started = turns_of(events, at, rule_set, can_see_page)
            if not turns:
                raise no_turn_among(at, started)
        differs = False
        if last is not None and rule_set == active:
            latest = self._live_turn(conversation, can_see_page)
            differs = latest is None or latest.to_json() != last.to_json()
        chain = chain_verdict(self.store, self._stored_id(conversation)) if differs else None
        return Replay(conversation, rule_set, tuple(turns), differs, chain)

    def _live_turn(self, conversation: str, can_see_page: PageCheck) -> TurnInput | None:
        """Returns the read models' latest turn; None where they lag behind the log and cannot
        catch up because the store was opened read-only (a SQLite archive, `reading=True`)."""
        try:
            return self.turn_input(conversation, can_see_page)
        except StoreUnusable:
            if not getattr(self.store.factory, "read_only", False):
                raise
            return None

    @_in_store_terms
    def rebuild(
        self,
        rules: str,
        progress: Progress | None = None,
        workers: int | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> RebuildReport:
        """Rebuilds the read models under `rules`, folding the log in `workers` processes
        (None: `ReadModels.rebuild_workers` chooses); see ReadModels.rebuild (an interrupt drops
        the half-built tables and raises RebuildInterrupted)."""
        return self.read_models.rebuild(rules, progress, workers, guard)

    @_in_store_terms
    def conversation_id(self, originator_id: str) -> str:
        """Returns the stored id of the conversation of UUID `originator_id` (as a rebuild's
        `unreadable` names it), as `verify` prints it; see ConversationStore.conversation_id."""
        return self.store.conversation_id(originator_id)

    @_in_store_terms
    def diff(self, rules: str) -> list[ConversationDiff]:
        """Returns the conversations whose record or notes would change under `rules` (nothing
        is switched); see ReadModels.diff."""
        return [d for d in self.read_models.diff(rules) if d.changed]

    # ------------------------------------------------------------ the master key

    @_in_store_terms
    def key_state(self) -> KeyState:
        """Returns whether a master key protects the store and how many data keys it keeps
        wrapped, unwrapped and erased."""
        return master_keys.state(self.store)

    @_in_store_terms
    def wrap_keys(self) -> KeyChange:
        """Binds the store to CHATRECORD_MASTER_KEY: wraps every unwrapped data key with it and
        writes its check row, in one transaction (see `adapters.service.master_key.wrap`)."""
        return master_keys.wrap(self.store)

    @_in_store_terms
    def rotate_keys(self, new_master_key: str) -> KeyChange:
        """Rewraps every data key with `new_master_key` (base64 of 32 bytes) in one transaction;
        the store then needs the new key (see `adapters.service.master_key.rotate`)."""
        return master_keys.rotate(self.store, new_master_key)

    @_in_store_terms
    def unwrap_keys(self) -> KeyChange:
        """Removes the store's master key: every data key stored unwrapped, the check row
        deleted, in one transaction (see `adapters.service.master_key.unwrap`)."""
        return master_keys.unwrap(self.store)

    @_reads
    @_in_store_terms
    def timeline(
        self,
        conversation: str,
        before: int | None = None,
        turns: int = PAGE_TURNS,
        rules: str | None = None,
        *,
        after: str | None = None,
    ) -> TimelinePage:
        """Returns one page of the conversation's timeline, newest turn first: the `turns` turns
        that start before version `before` (None: the newest), under `rules` (default: the live
        rule set). Reads the log's tail only (`adapters.service.timeline`). Raises
        UnknownConversation for an id the store does not hold."""
        name = _conversation_argument("timeline", conversation)
        page = timeline_page(self.store, self._stored_id(name), name, rules or self.active_rules(), before, turns)
        if page.version == 0:
            self.events(name)  # raises UnknownConversation, naming the store
        return page

    @_reads
    @_in_store_terms
    def overview(self, conversation: str, rules: str | None = None, *, after: str | None = None) -> list[OverviewPoint]:
        """Returns the overview of the whole conversation under `rules` (default: the live rule
        set): one point per message, segment, decision, card left undecided, edit, cut, erasure.
        The first request in this process folds the whole log; the fold is kept per
        (conversation, rule set), and a later request folds only the events appended since (one
        read of the log's head when there are none). Raises UnknownConversation."""
        return self._overview(conversation, rules).points

    @_reads
    @_in_store_terms
    def overview_drawn(
        self, conversation: str, draw: Callable[[list[OverviewPoint]], str], rules: str | None = None, *, after: str | None = None
    ) -> str:
        """Returns `draw(points)` of the conversation's overview (`overview`), kept with it: drawn
        again only after new events (`draw` is the key: `adapters.pages.overview_svg`)."""
        kept = self._overview(conversation, rules)
        drawn = kept.drawn.get(draw)
        if drawn is None:
            drawn = kept.drawn[draw] = draw(kept.points)
        return drawn

    def _overview(self, conversation: str, rules: str | None) -> KeptOverview:
        name = _conversation_argument("overview", conversation)
        rule_set = rules or self.active_rules()
        key = self._stored_id(name)
        uuid = conversation_uuid(key)
        head = next(iter(self.store.events.get(uuid, desc=True, limit=1)), None)
        if head is None:
            self.events(name)  # raises UnknownConversation
            return KeptOverview(0, audit_initial(), [])
        kept = self._overviews.get((key, rule_set))
        if kept is not None and kept.version == head.originator_version:
            return kept
        if kept is not None and kept.version < head.originator_version:
            after = list(self.store.events.get(uuid, gt=kept.version))
            fresh = kept.extend(after, rule_set) if after and after[0].originator_version == kept.version + 1 else None
        else:
            fresh = None
        if fresh is None:  # the first request, or a log that is not the one kept: the whole log
            fresh = KeptOverview.of(self.events(name), rule_set)
        with self._overviews_lock:  # the HTTP service's handlers run on several threads
            if len(self._overviews) >= 64 and (key, rule_set) not in self._overviews:
                self._overviews.pop(next(iter(self._overviews)))
            self._overviews[(key, rule_set)] = fresh
        return fresh

    @_reads
    @_in_store_terms
    def chain(self, conversation: str, full: bool = False, *, after: str | None = None) -> Verdict | None:
        """Returns the verdict of the conversation's hash chain, None on a store that keeps no
        chain. The first look in this process (and with `full`, and after a broken verdict)
        recomputes every hash; a later one starts from the head the last ok verdict verified
        (`adapters.store.verify.verify_after`: that head's event and hash unchanged, every hash
        after it recomputed), so it costs what was appended since, and says so (`Verdict.kept`).
        Raises UnknownConversation."""
        name = _conversation_argument("chain", conversation)
        key = self._stored_id(name)
        kept = self._chains.get(key) if not full else None
        if kept is not None and isinstance(self.store.recorder, ChainedRecorder):
            verdict: Verdict | None = verify_after(self.store.recorder, kept)
        else:
            verdict = chain_verdict(self.store, key)
        if verdict is None and isinstance(self.store.recorder, ChainedRecorder):
            self.events(name)  # raises UnknownConversation
        with self._overviews_lock:
            if verdict is not None and verdict.ok:
                if len(self._chains) >= 256 and key not in self._chains:
                    self._chains.pop(next(iter(self._chains)))
                self._chains[key] = verdict
            else:
                self._chains.pop(key, None)  # a broken chain is recomputed in full at the next look
        return verdict

    @_reads
    @_in_store_terms
    def turn_view(
        self,
        conversation: str,
        at: int,
        rules: str | None = None,
        can_see_page: PageCheck = every_page,
        *,
        after: str | None = None,
    ) -> TurnView:
        """Returns what the model was sent at the turn of user message `at` (its latest turn
        when retried), exactly as `replay --at` gives it, under `rules`, with the differences
        from the same turn under the live rule set. Raises UnknownConversation, TurnNotFound."""
        events = self.events(_conversation_argument("turn_view", conversation))
        active = self.active_rules()
        rule_set = resolve(rules or active).id
        chosen = turn_at(events, at, rule_set, can_see_page)
        base = chosen if rule_set == active else turn_at(events, at, active, can_see_page)
        return turn_view(chosen, rule_set, base, active)

    @_in_store_terms
    def health(self) -> int:
        """Returns the position of the newest stored event: the store answers. Raises
        StoreUnusable when it does not."""
        return self.store.max_notification_id()


def _lines_argument(call: str, lines: object) -> None:
    """Raises TypeError when `lines` is one str or bytes, which iterates as characters or bytes."""
    if isinstance(lines, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"{call}: lines must be an iterable of lines (each a str or bytes), not one "
            f"{type(lines).__name__}; split a text into its lines first (text.splitlines())"
        )


def _conversation_argument(call: str, conversation: object) -> str:
    """Returns `conversation` if it is a str (a conversation's id); raises TypeError naming the
    argument if not."""
    if not isinstance(conversation, str):
        raise TypeError(f"{call}: conversation must be a conversation's id as a str, not {type(conversation).__name__}")
    return conversation


def _required(line: ParsedLine | None, source: str, line_no: int) -> ParsedLine:
    if line is None:
        raise InvalidInput(source, line_no, "(line)", "is blank; expected one JSON object")
    return line


def _read_wait() -> float:
    with store_errors():
        return read_wait()
