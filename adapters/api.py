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

import copy
import logging
from collections.abc import Callable
from functools import cached_property
from threading import Lock

from adapters.backends import StoreFactory
from adapters.backends.replicas import check_position, replayed, write_position
from adapters.backends.settings import DEFAULT_DB, BadSetting, StoreUnusable, describe_backend, read_store_env, store_errors
from adapters.bootstrap import build_store, open_store, read_models
from adapters.ingest import ParsedLine, bounded_lines, json_problem
from adapters.ingest.names import AT_PATTERN, parse_at
from adapters.service.batched_ingest import BATCH_LINES
from adapters.service.chain_looks import ChainLooks
from adapters.service.conversation_reads import ConversationReads
from adapters.service.conversations import CURSOR_PATTERN, LIST_LIMIT_MAX, STATUSES, BadCursor, BadFilter, decode_cursor, iso
from adapters.service.export import NoSuchMessage
from adapters.service.idempotent import KeyInFlight, KeyReused, Replayed
from adapters.service.line_writes import WRITER_LOCKS, LineWrites
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
from adapters.service.store_upkeep import StoreUpkeep
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
from adapters.service.use_case_base import UseCaseBase, conversation_argument, in_store_terms, read_wait_setting, reads
from adapters.store.application import ConversationStore
from adapters.store.idempotency import MAX_KEY, body_hash
from adapters.store.keys import KeyState
from adapters.store.verify import Verdict, head_line
from adapters.views.readmodels import ReadModels
from adapters.views.rebuild import MOST_WORKERS, RebuildInterrupted
from projections.overview import Overview
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn import build_turn_input
from projections.turn_notes import PlacedNote, TurnNotes, apply_notes

log = logging.getLogger("chatrecord")

__all__ = ["DEMO_CONVERSATION", "DEMO_FILE", "Audit", "Chatrecord", "Demo", "IngestReport", "PlacedNote", "Recorded", "Replay"]
__all__ += ["TurnNotes", "VersionMismatch", "apply_notes", "demo_lines", "replay_file", "replay_lines"]
# what the entrypoints (cli/, http/, pages/) take from the layers below, which they do not import
__all__ += ["AT_PATTERN", "BATCH_LINES", "CURSOR_PATTERN", "DEFAULT_DB", "LIST_LIMIT_MAX", "MAX_KEY", "MOST_WORKERS"]
__all__ += ["NEW_MASTER_KEY_VARIABLE", "OverviewPoint", "ParsedLine", "TimelinePage", "TurnView", "Verdict", "KeyChange"]
__all__ += ["KeyState", "Replayed", "body_hash", "bounded_lines", "decode_cursor", "head_line", "iso", "json_problem"]
__all__ += ["newest_turns", "open_store", "parse_at", "store_errors", "turn_view"]
__all__ += ["BadCursor", "BadSetting", "EmptyInput", "KeyInFlight", "KeyReused", "NoSuchMessage", "RebuildInterrupted"]
__all__ += [
    "StoreUnusable",
    "TurnNotFound",
    "UnreadableFile",
    "BadFilter",
    "STATUSES",
]  # errors, each a domain.errors.ChatrecordError


class Chatrecord(LineWrites, ConversationReads, StoreUpkeep, UseCaseBase):
    """A conversation store with its read models: every use case the entrypoints call.

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
        self._store = store
        self._reading = reading
        self._opened_standby: Chatrecord | None = Chatrecord(read_store, source_name) if read_store is not None else None
        """The same use cases on the reading store (it has none of its own), once opened (`_standby`)."""
        self._standby_lock = Lock()
        self.read_wait = read_wait if read_wait is not None else read_wait_setting()
        self.source_name = source_name
        self._lines = 0
        self._writers = [Lock() for _ in range(WRITER_LOCKS)]
        self._looks = ChainLooks(lambda: self.store)
        """The looks at the store's hash chains, with the verdicts this process keeps (`chain`)."""

    @property
    def store(self) -> ConversationStore:
        """The store written to (the primary), opened on first use where a caller that only reads
        (`reading=True`) has a reading store: such a caller works while the primary is down."""
        if self._store is None:
            with store_errors():
                self._store = open_store(reading=self._reading)
        return self._store

    @property
    def _chain_looks(self) -> ChainLooks:
        return self._looks

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
        return read_models(self.store)

    def close(self) -> None:
        """Closes the store's connections (and the reading store's)."""
        if self._store is not None:
            self._store.close()
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
            return bool(getattr(chatrecord.store.factory, "created", None)), describe_backend(chatrecord.store)
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
        return Demo(report, describe_backend(self.store), active, now, other)

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
