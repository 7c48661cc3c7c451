"""The use cases that read a conversation (`adapters.api.Chatrecord` has them from `ConversationReads`):
the list, export, the log, the turn input and notes, the activity list, the audit and the replay."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from adapters.backends.settings import StoreUnusable, describe_backend, store_errors
from adapters.service.conversations import ConversationPage, ListFilter, list_conversations
from adapters.service.data_keys import key_kept
from adapters.service.export import Export, export_lines
from adapters.service.gc_pause import gc_paused
from adapters.service.replay import (
    Audit,
    Replay,
    no_turn_among,
    stored_conversation,
    unknown_conversation,
)
from adapters.service.use_case_base import UseCaseBase, conversation_argument, in_store_terms, reads
from adapters.store.verify import chain_verdict, chain_verdict_upto
from adapters.views.readmodels import ReadModels
from adapters.views.turn_starts import TurnStarts
from domain.errors import UnknownConversation
from domain.events import ConversationEvent, conversation_uuid
from domain.limits import INT_MAX
from projections import activity
from projections.activity import SegmentActivity
from projections.audit import AuditRow
from projections.audit import audit as audit_rows
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn import TurnInput, replay_turns, turns_of
from projections.turn_notes import TurnNotes

if TYPE_CHECKING:
    from adapters.service.trace_export import Sent


class ConversationReads(UseCaseBase):
    """The reads of conversations, each a method of Chatrecord (see there for the store and standbys)."""

    @reads
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
        after: str | None = None,
    ) -> ConversationPage:
        """Returns one page of the store's conversations, newest activity first: at most `limit`
        (1–1000) after `cursor` (the `cursor` of the page before; None: the first page), only
        those active at or after `since` and before `until` (aware datetimes, the chat's time),
        of `owner`, whose id contains `search`, with any of `status` (`STATUSES`: failed,
        waiting, undecided, erased, broken, verified, unchecked), where given. Each with its
        stored id (as every method accepts it), kind, owner, messages, segments, events, first
        and last activity, whether it was erased and its status (`ConversationSummary`). Reads a
        page at a time; see `adapters.service.conversations.list_conversations`. Raises
        ValueError for a bad `limit`, BadCursor for a cursor no page returned, BadFilter for a
        status none of `STATUSES`."""
        filters = ListFilter(owner=owner, since=since, until=until, search=search, status=tuple(status))
        return list_conversations(self.read_models, limit, cursor, since, filters)

    @reads
    @in_store_terms
    def export(self, conversation: str, upto: int | None = None, *, after: str | None = None) -> Export:
        """Returns the conversation as the chat's JSON Lines objects (docs/input-format.md), made
        from its stored events in the store's order, up to user message `upto` and what belongs
        to it if given (`export_lines`). Ingested into an empty store they give the same turns,
        audit rows and notes. An erased conversation's texts read `[erased]` (`Export.erased`).
        Where the store keeps a hash chain, the conversation's is recomputed too: a chain that
        does not verify is named in `Export.broken` (the export would otherwise carry a changed
        event into a store that chains it anew, and verifies). Raises UnknownConversation for an
        id the store does not hold."""
        name = conversation_argument("export", conversation)
        done = export_lines(self.events(name), upto)
        verdict = self._chain_looks.held(chain_verdict(self.store, self._stored_id(name)))
        self._chain_looks.keep([verdict], "an export", positions=False)
        if verdict is None or verdict.ok:
            return done
        where = f"version {verdict.version} ({verdict.problem})" + (f": {verdict.detail}" if verdict.detail else "")
        return dataclasses.replace(done, broken=where)

    @reads
    @in_store_terms
    def active_rules(self, *, after: str | None = None) -> str:
        """Returns the rule set of the live read models."""
        return self.read_models.active_rules()

    @reads
    @in_store_terms
    def events(self, conversation: str, *, after: str | None = None) -> list[ConversationEvent]:
        """Returns the conversation's log. Raises UnknownConversation (naming the store and a few
        stored ids) for an id the store does not hold."""
        return stored_conversation(self.store, conversation_argument("events", conversation), describe_backend(self.store))

    @reads
    @in_store_terms
    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page, *, after: str | None = None) -> TurnInput:
        """Returns the input of the conversation's latest turn under the live rule set: the system
        message's page line, the transcript with the notes placed, the read models it saw.

        Raises UnknownConversation for an id the store does not hold, NoTurnYet when no
        user message has started a turn yet.
        """
        return self.read_models.turn_input(self._stored_id(conversation_argument("turn_input", conversation)), can_see_page)

    @reads
    @in_store_terms
    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page, *, after: str | None = None) -> TurnNotes:
        """Returns what the chat adds to the transcript it holds for the next model call: the
        system message's page line and each note with its place (`TurnNotes.to_json()`:
        `{"conversation", "rules", "version", "page_line", "notes": [{"text", "index", "into",
        "at"}]}`; `apply_notes` shows how they go in and gives `turn_input(...).messages`). A page
        `can_see_page` refuses is never named. Reads a bounded few rows: its cost does not grow
        with the conversation's history.

        Raises UnknownConversation for an id the store does not hold.
        """
        return self.read_models.turn_notes(self._stored_id(conversation_argument("turn_notes", conversation)), can_see_page)

    @reads
    @in_store_terms
    def activity(self, conversation: str, rules: str | None = None, *, after: str | None = None) -> tuple[SegmentActivity, ...]:
        """Returns the activity list the chat shows the editor, segment by segment (German labels
        of the amendment's table: "noch nicht ausgeführt", "nicht ausgeführt: nicht mehr
        freigegeben", "fehlgeschlagen", "Von dir abgelehnt: Behalten", …), read from the log under
        `rules` (default: the live rule set) with the same step reading as the run record.

        Raises UnknownConversation for an id the store does not hold.
        """
        events = self.events(conversation_argument("activity", conversation))
        rule_set = rules or self.active_rules()
        state = activity.initial()
        for event in events:
            state = activity.apply(state, event, rule_set)
        return state.segments

    @reads
    @in_store_terms
    def audit(self, conversation: str, rules: str | None = None, chain: bool = False, *, after: str | None = None) -> Audit:
        """Returns the conversation's audit: its rows in order under `rules` (default: the live
        rule set) and, with `chain`, the verdict of its hash chain (`Audit.chain`; None on a
        store that keeps no chain). Raises UnknownConversation for an id the store does not hold."""
        with gc_paused():
            events = self.events(conversation_argument("audit", conversation))
            rule_set = rules or self.active_rules()
            rows: list[AuditRow] = audit_rows(events, rule_set)
        stored = self._stored_id(conversation)
        verdict = self._chain_looks.held(chain_verdict(self.store, stored)) if chain else None
        self._chain_looks.keep([verdict], "an audit", positions=False)
        unfinished = any(row.kind == "erased" for row in rows) and key_kept(self.store, conversation_uuid(stored))
        return Audit(stored, rule_set, rows, verdict, unfinished)  # named as list prints it

    @reads
    @in_store_terms
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

        Without `at` the whole log is folded once. With `at`, the read models' `turns` table
        names the versions of the events that started the turns of message `at` (its typed
        message, retries, edits running it again; `ReadModels.turn_starts`, after the rows caught
        up with the log), and only the log up to the newest of them is read and folded, once:
        the cost is that turn's, not the conversation's. Where the rows cannot answer (a store
        without read models, a read-only file whose rows lag) or the events read do not start
        the turns the rows name, the whole log is folded as without the table.

        Where message `at` started one turn only and it is the latest, under the live rule set,
        that turn is the read models' (`ReadModels.turn_input`, as the chat's turn read builds
        it: it costs what the input holds) and the log is not read; the hash chain is then
        checked from its verified position (`chain`), a broken link (not `unchained`) making
        `differs` True with `chain` its verdict.

        The check, under the live rule set only: where the turns shown include the latest turn,
        it is compared with the read models' (`Replay.differs`; also True where they lag and a
        read-only store keeps them from catching up), and where they differ `Replay.chain` is
        the verdict of the whole hash chain. Where `at`'s turns end before the latest turn, the
        read models (which hold the latest turn only) are not compared and the rest of the log is
        not read: instead the hash chain of the events read is recomputed
        (`chain_verdict_upto` of the events read once: mapped and checked), and a broken link there (not `unchained`) makes `differs` True
        with `chain` its verdict, since the read models folded the events as they were
        appended. Raises UnknownConversation, TurnNotFound for an `at` that started no turn
        (naming the messages that did), UnknownRuleSet."""
        with gc_paused():  # a fold of a log keeps what it makes alive: no collection pays for it
            name = conversation_argument("replay", conversation)
            done = self._replay(name, rules, at, can_see_page)
        return dataclasses.replace(done, conversation=self._stored_id(name))  # as list prints it, whatever the caller typed

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
        """Returns the replay of `turns`, checked against the read models' latest turn where
        `latest` (the log's latest turn, under the live rule set) is given."""
        differs = False
        if latest is not None:
            live = self._live_turn(name, can_see_page)
            differs = live is None or live.to_json() != latest.to_json()
        chain = self._chain_looks.held(chain_verdict(self.store, self._stored_id(name))) if differs else None
        return Replay(name, rule_set, tuple(turns), differs, chain)

    def _turn_starts(self, name: str, at: int) -> TurnStarts | None:
        """Returns the turn starts of user message `at` from the read models (`replay --at`);
        None where they cannot answer: a store without read models, or rows that lag behind
        the log of a store opened read-only. Raises UnknownConversation as `events` words it."""
        models = self.store.views
        if not isinstance(models, ReadModels):
            return None
        asked = min(max(at, 0), INT_MAX + 1)  # no message number lies outside 1 to INT_MAX: a database integer
        try:
            with store_errors(self.store):
                return models.turn_starts(self._stored_id(name), asked)
        except UnknownConversation:
            raise unknown_conversation(self.store, name, describe_backend(self.store)) from None
        except StoreUnusable:
            if not getattr(self.store.factory, "read_only", False):
                raise
            return None

    def _replay_at(self, name: str, rule_set: str, starts: TurnStarts, can_see_page: PageCheck) -> Replay | None:
        """Returns the replay of the turns `starts` names, folded from the log up to the newest
        of them (see `replay`); None when the events read do not start those turns (the caller
        folds the whole log). Raises TurnNotFound when the message started no turn."""
        if not starts.versions:
            raise no_turn_among(starts.message, starts.started)
        upto = starts.versions[-1]
        if rule_set == starts.rules and starts.versions == (starts.latest,):
            done = self._latest_from_rows(name, rule_set, can_see_page)
            if done is not None:
                return done
        stored = self._stored_id(name)
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
        """Returns the replay of the latest turn, the only one of its message, from the read
        models' rows as the chat's turn read builds it (`ReadModels.turn_input`: it costs what
        the turn's input holds, not the log), checked by the hash chain from its verified
        position (`chain`: it costs what was appended since; every hash where no position is
        stored yet); a broken link (not `unchained`) makes `differs` True with `chain` its
        verdict. None where the rows lag behind the log of a store opened read-only (the
        caller folds the log)."""
        latest = self._live_turn(name, can_see_page)
        if latest is None:
            return None
        verdict = self.chain(name)
        broken = verdict is not None and not verdict.ok and verdict.problem != "unchained"
        return Replay(name, rule_set, (latest,), broken, verdict if broken else None)

    def _live_turn(self, conversation: str, can_see_page: PageCheck) -> TurnInput | None:
        """Returns the read models' latest turn; None where they lag behind the log and cannot
        catch up because the store was opened read-only (a SQLite archive, `reading=True`)."""
        try:
            return self.turn_input(conversation, can_see_page)
        except StoreUnusable:
            if not getattr(self.store.factory, "read_only", False):
                raise
            return None

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
