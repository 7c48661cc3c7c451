"""The service layer: every use case of chatrecord, for the CLI, the Python API and HTTP.

    from adapters.api import Chatrecord

    record = Chatrecord()                          # the store the environment configures
    record.record({"type": "user_message", ...})   # one line of the chat's input (docs/spec-map.md, D7)
    notes = record.turn_notes("conv-demo-seo", can_see_page=lambda page: page != 13)
    notes.page_line, notes.notes                   # what the chat adds to its transcript
    turn = record.turn_input("conv-demo-seo")      # or the whole model input
    turn.model_messages()                          # [{"role": "system", "content": ...}, ...]

With CHATRECORD_READ_DATABASE_URL set, reads are served by the standbys. Handing back a write's
`read_after` (`record.turn_notes(conv, after=result.read_after)`) keeps a read from going back in time
(docs/scaling.md). Every line goes through one path (`adapters.service.record_lines`), so a bad or
refused line reads the same everywhere. A turn read never reads a record older than its log."""

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
from adapters.ingest.depth import beyond_the_reader
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
from adapters.service.log_forward import forward
from adapters.service.master_key import NEW_MASTER_KEY_VARIABLE, KeyChange
from adapters.service.model_endpoint import ModelNotSet, ModelSettings
from adapters.service.overviews import Overviews
from adapters.service.raw_events import RAW_PAGE, RawPage, page_start, raw_page
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
    newest_turns_under,
    timeline_page,
    turn_at,
    turn_view,
)
from adapters.service.timeline_jump import Location, NotOnTimeline, locate
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
from domain.events import ConversationEvent, conversation_uuid
from projections.activity import SegmentActivity
from projections.overview import Overview
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.rules_diff import TurnDiff, rules_diff
from projections.turn import TurnInput, build_turn_input
from projections.turn_compare import Compared, TurnMissing, compare_turns
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
__all__ += [
    "KeyState",
    "Replayed",
    "beyond_the_reader",
    "body_hash",
    "bounded_lines",
    "decode_cursor",
    "head_line",
    "iso",
    "json_problem",
]
__all__ += ["newest_turns", "newest_turns_under", "open_store", "parse_at", "store_errors", "turn_view"]
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
__all__ += ["RAW_PAGE", "Compared", "Location", "NotOnTimeline", "RawPage", "TurnDiff", "TurnMissing", "page_start"]


class Chatrecord:
    """A conversation store with its read models: every use case the entrypoints call.

    Each method is asked of its job's object (`LineWrites`, `ConversationReads`, `StoreUpkeep`). `store`
    defaults to `open_store()`: SQLite `CHATRECORD_DB`, or PostgreSQL when `CHATRECORD_DATABASE_URL` is
    set. `source_name` names `record`'s lines in errors. Opening raises BadSetting for an unusable
    setting. Opening raises StoreUnusable, in the CLI's words, for a database that cannot be opened.
    `reading=True` opens a SQLite file it cannot write read-only.

    Every method raises StoreUnusable (one line naming what to do) when the database cannot be used.
    Nothing of the call is stored then; the next call tries again.

    **Standbys.** `read_store` (default: on CHATRECORD_READ_DATABASE_URL, opened at the first read)
    serves the read-only methods. Writes, `init_store`, `rebuild`, `diff`, `erase`, the key commands and
    `health` stay on `store`. With a reading store, a write answers with `read_after` (`position()`).
    Each read takes keyword `after=`. Given a position, the standby answers once it has replayed it,
    within `read_wait` seconds (CHATRECORD_READ_WAIT_MS, default 1000 ms); else the primary answers.
    Without `after`, a standby may lag. Without a reading store, `read_after` is None and `after` changes
    nothing."""

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
        """The store written to (the primary). Opened on first use where a read-only caller has a reading
        store, so such a caller works while the primary is down."""
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
        """The use cases on the reading store, None without one. Opened on the first read there, so `init`
        and writes work before the standby has the tables. A read there then fails in one line
        (StoreUnusable)."""
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
        """Returns the read-after position of every write committed so far: the primary's WAL insert
        position, opaque text such as '0/3016040'. None without a reading store."""
        if not self._reads_elsewhere:
            return None
        with store_errors(self.store):
            return write_position(self.store)

    def _reader(self, after: str | None) -> Chatrecord:
        """Returns the Chatrecord a read given `after` runs on. This one without a reading store. Else the
        standby's, where `after` is None or replayed within `read_wait` seconds. Else `_on_primary`, also
        where the standby cannot be opened. Raises ValueError for an `after` no write returned. Raises
        StoreUnusable for an unopenable reading store where `after` is None."""
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
        """This Chatrecord reading on the primary: a copy sharing its store, read models and locks, without
        the reading store."""
        pinned = copy.copy(self)
        pinned._opened_standby, pinned._read_env = None, None
        pinned.__dict__.pop("_overviews", None)  # its own, reading its events on the primary
        return pinned

    @classmethod
    def init_store(cls) -> tuple[bool, str]:
        """Opens the configured store, making its and its read models' tables where missing, and closes it.
        Returns whether this created the store, and its description."""
        chatrecord = cls()
        try:
            factory = chatrecord.store.factory
            return isinstance(factory, StoreFactory) and bool(factory.created), describe_backend(chatrecord.store)
        finally:
            chatrecord.close()

    @staticmethod
    def upkeep_warning() -> str | None:
        """Opens the configured store and returns its database's upkeep warning
        (`StoreFactory.upkeep_warning`), None when nothing; closes it again."""
        store = open_store()
        try:
            return store.factory.upkeep_warning() if isinstance(store.factory, StoreFactory) else None
        finally:
            store.close()

    @staticmethod
    def prepare_service() -> str:
        """Opens the configured store once, making its tables and the idempotency keys' before the workers
        start; closes it and returns its description."""
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
        """Returns one page of the timeline, newest turn first: `turns` turns starting before version
        `before` (None: newest), under `rules` (default: live). Reads the log's tail only. Raises
        UnknownConversation for an id the store does not hold."""
        name = conversation_argument("timeline", conversation)
        page = timeline_page(self.store, self._stored_id(name), name, rules or self.active_rules(), before, turns)
        if page.version == 0:
            self.events(name)  # raises UnknownConversation, naming the store
        return page

    @reads
    @in_store_terms
    def overview(self, conversation: str, rules: str | None = None, *, after: str | None = None) -> list[OverviewPoint]:
        """Returns the whole conversation's overview under `rules` (default: live): a point per message,
        segment, decision, undecided card, edit, cut, erasure. The fold is kept per (conversation, rule
        set); later requests fold only new events. Raises UnknownConversation."""
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
        """Returns `draw(overview)` of the conversation's overview, kept per version; `draw` is the key.
        Under the live rule set it draws the overview read model (`views.overview_rows`). Under another
        rule set, or without overview tables, it draws the kept fold's points (`overview`)."""
        return self._overviews.drawn(conversation_argument("overview", conversation), draw, rules)

    @reads
    @in_store_terms
    def locate(self, conversation: str, to: str, *, after: str | None = None) -> Location:
        """Returns where `to` (a user message's number, `e12` for an event's version, or a
        segment's id) is on the conversation's timeline: the page and the anchor there
        (`adapters.service.timeline_jump`). Raises UnknownConversation, NotOnTimeline."""
        name = conversation_argument("locate", conversation)
        key = self._stored_id(name)
        if not self.store.recorder.select_events(conversation_uuid(key), limit=1):
            self.events(name)  # raises UnknownConversation, naming the store
        return locate(self.store, key, to)

    @reads
    @in_store_terms
    def raw_events(self, conversation: str, first: int = 1, *, after: str | None = None) -> RawPage:
        """Returns the page of the conversation's events as stored, with their chain links,
        that holds version `first` (`adapters.service.raw_events`; RAW_PAGE events a page).
        Raises UnknownConversation."""
        name = conversation_argument("raw_events", conversation)
        page = raw_page(self.store, self._stored_id(name), page_start(first))
        if page.last == 0:
            self.events(name)  # raises UnknownConversation, naming the store
        return page

    @reads
    @in_store_terms
    def rules_diff(
        self,
        conversation: str,
        other: str,
        base: str | None = None,
        start: int = 0,
        count: int = PAGE_TURNS,
        *,
        after: str | None = None,
    ) -> tuple[list[TurnDiff], bool]:
        """Returns the turns `start`…`start + count - 1` of the conversation read under rule set
        `other` beside `base` (default: the live rule set), each with the notes added and
        dropped and the page line where it differs, and whether a later turn exists
        (`projections.rules_diff`; the log read forward up to the turn after them). Raises
        UnknownConversation."""
        name = conversation_argument("rules_diff", conversation)
        key = self._stored_id(name)
        if not self.store.recorder.select_events(conversation_uuid(key), limit=1):
            self.events(name)  # raises UnknownConversation, naming the store
        rules = resolve(base or self.active_rules()).id, resolve(other).id
        return rules_diff(forward(self.store, key), *rules, start=start, limit=count)

    @reads
    @in_store_terms
    def compare_turns(
        self, conversation: str, first: int, second: int, rules: str | None = None, *, after: str | None = None
    ) -> Compared:
        """Returns the turn of user message `second` as what changed since the turn of `first`,
        under `rules` (default: the live rule set; `projections.turn_compare`), from the log up to
        the later of the two (`ConversationReads.events_to_turns`). Raises UnknownConversation,
        TurnMissing."""
        events = self._reads.events_to_turns(conversation_argument("compare_turns", conversation), (first, second))
        return compare_turns(events, resolve(rules or self.active_rules()).id, first, second)

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
        """Returns what the model was sent at the latest turn of user message `at`, as `replay --at` gives
        it, under `rules`, from the log up to that turn (`ConversationReads.events_to_turns`). Includes
        the differences from the live rule set. Raises UnknownConversation, TurnNotFound."""
        events = self._reads.events_to_turns(conversation_argument("turn_view", conversation), (at,))
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
    def export(
        self, conversation: str, upto: int | None = None, *, with_reproductions: bool = False, after: str | None = None
    ) -> Export:
        """Returns the conversation as the chat's JSON Lines objects (and its reproduction
        records if asked); see `ConversationReads.export`."""
        return self._reads.export(conversation, upto, with_reproductions)

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
        """Returns every turn of a stored conversation (only user message `at`'s if given), as the model saw
        it; see `ConversationReads.replay`."""
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
        """Sends the traces of `conversations` (all if empty) over OTLP/HTTP to `endpoint` (None: the
        OpenTelemetry environment's); returns what was sent of each. Raises NoEndpoint or
        UnknownConversation before sending. Raises PushFailed when the endpoint refuses."""
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
        """Sends the turn of user message `turn` (default: latest) `n` times under each of `rules` to a
        model; keeps each complete answer. `rules` default to transcript-only and the live one. See
        `adapters.service.reproduce.reproduce` for `model=`, `judge=` and what it raises."""
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
