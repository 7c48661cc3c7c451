"""The use cases that read a conversation (`ConversationReads`): the list, export, the log, the turn input
and notes, the activity list, the audit, the replay and the chain look."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from adapters.backends.settings import StoreUnusable, describe_backend, store_errors
from adapters.service.chain_looks import ChainLooks
from adapters.service.common import OpenedStore, conversation_argument, in_store_terms, opened_read_only
from adapters.service.conversations import ConversationPage, ListFilter, list_conversations
from adapters.service.data_keys import key_kept
from adapters.service.export import Export, export_lines
from adapters.service.replay import (
    Audit,
    Replay,
    no_turn_among,
    stored_conversation,
    unknown_conversation,
)
from adapters.service.reproduction_records import records
from adapters.service.usage import UsagePage, usage_page
from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder
from adapters.store.verify import Verdict, chain_verdict, chain_verdict_upto
from adapters.views.gc_pause import gc_paused
from adapters.views.readmodels import ReadModels
from adapters.views.turn_starts import TurnStarts
from adapters.views.usage_rows import By
from domain.errors import UnknownConversation
from domain.events import ConversationEvent, MessageEdited, conversation_uuid
from domain.limits import INT_MAX
from projections import activity
from projections.activity import SegmentActivity
from projections.audit import AuditRow
from projections.audit import audit as audit_rows
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn import TurnInput, replay_turns, starts_turn, turns_of
from projections.turn_notes import TurnNotes


class ConversationReads:
    """The reads of a store's conversations (`opened`), each a Chatrecord method, with the chain looks
    (`looks`)."""

    def __init__(self, opened: OpenedStore, looks: ChainLooks) -> None:
        self.opened = opened
        self.looks = looks

    @property
    def store(self) -> ConversationStore:
        """The store read."""
        return self.opened.store

    @in_store_terms
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
    ) -> ConversationPage:
        """Returns one page of the store's conversations, newest activity first (`list_conversations`). At
        most `limit` (1–1000) after `cursor` (None: the first page). Filters: active in [`since`,
        `until`) (aware datetimes), `owner`, id containing `search`, any of `status` (`STATUSES`). Each
        is a `ConversationSummary`. Raises ValueError for a bad `limit`. Raises BadCursor for a cursor no
        page returned. Raises BadFilter for a status not in `STATUSES`."""
        filters = ListFilter(owner=owner, since=since, until=until, search=search, status=tuple(status))
        return list_conversations(self.opened.read_models, limit, cursor, since, filters)

    @in_store_terms
    def usage(
        self,
        by: By = "conversation",
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> UsagePage:
        """Returns one page of the usage audit: the segments' usage at or after `since` and before
        `until` (the chat's time), summed `by` conversation, owner or day, at most `limit` (1–1000)
        groups after `cursor`, and the range's total; see `adapters.service.usage.usage_page`."""
        return usage_page(self.opened.read_models, by, since, until, limit, cursor)

    @in_store_terms
    def export(self, conversation: str, upto: int | None = None, with_reproductions: bool = False) -> Export:
        """Returns the conversation as the chat's JSON Lines objects (docs/input-format.md), up to user
        message `upto` if given. Ingested into an empty store they give the same turns, audit rows and
        notes. Erased texts read `[erased]` (`Export.erased`). Where the store chains, the chain is
        recomputed; a break is named in `Export.broken`. `with_reproductions` adds the kept
        reproductions of its turns up to `upto` as records (`Export.reproductions`); a stream whose
        chain does not hold is named in `Export.broken`. Raises UnknownConversation for an id the store
        does not hold."""
        name = conversation_argument("export", conversation)
        done = export_lines(self.events(name), upto)
        streams_broken = None
        if with_reproductions:
            kept, streams_broken = records(self.store, name, upto)
            done = dataclasses.replace(done, reproductions=kept)
        verdict = self.looks.held(chain_verdict(self.store, self.opened.stored_id(name)))
        self.looks.keep([verdict], "an export", positions=False)
        if verdict is None or verdict.ok:
            return dataclasses.replace(done, broken=streams_broken) if streams_broken else done
        where = f"version {verdict.version} ({verdict.problem})" + (f": {verdict.detail}" if verdict.detail else "")
        return dataclasses.replace(done, broken=where)

    @in_store_terms
    def active_rules(self) -> str:
        """Returns the rule set of the live read models."""
        return self.opened.read_models.active_rules()

    @in_store_terms
    def stored_break(self, conversation: str) -> Verdict | None:
        """Returns the stored break of the conversation's hash chain as found; None where none is kept.
        Reads one row, recomputes no hash (`chain` recomputes)."""
        name = conversation_argument("stored_break", conversation)
        return self.looks.stored(self.opened.stored_id(name), name)

    def chain(self, conversation: str, full: bool = False, *, by: str = "the server") -> Verdict | None:
        """Returns the verdict of the conversation's hash chain; None on a store that keeps no chain.

        A stored break (`BrokenChain`) is the verdict, as found (`found_at`, `found_by`), until a full
        look finds the chain ok. Else a look starts from the stored verified position
        (`VerifiedPosition`, trusted while the store's guard keeps it) and recomputes only what came
        since (`Verdict.kept`, `kept_at`, `kept_by`). Where the store keeps no position, it starts from
        this process's head. `full`, or no start, recomputes every hash. The finding is kept for every
        process (`ChainLooks.keep`, by `by`). Raises UnknownConversation."""
        name = conversation_argument("chain", conversation)
        verdict = self.looks.look(self.opened.stored_id(name), name, full, by)
        if verdict is None and isinstance(self.store.recorder, ChainedRecorder):
            self.events(name)  # raises UnknownConversation
        return verdict

    @in_store_terms
    def events(self, conversation: str) -> list[ConversationEvent]:
        """Returns the conversation's log. Raises UnknownConversation (naming the store and a few
        stored ids) for an id the store does not hold."""
        return stored_conversation(self.store, conversation_argument("events", conversation), describe_backend(self.store))

    def events_to_turns(self, conversation: str, messages: Sequence[int]) -> list[ConversationEvent]:
        """Returns the conversation's log up to the start of the latest turn of each of `messages`, the
        newest of those starts (`ReadModels.turn_starts`): a turn's input, and the compare of two, needs
        no later event, so an old turn costs what came before it, not the history. The whole log where
        the rows cannot answer (no read models, rows lagging on a read-only store), a message started no
        turn (its error then names those that did), or the event read there starts no turn of one of
        them. Raises UnknownConversation for an id the store does not hold."""
        name = conversation_argument("events", conversation)
        upto = 0
        for message in messages:
            starts = self._turn_starts(name, message)
            if starts is None or not starts.versions:
                return self.events(name)
            upto = max(upto, starts.versions[-1])
        events = self.store.events(self.opened.stored_id(name), upto)
        edited = events[-2].message if len(events) > 1 and isinstance(events[-2], MessageEdited) else None
        if not events or events[-1].originator_version != upto or starts_turn(events[-1], edited) not in messages:
            return self.events(name)
        return events

    @in_store_terms
    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnInput:
        """Returns the input of the latest turn under the live rule set: the page line, the transcript with
        notes placed, and the read models it saw. Raises UnknownConversation for an id the store does not
        hold. Raises NoTurnYet when no turn has started."""
        return self.opened.read_models.turn_input(
            self.opened.stored_id(conversation_argument("turn_input", conversation)), can_see_page
        )

    @in_store_terms
    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnNotes:
        """Returns what the chat adds to its transcript for the next model call: the page line and each note
        with its place.

        `TurnNotes.to_json()` is `{"conversation", "rules", "version", "page_line", "notes": [{"text",
        "index", "into", "at"}]}`; `apply_notes` places them. A page `can_see_page` refuses is never
        named. Its cost does not grow with the history. Raises UnknownConversation for an id the store
        does not hold."""
        return self.opened.read_models.turn_notes(
            self.opened.stored_id(conversation_argument("turn_notes", conversation)), can_see_page
        )

    @in_store_terms
    def activity(self, conversation: str, rules: str | None = None) -> tuple[SegmentActivity, ...]:
        """Returns the activity list the chat shows the editor, segment by segment, under `rules` (default:
        live). Labels are German, e.g. "noch nicht ausgeführt", "fehlgeschlagen". Raises
        UnknownConversation for an id the store does not hold."""
        events = self.events(conversation_argument("activity", conversation))
        rule_set = rules or self.active_rules()
        state = activity.initial()
        for event in events:
            state = activity.apply(state, event, rule_set)
        return state.segments

    @in_store_terms
    def audit(self, conversation: str, rules: str | None = None, chain: bool = False) -> Audit:
        """Returns the conversation's audit rows in order under `rules` (default: live). With `chain`, also
        the chain's verdict (`Audit.chain`; None without a chain). Raises UnknownConversation for an id
        the store does not hold."""
        with gc_paused():
            events = self.events(conversation_argument("audit", conversation))
            rule_set = rules or self.active_rules()
            rows: list[AuditRow] = audit_rows(events, rule_set)
        stored = self.opened.stored_id(conversation)
        verdict = self.looks.held(chain_verdict(self.store, stored)) if chain else None
        self.looks.keep([verdict], "an audit", positions=False)
        unfinished = any(row.kind == "erased" for row in rows) and key_kept(self.store, conversation_uuid(stored))
        return Audit(stored, rule_set, rows, verdict, unfinished)  # named as list prints it

    @in_store_terms
    def replay(
        self,
        conversation: str,
        rules: str | None = None,
        at: int | None = None,
        can_see_page: PageCheck = every_page,
    ) -> Replay:
        """Returns every turn of a stored conversation as the model saw it, under `rules` (default: live).

        With `at`, only the turns of user message `at`. The `turns` table names their starts
        (`ReadModels.turn_starts`); only the log up to the newest is folded, so the cost is that turn's.
        Where the rows cannot answer, or disagree with the events, the whole log is folded.

        Under the live rule set only:
        - `at`'s one turn that is the latest comes from the read models (`ReadModels.turn_input`); the
          log is not read, and the chain is checked from its verified position.
        - Turns that include the latest are compared with the read models (`Replay.differs`; also True
          where they lag on a read-only store); on a difference `Replay.chain` is the whole chain's
          verdict.
        - Turns that end before the latest recompute the chain of the events read (`chain_verdict_upto`).
          A broken link (not `unchained`) sets `differs` and `chain`. Raises UnknownConversation,
          UnknownRuleSet, and TurnNotFound for an `at` that started no turn (naming those that did)."""
        with gc_paused():  # a fold of a log keeps what it makes alive: no collection pays for it
            name = conversation_argument("replay", conversation)
            done = self._replay(name, rules, at, can_see_page)
        return dataclasses.replace(done, conversation=self.opened.stored_id(name))  # as list prints it, whatever the caller typed

    def _replay(self, name: str, rules: str | None, at: int | None, can_see_page: PageCheck) -> Replay:
        starts = self._turn_starts(name, at) if at is not None else None
        if starts is not None and at is not None and starts.message != at:
            starts = dataclasses.replace(starts, message=at)  # a number no message has, asked as one that fits
        if starts is not None:
            rule_set = resolve(rules or starts.rules).id
            done = self._replay_at(name, rule_set, starts, can_see_page)
            if done is not None:
                return done
        events = self.events(name)
        active = self.active_rules()
        rule_set = resolve(rules or active).id
        if at is None:
            turns = replay_turns(events, rule_set, can_see_page)
            last = turns[-1] if turns else None
        else:  # one pass, building only the turns of message `at` and the latest (for the check)
            turns, last, started = turns_of(events, at, rule_set, can_see_page)
            if not turns:
                raise no_turn_among(at, started)
        return self._checked(name, rule_set, turns, last if rule_set == active else None, can_see_page)

    def _checked(
        self, name: str, rule_set: str, turns: list[TurnInput], latest: TurnInput | None, can_see_page: PageCheck
    ) -> Replay:
        """Returns the replay of `turns`, checked against the read models' latest turn where `latest` is
        given."""
        differs = False
        if latest is not None:
            live = self.live_turn(name, can_see_page)
            differs = live is None or live.to_json() != latest.to_json()
        chain = self.looks.held(chain_verdict(self.store, self.opened.stored_id(name))) if differs else None
        return Replay(name, rule_set, tuple(turns), differs, chain)

    def _turn_starts(self, name: str, at: int) -> TurnStarts | None:
        """Returns the turn starts of user message `at` from the read models. None without read models, or
        where rows lag on a read-only store. Raises UnknownConversation."""
        models = self.store.views
        if not isinstance(models, ReadModels):
            return None
        asked = min(max(at, 0), INT_MAX + 1)  # no message number lies outside 1 to INT_MAX: a database integer
        try:
            with store_errors(self.store):
                return models.turn_starts(self.opened.stored_id(name), asked)
        except UnknownConversation:
            raise unknown_conversation(self.store, name, describe_backend(self.store)) from None
        except StoreUnusable:
            if not opened_read_only(self.store):
                raise
            return None

    def _replay_at(self, name: str, rule_set: str, starts: TurnStarts, can_see_page: PageCheck) -> Replay | None:
        """Returns the replay of the turns `starts` names, folded from the log up to the newest. None when
        the events read do not start those turns. Raises TurnNotFound when the message started no turn."""
        if not starts.versions:
            raise no_turn_among(starts.message, starts.started)
        upto = starts.versions[-1]
        if rule_set == starts.rules and starts.versions == (starts.latest,):
            done = self._latest_from_rows(name, rule_set, can_see_page)
            if done is not None:
                return done
        stored = self.opened.stored_id(name)
        key = conversation_uuid(stored)
        read = self.store.recorder.select_events(key, lte=upto)  # read once: mapped, and its chain checked
        events = self.store.events.mapped(key, read, upto)
        turns, last, _ = turns_of(events, starts.message, rule_set, can_see_page)
        if not events or events[-1].originator_version != upto or len(turns) != len(starts.versions) or last is not turns[-1]:
            return None
        if rule_set != starts.rules:
            return Replay(name, rule_set, tuple(turns))
        if starts.latest == upto:  # the latest turn is among them: compared as a whole replay's
            return self._checked(name, rule_set, turns, last, can_see_page)
        verdict = chain_verdict_upto(self.store, stored, upto, read)
        broken = verdict is not None and not verdict.ok and verdict.problem != "unchained"
        return Replay(name, rule_set, tuple(turns), broken, verdict if broken else None)

    def _latest_from_rows(self, name: str, rule_set: str, can_see_page: PageCheck) -> Replay | None:
        """Returns the replay of the latest turn, its message's only one, from the read models' rows. The
        chain is checked from its verified position (every hash where none is stored). A broken link (not
        `unchained`) sets `differs`, with `chain` its verdict. None where rows lag on a read-only store."""
        latest = self.live_turn(name, can_see_page)
        if latest is None:
            return None
        verdict = self.chain(name)
        broken = verdict is not None and not verdict.ok and verdict.problem != "unchained"
        return Replay(name, rule_set, (latest,), broken, verdict if broken else None)

    def live_turn(self, conversation: str, can_see_page: PageCheck) -> TurnInput | None:
        """Returns the read models' latest turn. None where they lag and the store is read-only."""
        try:
            return self.turn_input(conversation, can_see_page)
        except StoreUnusable:
            if not opened_read_only(self.store):
                raise
            return None
