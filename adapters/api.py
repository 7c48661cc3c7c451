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
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path
from threading import Lock
from typing import TYPE_CHECKING, Any

from adapters.backends import StoreFactory
from adapters.backends.replicas import check_position, replayed, write_position
from adapters.backends.settings import DEFAULT_DB, BadSetting, StoreUnusable, describe_backend, read_store_env, store_errors
from adapters.bootstrap import build_store, open_store, read_models
from adapters.ingest import ParsedLine, bounded_lines, json_problem
from adapters.ingest.names import AT_PATTERN, parse_at
from adapters.service.batched_ingest import BATCH_LINES
from adapters.service.chain_looks import ChainLooks
from adapters.service.common import OpenedStore, conversation_argument, in_store_terms, read_wait_setting, reads
from adapters.service.conversation_reads import ConversationReads
from adapters.service.conversations import (
    CURSOR_PATTERN,
    LIST_LIMIT_MAX,
    STATUSES,
    BadCursor,
    BadFilter,
    ConversationPage,
    decode_cursor,
    iso,
)
from adapters.service.erase import Erasure
from adapters.service.export import Export, NoSuchMessage
from adapters.service.idempotent import FirstRun, KeyInFlight, KeyReused, Replayed, Result
from adapters.service.line_writes import LineWrites
from adapters.service.master_key import NEW_MASTER_KEY_VARIABLE, KeyChange
from adapters.service.overviews import Overviews
from adapters.service.record_lines import IngestReport, Recorded, VersionMismatch
from adapters.service.replay import (
    DEMO_CONVERSATION,
    DEMO_FILE,
    Audit,
    Demo,
    EmptyInput,
    Replay,
    TurnNotFound,
    UnreadableFile,
    demo_lines,
    replay_file,
    replay_lines,
)
from adapters.service.replay_stream import (
    REPLAY_CURSOR_PATTERN,
    REPLAY_LIMIT_MAX,
    BadReplayCursor,
    ReplayForm,
    ReplayStream,
    ReplayStreams,
    TurnRange,
    replay_cursor,
    replay_start,
    stream_file,
    stream_lines,
)
from adapters.service.reproduce import (
    ConversationErased,
    ModelNotSet,
    ModelSettings,
    ModelUnusable,
    Report,
    Reproduction,
    StreamChains,
    default_rule_sets,
    reproduce,
    reproductions,
    stream_chains,
)
from adapters.service.store_upkeep import Progress, StoreUpkeep
from adapters.service.timeline import (
    PAGE_TURNS,
    OverviewPoint,
    TimelinePage,
    TurnView,
    newest_turns,
    timeline_page,
    turn_at,
    turn_view,
)
from adapters.service.usage import (
    USAGE_CURSOR_PATTERN,
    USAGE_LIMIT_MAX,
    BadUsageCursor,
    Usage,
    UsageNeedsRebuild,
    UsagePage,
    decode_usage_cursor,
)
from adapters.store.application import ConversationStore
from adapters.store.commands import HandleResult
from adapters.store.idempotency import MAX_KEY, body_hash
from adapters.store.keys import KeyState
from adapters.store.verify import Verdict, head_line
from adapters.views.readmodels import ReadModels
from adapters.views.rebuild import MOST_WORKERS, RebuildInterrupted, RebuildReport
from adapters.views.rule_diff import ConversationDiff
from adapters.views.usage_rows import BY, By
from adapters.views.verify_rows import RowsVerdict
from domain.events import ConversationEvent
from projections.activity import SegmentActivity
from projections.overview import Overview
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn import TurnInput, build_turn_input
from projections.turn_notes import PlacedNote, TurnNotes, apply_notes

if TYPE_CHECKING:
    from adapters.service.trace_export import Sent

log = logging.getLogger("chatrecord")

__all__ = ["DEMO_CONVERSATION", "DEMO_FILE", "Audit", "Chatrecord", "Demo", "IngestReport", "PlacedNote", "Recorded", "Replay"]
__all__ += ["TurnNotes", "VersionMismatch", "apply_notes", "demo_lines", "replay_file", "replay_lines"]
# what the entrypoints (cli/, http/, pages/) take from the layers below, which they do not import
__all__ += ["REPLAY_CURSOR_PATTERN", "REPLAY_LIMIT_MAX", "BadReplayCursor", "ReplayStream", "TurnRange", "replay_cursor"]
__all__ += ["ReplayForm", "replay_start", "stream_file", "stream_lines"]
__all__ += ["AT_PATTERN", "BATCH_LINES", "CURSOR_PATTERN", "DEFAULT_DB", "LIST_LIMIT_MAX", "MAX_KEY", "MOST_WORKERS"]
__all__ += ["NEW_MASTER_KEY_VARIABLE", "OverviewPoint", "ParsedLine", "TimelinePage", "TurnView", "Verdict", "KeyChange"]
__all__ += ["BY", "USAGE_CURSOR_PATTERN", "USAGE_LIMIT_MAX", "BadUsageCursor", "By", "Usage", "UsageNeedsRebuild"]
__all__ += ["UsagePage", "decode_usage_cursor"]
__all__ += ["KeyState", "Replayed", "body_hash", "bounded_lines", "decode_cursor", "head_line", "iso", "json_problem"]
__all__ += ["newest_turns", "open_store", "parse_at", "store_errors", "turn_view"]
__all__ += ["BadCursor", "BadSetting", "EmptyInput", "KeyInFlight", "KeyReused", "NoSuchMessage", "RebuildInterrupted"]
__all__ += ["StoreUnusable", "TurnNotFound", "UnreadableFile", "BadFilter"]  # errors, each a domain.errors.ChatrecordError
__all__ += ["STATUSES"]
__all__ += [
    "ConversationErased",
    "ModelNotSet",
    "ModelSettings",
    "ModelUnusable",
    "Report",
    "Reproduction",
    "StreamChains",
]  # issue 40


class Chatrecord:
    """A conversation store with its read models: every use case the entrypoints call, each
    asked of the use cases' object of its job (`LineWrites`, `ConversationReads`, `StoreUpkeep`).

    `store` defaults to `adapters.bootstrap.open_store()` (SQLite `CHATRECORD_DB`, or PostgreSQL
    when `CHATRECORD_DATABASE_URL` is set). `source_name` names `record`'s lines in errors.
    Opening it raises BadSetting for a setting it cannot use and StoreUnusable, in the words the
    command line prints, for a database that cannot be opened (a file on a read-only file
    system, a server that does not answer). `reading=True` (a caller that only reads: audit,
    verify, replay, activity) opens a SQLite file it cannot write read-only, so an archive on a
    read-only file system can be inspected (`open_store(reading=True)`).

    Every method raises StoreUnusable (a ChatrecordError, one line naming what to do) when the
    database cannot be used: a server that stopped answering, a file another process kept
    locked. Nothing of the call is stored then; the next call tries the database again.

    **Standbys.** `read_store` (default: the store on CHATRECORD_READ_DATABASE_URL where it is
    set, `read_store_env`, opened by the first read that needs it) is where the methods that
    only read are served: the turn read, replay, audit, activity, the list, export, verify, the
    timeline. Writes, `init_store`, `rebuild`,
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
        self._read_env: dict[str, str] | None = None
        """The reading store's env (CHATRECORD_READ_DATABASE_URL), until `_standby` opens it."""
        if store is None:
            with store_errors():  # a file that cannot be opened, a server that does not answer
                self._read_env = read_store_env() if read_store is None else None
                # a caller that only reads, with standbys: the primary is opened when first needed
                elsewhere = read_store is not None or self._read_env is not None
                store = None if reading and elsewhere else open_store(reading=reading)
        self._primary = OpenedStore(store, lambda: open_store(reading=reading), read_models)
        """The store written to, opened on first use where a caller that only reads has a reading store."""
        self._opened_standby: Chatrecord | None = Chatrecord(read_store, source_name) if read_store is not None else None
        """The same use cases on the reading store (it has none of its own), once opened (`_standby`)."""
        self._standby_lock = Lock()
        self.read_wait = read_wait if read_wait is not None else read_wait_setting()
        looks = ChainLooks(lambda: self._primary.store)
        """The looks at the store's hash chains, with the verdicts this process keeps (`chain`)."""
        self._writes = LineWrites(self._primary, source_name, self.position)
        self._reads = ConversationReads(self._primary, looks)
        self._upkeep = StoreUpkeep(self._primary, looks)
        self._streams = ReplayStreams(self._reads, looks)

    @property
    def store(self) -> ConversationStore:
        """The store written to (the primary), opened on first use where a caller that only reads
        (`reading=True`) has a reading store: such a caller works while the primary is down."""
        return self._primary.store

    @property
    def source_name(self) -> str:
        """What names `record`'s lines in errors."""
        return self._writes.source_name

    def _stored_id(self, conversation: str) -> str:
        """Returns the key `conversation` is stored under (`OpenedStore.stored_id`)."""
        return self._primary.stored_id(conversation)

    @property
    def _reads_elsewhere(self) -> bool:
        """Whether a reading store is set (opened or not): a write then answers with its position."""
        return self._opened_standby is not None or self._read_env is not None

    @property
    def _standby(self) -> Chatrecord | None:
        """The use cases on the reading store, None without one. The store is opened on the first
        read that needs it, so a command that never reads there (`init`, a write) works on a
        standby the store's tables have not reached yet; a read there says so in one line
        (StoreUnusable, `store_problem`)."""
        if self._opened_standby is None and self._read_env is not None:
            with self._standby_lock:
                if self._opened_standby is None:
                    with store_errors(self._read_env):
                        self._opened_standby = Chatrecord(build_store(self._read_env), self.source_name)
        return self._opened_standby

    @property
    def read_models(self) -> ReadModels:
        """The store's read models, built with it by the composition root (`adapters.bootstrap`).
        Raises NoReadModels for a store built without them."""
        return self._primary.read_models

    def close(self) -> None:
        """Closes the store's connections (and the reading store's)."""
        self._primary.close()
        if self._opened_standby is not None:
            self._opened_standby.close()

    def position(self) -> str | None:
        """Returns the read-after position of every write this store committed so far (the
        primary's WAL insert position, text such as '0/3016040', opaque to the caller; one
        statement), None without a reading store (`adapters.backends.replicas.write_position`)."""
        if not self._reads_elsewhere:
            return None
        with store_errors(self.store):
            return write_position(self.store)

    def _reader(self, after: str | None) -> Chatrecord:
        """Returns the Chatrecord a read given `after` runs on: this one without a reading store;
        else the standby's, where `after` is None or the standby replays it within `read_wait`
        seconds; else `_on_primary` (also where the standby cannot be opened: `after` is on the
        primary). Raises ValueError for an `after` no write returned, StoreUnusable for a reading
        store that cannot be opened where `after` is None (`_standby`)."""
        if not self._reads_elsewhere:
            return self
        if after is None:
            return self._standby or self
        position = check_position(after)
        try:
            standby = self._standby or self
        except StoreUnusable:  # a standby without the tables yet, or not answering: the primary has the write
            return self._on_primary
        with store_errors(standby.store):
            caught_up = replayed(standby.store, position, self.read_wait)
        return standby if caught_up else self._on_primary

    @cached_property
    def _on_primary(self) -> Chatrecord:
        """This Chatrecord reading on the primary: a copy sharing its store (with its read models) and
        locks, without the reading store (so what it calls reads there too)."""
        pinned = copy.copy(self)
        pinned._opened_standby, pinned._read_env = None, None
        pinned.__dict__.pop("_overviews", None)  # its own, reading its events on the primary
        return pinned

    @classmethod
    def init_store(cls) -> tuple[bool, str]:
        """Opens the configured store, making its tables and its read models' where they are
        missing (the read models are built with the store, `adapters.bootstrap`), closes it
        again, and returns whether this created the store (a SQLite file that did not exist,
        PostgreSQL tables that were missing) and the store's description."""
        chatrecord = cls()
        try:
            factory = chatrecord.store.factory
            return isinstance(factory, StoreFactory) and bool(factory.created), describe_backend(chatrecord.store)
        finally:
            chatrecord.close()

    @staticmethod
    def upkeep_warning() -> str | None:
        """Opens the configured store, returns what its database's settings warn of for its
        upkeep (`StoreFactory.upkeep_warning`: PostgreSQL's autovacuum off), None when nothing,
        and closes it again."""
        store = open_store()
        try:
            factory = getattr(store, "factory", None)
            return factory.upkeep_warning() if isinstance(factory, StoreFactory) else None
        finally:
            store.close()

    @staticmethod
    def prepare_service() -> str:
        """Opens the configured store once, making its tables (the read models' with the store, the
        idempotency keys' here: by one process, before the service's workers start), closes it
        again, and returns its description."""
        store = open_store()
        try:
            store.idempotency_keys  # noqa: B018 - made here, on first use
            return describe_backend(store)
        finally:
            store.close()

    @in_store_terms
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
        broken = self.stored_break(DEMO_CONVERSATION, after=self.position())
        return Demo(report, describe_backend(self.store), active, now, other, broken)

    @reads
    @in_store_terms
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
        name = conversation_argument("timeline", conversation)
        page = timeline_page(self.store, self._stored_id(name), name, rules or self.active_rules(), before, turns)
        if page.version == 0:
            self.events(name)  # raises UnknownConversation, naming the store
        return page

    @reads
    @in_store_terms
    def overview(self, conversation: str, rules: str | None = None, *, after: str | None = None) -> list[OverviewPoint]:
        """Returns the overview of the whole conversation under `rules` (default: the live rule
        set): one point per message, segment, decision, card left undecided, edit, cut, erasure.
        The first request in this process folds the whole log; the fold is kept per
        (conversation, rule set), and a later request folds only the events appended since (one
        read of the log's head when there are none). Raises UnknownConversation."""
        return self._overviews.points(conversation_argument("overview", conversation), rules)

    @reads
    @in_store_terms
    def overview_drawn(
        self,
        conversation: str,
        draw: Callable[[list[OverviewPoint] | Overview], str],
        rules: str | None = None,
        *,
        after: str | None = None,
    ) -> str:
        """Returns `draw(overview)` of the conversation's overview, kept per version: drawn
        again only after new events (`draw` is the key: `adapters.pages.overview_svg`). Under
        the live rule set it draws the overview read model (`projections.overview.Overview`,
        `adapters.views.overview_rows`: one row read, and the events since its last fold
        folded, also in the first request after a start); under another rule set, or where the
        live generation has no overview tables, the points of the kept fold (`overview`)."""
        return self._overviews.drawn(conversation_argument("overview", conversation), draw, rules)

    @cached_property
    def _overviews(self) -> Overviews:
        """The overviews of this Chatrecord's store, kept in this process (`adapters.service.overviews`)."""
        return Overviews(self.store, lambda: self.read_models, self.events, self.active_rules)

    @reads
    @in_store_terms
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
        events = self.events(conversation_argument("turn_view", conversation))
        active = self.active_rules()
        rule_set = resolve(rules or active).id
        chosen = turn_at(events, at, rule_set, can_see_page)
        base = chosen if rule_set == active else turn_at(events, at, active, can_see_page)
        return turn_view(chosen, rule_set, base, active)

    @in_store_terms
    def health(self) -> int:
        """Returns the position of the newest stored event: the store answers. Raises
        StoreUnusable when it does not."""
        return self.store.max_notification_id()

    # ------------------------------------------------------------ the writes (`LineWrites`)

    def record(self, line: Mapping[str, Any] | str | bytes, follows: int | None = None) -> HandleResult:
        """Stores one input line (a dict, or its JSON text); see `LineWrites.record`."""
        return self._writes.record(line, follows)

    def record_lines(self, lines: Iterable[str | bytes], source: str, follows: int | None = None) -> Recorded:
        """Stores the lines of one conversation all or nothing; see `LineWrites.record_lines`."""
        return self._writes.record_lines(lines, source, follows)

    def run_once(
        self, key: str, fingerprint: str, work: Callable[[], tuple[Result, str]], also: Collection[str] = ()
    ) -> FirstRun[Result] | Replayed:
        """Runs `work` once for the Idempotency-Key `key`; see `LineWrites.run_once`."""
        return self._writes.run_once(key, fingerprint, work, also)

    def ingest(
        self,
        lines: Iterable[str | bytes],
        source: str,
        skip_bad: bool = False,
        batch_lines: int = BATCH_LINES,
        progress: Callable[[IngestReport], object] | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> IngestReport:
        """Stores every line of `lines` in batches and returns the report; see `LineWrites.ingest`."""
        return self._writes.ingest(lines, source, skip_bad, batch_lines, progress, guard)

    # ------------------------------------------------------------ the reads (`ConversationReads`)

    @reads
    def conversations(
        self,
        limit: int = 50,
        cursor: str | None = None,
        since: datetime | None = None,
        *,
        until: datetime | None = None,
        owner: int | None = None,
        search: str | None = None,
        status: tuple[str, ...] = (),
        after: str | None = None,
    ) -> ConversationPage:
        """Returns one page of the store's conversations, filtered; see `ConversationReads.conversations`."""
        return self._reads.conversations(limit, cursor, since, until=until, owner=owner, search=search, status=status)

    @reads
    def usage(
        self,
        by: By = "conversation",
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        *,
        after: str | None = None,
    ) -> UsagePage:
        """Returns one page of the usage audit (tokens, cost, model and tool calls, failed and
        refused calls, time) summed `by` conversation, owner or day over `since`–`until` (the
        chat's time), and the range's total; see `ConversationReads.usage`."""
        return self._reads.usage(by, since, until, limit, cursor)

    @reads
    def export(self, conversation: str, upto: int | None = None, *, after: str | None = None) -> Export:
        """Returns the conversation as the chat's JSON Lines objects; see `ConversationReads.export`."""
        return self._reads.export(conversation, upto)

    @reads
    def active_rules(self, *, after: str | None = None) -> str:
        """Returns the rule set of the live read models."""
        return self._reads.active_rules()

    @reads
    def events(self, conversation: str, *, after: str | None = None) -> list[ConversationEvent]:
        """Returns the conversation's log; see `ConversationReads.events`."""
        return self._reads.events(conversation)

    @reads
    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page, *, after: str | None = None) -> TurnInput:
        """Returns the input of the conversation's latest turn; see `ConversationReads.turn_input`."""
        return self._reads.turn_input(conversation, can_see_page)

    @reads
    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page, *, after: str | None = None) -> TurnNotes:
        """Returns what the chat adds to its transcript for the next model call; see
        `ConversationReads.turn_notes`."""
        return self._reads.turn_notes(conversation, can_see_page)

    @reads
    def activity(self, conversation: str, rules: str | None = None, *, after: str | None = None) -> tuple[SegmentActivity, ...]:
        """Returns the activity list the chat shows the editor; see `ConversationReads.activity`."""
        return self._reads.activity(conversation, rules)

    @reads
    def audit(self, conversation: str, rules: str | None = None, chain: bool = False, *, after: str | None = None) -> Audit:
        """Returns the conversation's audit; see `ConversationReads.audit`."""
        return self._reads.audit(conversation, rules, chain)

    @reads
    def replay(
        self,
        conversation: str,
        rules: str | None = None,
        at: int | None = None,
        can_see_page: PageCheck = every_page,
        *,
        after: str | None = None,
    ) -> Replay:
        """Returns every turn of a stored conversation (only those of user message `at` if given),
        each as the model saw it then; see `ConversationReads.replay`."""
        return self._reads.replay(conversation, rules, at, can_see_page)

    @reads
    def replay_stream(
        self,
        conversation: str,
        rules: str | None = None,
        can_see_page: PageCheck = every_page,
        *,
        form: ReplayForm = "turns",
        span: TurnRange | None = None,
        after: str | None = None,
    ) -> ReplayStream:
        """Returns the turns of a stored conversation that `span` picks, streamed with flat
        memory; see `ReplayStreams.replay_stream`."""
        return self._streams.replay_stream(conversation, rules, can_see_page, form=form, span=span)

    @reads
    def stored_break(self, conversation: str, *, after: str | None = None) -> Verdict | None:
        """Returns the break of the conversation's hash chain the store keeps, None where none
        is; see `ConversationReads.stored_break`."""
        return self._reads.stored_break(conversation)

    @reads
    def chain(self, conversation: str, full: bool = False, *, after: str | None = None, by: str = "the server") -> Verdict | None:
        """Returns the verdict of the conversation's hash chain; see `ConversationReads.chain`."""
        return self._reads.chain(conversation, full, by=by)

    def trace_json(self, conversation: str, rules: str | None = None, with_texts: bool = False) -> str:
        """Returns a stored conversation's trace as OTLP/JSON (`adapters.service.trace_export`;
        OpenTelemetry is loaded on the first call). Raises UnknownConversation."""
        from adapters.service import trace_export  # here: OpenTelemetry loads only for traces

        return trace_export.otlp_json(self, conversation, rules, with_texts)

    def push_traces(
        self, conversations: Sequence[str], endpoint: str | None, rules: str | None = None, with_texts: bool = False
    ) -> list[Sent]:
        """Sends the traces of `conversations` (every stored one if empty) over OTLP/HTTP to
        `endpoint` (None: the OpenTelemetry environment's) and returns what was sent of each
        (`adapters.service.trace_export.push`). Raises NoEndpoint or UnknownConversation before
        anything is sent, PushFailed when the endpoint refuses."""
        from adapters.service import trace_export  # here: OpenTelemetry loads only for traces

        return trace_export.push(self, conversations, endpoint, rules, with_texts)

    # ------------------------------------------------------------ the upkeep (`StoreUpkeep`)

    @reads
    def verify(
        self,
        conversation: str | None = None,
        against: Path | None = None,
        record: str | None = None,
        *,
        after: str | None = None,
    ) -> Iterator[Verdict]:
        """Yields the verdict of each conversation's hash chain; see `StoreUpkeep.verify`."""
        return self._upkeep.verify(conversation, against, record)

    @reads
    def verify_rows(self, conversation: str | None = None, *, after: str | None = None) -> Iterator[RowsVerdict]:
        """Yields, per conversation, whether its read-model rows are the fold of its log; see
        `StoreUpkeep.verify_rows`."""
        return self._upkeep.verify_rows(conversation)

    def upgrade_chains(self, conversation: str | None = None) -> list[Verdict]:
        """Chains the conversations stored before the hash chain existed; see `StoreUpkeep.upgrade_chains`."""
        return self._upkeep.upgrade_chains(conversation)

    def erase(self, conversation: str) -> Erasure:
        """Erases the conversation's free texts and scrubs its read models; see `StoreUpkeep.erase`."""
        return self._upkeep.erase(conversation)

    def rebuild(
        self,
        rules: str,
        progress: Progress | None = None,
        workers: int | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> RebuildReport:
        """Rebuilds the read models under `rules`; see `StoreUpkeep.rebuild`."""
        return self._upkeep.rebuild(rules, progress, workers, guard)

    def conversation_id(self, originator_id: str) -> str:
        """Returns the stored id of the conversation of UUID `originator_id`; see `StoreUpkeep.conversation_id`."""
        return self._upkeep.conversation_id(originator_id)

    def diff(self, rules: str) -> list[ConversationDiff]:
        """Returns the conversations whose record or notes would change under `rules`; see `StoreUpkeep.diff`."""
        return self._upkeep.diff(rules)

    def description(self) -> str:
        """Returns what the store is, as the commands name it: `SQLite file …`, `PostgreSQL …`."""
        return self._upkeep.description()

    def chain_kind(self) -> str | None:
        """Returns what `verify` says of a keyed hash chain; see `StoreUpkeep.chain_kind`."""
        return self._upkeep.chain_kind()

    def key_state(self) -> KeyState:
        """Returns whether a master key protects the store and how many data keys it keeps; see
        `StoreUpkeep.key_state`."""
        return self._upkeep.key_state()

    def wrap_keys(self) -> KeyChange:
        """Binds the store to CHATRECORD_MASTER_KEY; see `StoreUpkeep.wrap_keys`."""
        return self._upkeep.wrap_keys()

    def rotate_keys(self, new_master_key: str) -> KeyChange:
        """Rewraps every data key with `new_master_key`; see `StoreUpkeep.rotate_keys`."""
        return self._upkeep.rotate_keys(new_master_key)

    def unwrap_keys(self) -> KeyChange:
        """Removes the store's master key; see `StoreUpkeep.unwrap_keys`."""
        return self._upkeep.unwrap_keys()

    @in_store_terms
    def reproduce(
        self, conversation: str, rules: list[str] | None = None, turn: int | None = None, n: int = 5, **model: Any
    ) -> Report:
        """Sends the turn of user message `turn` (default: the latest) `n` times under each rule set of `rules` (default:
        transcript-only and the live one) to a model and keeps each complete answer: `adapters.service.reproduce.reproduce`
        (`model=ModelSettings(…)`, default the environment's; `judge=` a judging model)."""
        name = conversation_argument("reproduce", conversation)
        chosen = rules or default_rule_sets(self.active_rules())
        return reproduce(self.store, lambda rule_set, at: self.replay(name, rule_set, at), name, chosen, turn=turn, n=n, **model)

    @in_store_terms
    def reproduction_chains(self, conversation: str) -> StreamChains:
        """Returns the verdict on the hash chains of `conversation`'s reproductions (`verify`)."""
        return stream_chains(self.store, self._stored_id(conversation))

    @in_store_terms
    def reproductions(self, conversation: str) -> list[Reproduction]:
        """Returns the kept reproductions of `conversation`, oldest first (`[erased]` texts once it was erased)."""
        return reproductions(self.store, self._stored_id(conversation_argument("reproductions", conversation)))
