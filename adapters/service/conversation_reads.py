"""The use cases that read a conversation (`adapters.api.Chatrecord` has them from `ConversationReads`):
the list, export, the log, the turn input and notes, the activity list, the audit and the replay."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from adapters.service.conversations import ConversationPage, list_conversations
from adapters.service.export import Export, export_lines
from adapters.service.replay import (
    Audit,
    Replay,
    no_turn_among,
    stored_conversation,
)
from adapters.service.use_case_base import UseCaseBase, conversation_argument, in_store_terms, reads
from adapters.store.settings import StoreUnusable, describe_backend
from adapters.store.verify import chain_verdict
from domain.events import ConversationEvent
from projections import activity
from projections.activity import SegmentActivity
from projections.audit import AuditRow
from projections.audit import audit as audit_rows
from projections.page_line import PageCheck, every_page
from projections.rules import resolve
from projections.turn import TurnInput, replay_turns, turns_of
from projections.turn_notes import TurnNotes


class ConversationReads(UseCaseBase):
    """The reads of conversations, each a method of Chatrecord (see there for the store and standbys)."""

    @reads
    @in_store_terms
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
        verdict = chain_verdict(self.store, self._stored_id(name))
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
        events = self.events(conversation_argument("audit", conversation))
        rule_set = rules or self.active_rules()
        rows: list[AuditRow] = audit_rows(events, rule_set)
        verdict = chain_verdict(self.store, self._stored_id(conversation)) if chain else None
        return Audit(conversation, rule_set, rows, verdict)

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
        Under the live rule set the latest turn is checked against the read
        models' (`Replay.differs`; also True where they lag and a read-only store keeps them
        from catching up). Raises UnknownConversation, TurnNotFound for an `at` that
        started no turn, UnknownRuleSet."""
        events = self.events(conversation_argument("replay", conversation))
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
