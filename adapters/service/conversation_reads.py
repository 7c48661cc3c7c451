"""The use cases that read a conversation (`ConversationReads`, which `adapters.api.Chatrecord`
asks): the list, export, the log, the turn input and notes, the activity list, the audit, the
replay and the look at its hash chain."""

from __future__ import annotations

import dataclasses
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
from adapters.service.usage import UsagePage, usage_page
from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder
from adapters.store.verify import Verdict, chain_verdict, chain_verdict_upto
from adapters.views.gc_pause import gc_paused
from adapters.views.readmodels import ReadModels
from adapters.views.turn_starts import TurnStarts
from adapters.views.usage_rows import By
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


class ConversationReads:
    """The reads of a store's conversations (`opened`), each a method of Chatrecord (see there for
    the store and standbys), with the looks at its hash chains (`looks`)."""

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
    def export(self, conversation: str, upto: int | None = None) -> Export:
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
        verdict = self.looks.held(chain_verdict(self.store, self.opened.stored_id(name)))
        self.looks.keep([verdict], "an export", positions=False)
        if verdict is None or verdict.ok:
            return done
        where = f"version {verdict.version} ({verdict.problem})" + (f": {verdict.detail}" if verdict.detail else "")
        return dataclasses.replace(done, broken=where)

    @in_store_terms
    def active_rules(self) -> str:
        """Returns the rule set of the live read models."""
        return self.opened.read_models.active_rules()

    @in_store_terms
    def stored_break(self, conversation: str) -> Verdict | None:
        """Returns the break of the conversation's hash chain the store keeps (`chatrecord
        verify`, any look, or the store's guard stored it), as it was found; None where none is
        kept. Reads one row and recomputes no hash, so a turn read can say the chain is broken
        at the cost of a flat read (`chain` is the look that recomputes)."""
        name = conversation_argument("stored_break", conversation)
        return self.looks.stored(self.opened.stored_id(name), name)

    def chain(self, conversation: str, full: bool = False, *, by: str = "the server") -> Verdict | None:
        """Returns the verdict of the conversation's hash chain, None on a store that keeps no
        chain. A break a check stored (`chatrecord verify`, or any look: `BrokenChain`) is the
        verdict, as it was found (`Verdict.found_at`, `found_by`), until a look that recomputes
        every hash finds the chain ok again (one whose last look here found a break, which the
        store could not keep, is recomputed in full). Else a look starts from the
        conversation's verified position stored by the last look that recomputed every hash
        (`chatrecord verify`, or this page: `VerifiedPosition`; trusted only while the store's
        guard keeps it, which deletes it when an event or chain row is changed by hand), so also
        the first look after a start: `adapters.store.verify.verify_after` finds that head's
        event and hash unchanged and recomputes every hash after it, so it costs what was
        appended since, and says so (`Verdict.kept`, `kept_at`, `kept_by`). Where the store
        keeps no position (a read-only file, a standby), it starts from the head this process
        verified. With `full`, and without either, it recomputes every hash. What it finds is
        kept for every process (`ChainLooks.keep`, by `by`): the position it reached when it
        recomputed every hash and found it ok, or the break. Raises UnknownConversation."""
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

    @in_store_terms
    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnInput:
        """Returns the input of the conversation's latest turn under the live rule set: the system
        message's page line, the transcript with the notes placed, the read models it saw.

        Raises UnknownConversation for an id the store does not hold, NoTurnYet when no
        user message has started a turn yet.
        """
        return self.opened.read_models.turn_input(
            self.opened.stored_id(conversation_argument("turn_input", conversation)), can_see_page
        )

    @in_store_terms
    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnNotes:
        """Returns what the chat adds to the transcript it holds for the next model call: the
        system message's page line and each note with its place (`TurnNotes.to_json()`:
        `{"conversation", "rules", "version", "page_line", "notes": [{"text", "index", "into",
        "at"}]}`; `apply_notes` shows how they go in and gives `turn_input(...).messages`). A page
        `can_see_page` refuses is never named. Reads a bounded few rows: its cost does not grow
        with the conversation's history.

        Raises UnknownConversation for an id the store does not hold.
        """
        return self.opened.read_models.turn_notes(
            self.opened.stored_id(conversation_argument("turn_notes", conversation)), can_see_page
        )

    @in_store_terms
    def activity(self, conversation: str, rules: str | None = None) -> tuple[SegmentActivity, ...]:
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

    @in_store_terms
    def audit(self, conversation: str, rules: str | None = None, chain: bool = False) -> Audit:
        """Returns the conversation's audit: its rows in order under `rules` (default: the live
        rule set) and, with `chain`, the verdict of its hash chain (`Audit.chain`; None on a
        store that keeps no chain). Raises UnknownConversation for an id the store does not hold."""
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
        """Returns the replay of `turns`, checked against the read models' latest turn where
        `latest` (the log's latest turn, under the live rule set) is given."""
        differs = False
        if latest is not None:
            live = self.live_turn(name, can_see_page)
            differs = live is None or live.to_json() != latest.to_json()
        chain = self.looks.held(chain_verdict(self.store, self.opened.stored_id(name))) if differs else None
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
                return models.turn_starts(self.opened.stored_id(name), asked)
        except UnknownConversation:
            raise unknown_conversation(self.store, name, describe_backend(self.store)) from None
        except StoreUnusable:
            if not opened_read_only(self.store):
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
        """Returns the replay of the latest turn, the only one of its message, from the read
        models' rows as the chat's turn read builds it (`ReadModels.turn_input`: it costs what
        the turn's input holds, not the log), checked by the hash chain from its verified
        position (`chain`: it costs what was appended since; every hash where no position is
        stored yet); a broken link (not `unchained`) makes `differs` True with `chain` its
        verdict. None where the rows lag behind the log of a store opened read-only (the
        caller folds the log)."""
        latest = self.live_turn(name, can_see_page)
        if latest is None:
            return None
        verdict = self.chain(name)
        broken = verdict is not None and not verdict.ok and verdict.problem != "unchained"
        return Replay(name, rule_set, (latest,), broken, verdict if broken else None)

    def live_turn(self, conversation: str, can_see_page: PageCheck) -> TurnInput | None:
        """Returns the read models' latest turn; None where they lag behind the log and cannot
        catch up because the store was opened read-only (a SQLite archive, `reading=True`)."""
        try:
            return self.turn_input(conversation, can_see_page)
        except StoreUnusable:
            if not opened_read_only(self.store):
                raise
            return None
