"""Materialised read models in the store's own database, applied exactly once.

`ReadModels(store)` keeps one row per conversation (its folded `TurnState`, the state its
latest turn saw, its last applied version) in the live generation's tables, and a tracking
position: the notification id of the last event applied. `catch_up` reads the notification log
after that position in batches and, per batch, writes the changed rows and the new position in
one transaction (`adapters.readmodels_views`), so an event is applied once and a crash between
batches applies none twice. Every read catches up first, so a turn never reads a record older
than its own log.

`rebuild(rules)` folds the whole log into a new generation's fresh tables, then switches the
`chatrecord_projection` pointer to it and drops the old tables in one transaction
(`adapters.readmodels_catalog`). `diff(rules)` compares the live rows with a fold under `rules`
and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.persistence import PersistenceError, Tracking

from adapters.application import ConversationStore
from adapters.readmodels_catalog import Pointer, catalog_for
from adapters.readmodels_fold import PositionMoved, Row, fold
from adapters.readmodels_views import POPOReadModelsView, ReadModelsView, SQLReadModelsView
from domain.errors import UnknownConversation
from domain.events import conversation_uuid
from projections import turn
from projections.page_line import PageCheck, every_page
from projections.rules import DEFAULT_RULE_SET, RuleSet, resolve
from projections.turn import NoTurnInEvents, TurnInput, TurnState

Progress = Callable[[int, int], None]
RecordChange = tuple[str, dict[str, Any] | None, dict[str, Any] | None]
T = TypeVar("T")

RECORD_FIELDS = ("ending", "tools", "written", "waiting", "decision", "undecided")
"""The parts of a run record entry `diff` compares."""


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did: the rule set now live and the one it replaced, how many
    conversations and events it folded, the tables of the new generation and those dropped."""

    rules: str
    conversations: int
    events: int
    old_rules: str
    tables: tuple[str, ...]
    generation: int = 0
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConversationDiff:
    """How one conversation reads under another rule set: the run record entries that change
    (segment, entry before, entry after; None where a side has no entry) and the notes of its
    latest turn that go away or come in."""

    conversation: str
    records_changed: list[RecordChange] = field(default_factory=list)
    notes_removed: list[str] = field(default_factory=list)
    notes_added: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Returns True when a record entry or a note differs."""
        return bool(self.records_changed or self.notes_removed or self.notes_added)


class ReadModels:
    """The materialised read models of a ConversationStore, in the store's own database."""

    batch_size = 500

    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.catalog = catalog_for(store)

    # ------------------------------------------------------------ position

    def active_rules(self) -> str:
        """Returns the rule set of the live tables; DEFAULT_RULE_SET when none was built yet."""
        live = self.catalog.pointer()
        return live.rules if live else DEFAULT_RULE_SET

    def catch_up(self, progress: Progress | None = None) -> int:
        """Applies every stored event not yet applied to the live tables, in notification
        order, and returns how many it applied. `progress(done, total)` is called per batch."""
        return self._live(lambda live, view: self._catch_up(view, live.rules, progress), fresh=False)[1]

    def _catch_up(self, view: ReadModelsView, rules: RuleSet | str, progress: Progress | None) -> int:
        rules = resolve(rules)
        start = first = view.position()
        total = self.store.max_notification_id() if progress else 0
        applied, known = 0, {}
        while True:
            page = self.store.recorder.select_notifications(start, self.batch_size, inclusive_of_start=False)
            if not page:
                return applied
            events = [(n.id, self.store.mapper.to_domain_event(n)) for n in page]
            ids = {event.originator_id for _, event in events}
            changed: dict[UUID, Row] = {}

            def change(rows: Mapping[UUID, Row]) -> Mapping[UUID, Row]:
                changed.update(fold(rows, events, rules))
                return changed

            try:
                view.fold_batch(start, Tracking(view.name, page[-1].id), ids, change, known)
            except PositionMoved:  # a concurrent catch-up applied them: read on after its position
                start, known = view.position(), {}
                continue
            known = changed  # what this batch committed is current while the position stays ours
            applied += len(page)
            start = page[-1].id
            if progress:
                progress(start - first, max(total, start) - first)
            if len(page) < self.batch_size:
                return applied

    def _live(self, read: Callable[[Pointer, ReadModelsView], T], *, fresh: bool = True) -> tuple[Pointer, T]:
        """Returns the live pointer and `read(pointer, view)`, caught up first if `fresh`;
        tries again when a rebuild switched generations in between."""
        for attempt in range(3):
            live = self.catalog.start(DEFAULT_RULE_SET)
            view = self.catalog.view(live.generation)
            try:
                if fresh:
                    self._catch_up(view, live.rules, None)
                return live, read(live, view)
            except PersistenceError:
                if attempt == 2 or self.catalog.pointer() == live:
                    raise
        raise AssertionError("unreachable")

    # ------------------------------------------------------------ reads

    def state(self, conversation: str) -> TurnState | None:
        """Returns the conversation's read models after its last event (caught up first),
        None for a conversation the store does not hold."""
        row = self._row(conversation)[1]
        return row.state if row else None

    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnInput:
        """Returns the input of the conversation's latest turn (its latest user message, retry
        or edit) from the read models, caught up first. Raises UnknownConversation for a
        conversation the store does not hold, NoTurnInEvents when no turn has started yet."""
        live, row = self._row(conversation)
        if row is None:
            raise UnknownConversation(f'no conversation "{conversation}" in the store; check the id or ingest it first')
        if row.turn is None:
            raise NoTurnInEvents(f'conversation "{conversation}" has no user message or retry yet, so no turn to build')
        return turn.turn_input(row.turn.state, row.turn.message, row.turn.at, live.rules, can_see_page)

    def _row(self, conversation: str) -> tuple[Pointer, Row | None]:
        key = conversation_uuid(conversation)
        return self._live(lambda live, view: view.row(key))

    # ------------------------------------------------------------ erasure

    def erase(self, conversation: str) -> bool:
        """Rewrites the conversation's row in the live tables from its log (caught up first),
        whose texts read as erased once its key is gone, so no view keeps a text of it.
        Returns False when it has no row. A catch-up that moved the row meanwhile is waited
        out: the row is read and rewritten again."""
        key = conversation_uuid(conversation)

        def rewrite(live: Pointer, view: ReadModelsView) -> bool:
            for _ in range(10):
                row = view.row(key)
                if row is None:
                    return False
                log = self.store.events(conversation, up_to_version=row.version)
                fresh = fold({}, ((row.position, e) for e in log), resolve(live.rules))[key]
                if _replace_row(view, fresh):
                    return True
            raise PositionMoved(f"the read model of {conversation} kept moving; erase it again")

        return self._live(rewrite)[1]

    # ------------------------------------------------------------ rule sets

    def rebuild(self, rules: str, progress: Progress | None = None) -> RebuildReport:
        """Folds the whole event log under `rules` into a new generation's fresh tables, then
        makes it live and drops the old generation in one transaction; returns what it did.
        Raises UnknownRuleSet for an unknown id, RebuildSuperseded when a later rebuild
        switched first."""
        target = resolve(rules).id
        old = self.catalog.start(DEFAULT_RULE_SET)
        generation = self.catalog.allocate()
        view = self.catalog.view(generation, create=True)
        events = self._catch_up(view, target, progress or (lambda done, total: None))
        dropped = self.catalog.switch(generation, target)
        return RebuildReport(
            rules=target, conversations=view.count(), events=events, old_rules=old.rules,
            tables=view.tables, generation=generation, dropped=dropped,
        )

    def diff(self, rules: str) -> list[ConversationDiff]:
        """Returns, per conversation in the order they started, which run record entries and
        which notes of its latest turn differ between the live rule set and `rules`. Writes
        nothing. Raises UnknownRuleSet for an unknown id."""
        target = resolve(rules)
        ids = self.store.conversation_ids()
        live, rows = self._live(lambda live, view: [view.row(conversation_uuid(c)) for c in ids])
        diffs = []
        for conversation, before in zip(ids, rows):
            if before is None:  # started after the catch-up: not in the live tables yet
                continue
            log = self.store.events(conversation, up_to_version=before.version)
            after = fold({}, ((before.position, e) for e in log), target)[before.aggregate_id]
            diffs.append(_diff(conversation, before, live.rules, after, target))
        return diffs


def _diff(conversation: str, before: Row, before_rules: str, after: Row, after_rules: RuleSet) -> ConversationDiff:
    old = {e.segment: e.to_json() for e in before.state.record.entries}
    new = {e.segment: e.to_json() for e in after.state.record.entries}
    records: list[RecordChange] = []
    for segment in [*old, *(s for s in new if s not in old)]:
        was, now = old.get(segment), new.get(segment)
        if was is None or now is None or any(was[f] != now[f] for f in RECORD_FIELDS):
            records.append((segment, was, now))
    notes_before, notes_after = _notes(before, before_rules), _notes(after, after_rules)
    return ConversationDiff(
        conversation=conversation,
        records_changed=records,
        notes_removed=[n for n in notes_before if n not in notes_after],
        notes_added=[n for n in notes_after if n not in notes_before],
    )


def _replace_row(view: ReadModelsView, row: Row) -> bool:
    """Overwrites a view's row of `row.aggregate_id` if it is still at `row.version`; returns
    whether it did. (Reaches into the views' SQL helpers: the row tables are being reshaped.)"""
    if isinstance(view, POPOReadModelsView):
        with view._database_lock:
            current = view._rows.get(row.aggregate_id)
            if current is None or current.version != row.version:
                return False
            view._rows[row.aggregate_id] = row
            return True
    assert isinstance(view, SQLReadModelsView)
    with view.datastore.transaction(commit=True) as curs:
        view._lock(curs)
        curs.execute(view._q("SELECT version FROM {rows} WHERE originator_id = %s"), (view._key(row.aggregate_id),))
        current = curs.fetchone()
        if current is None or current["version"] != row.version:
            return False
        curs.execute(view._q(view._upsert_sql()), view._params(row))
        return True


def _notes(row: Row, rules: RuleSet | str) -> tuple[str, ...]:
    if row.turn is None:
        return ()
    return turn.turn_input(row.turn.state, row.turn.message, row.turn.at, rules).notes
