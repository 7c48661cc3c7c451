"""How the conversations read under another rule set (`chatrecord rebuild --diff`). Per conversation, the
entries and latest-turn notes that differ from the live rows (`diff`). Writes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from adapters.store.application import ConversationStore
from domain.events import ConversationEvent
from projections import turn
from projections.rules import RuleSet, resolve
from projections.turn import NoTurnYet, TurnState

RecordChange = tuple[str, dict[str, Any] | None, dict[str, Any] | None]

RECORD_FIELDS = ("ending", "tools", "written", "waiting", "decision", "undecided")
"""The parts of a run record entry `diff` compares."""


@dataclass(frozen=True)
class ConversationDiff:
    """How one conversation reads under another rule set. Entries that change are (segment, before, after),
    None where a side has none; also the latest turn's notes that go or come."""

    conversation: str
    records_changed: list[RecordChange] = field(default_factory=list)
    notes_removed: list[str] = field(default_factory=list)
    notes_added: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Returns True when a record entry or a note differs."""
        return bool(self.records_changed or self.notes_removed or self.notes_added)


class DiffReads(Protocol):
    """What `diff` reads of the read models (`ReadModels`)."""

    store: ConversationStore

    def active_rules(self) -> str: ...

    def state(self, conversation: str) -> TurnState | None: ...


def diff(models: DiffReads, rules: str) -> list[ConversationDiff]:
    """Returns, per conversation in start order, the entries and latest-turn notes that differ between the
    live rule set and `rules`. Writes nothing. Raises UnknownRuleSet for an unknown id."""
    target = resolve(rules)
    live = models.active_rules()
    diffs = []
    for conversation in models.store.conversation_ids():
        before = models.state(conversation)
        if before is None:
            continue
        log_events = models.store.events(conversation)
        after = TurnState()
        for event in log_events:
            after = turn.apply(after, event, target)
        diffs.append(_diff(conversation, before, live, log_events, after, target))
    return diffs


def _diff(
    conversation: str,
    before: TurnState,
    before_rules: str,
    events: Sequence[ConversationEvent],
    after: TurnState,
    after_rules: RuleSet,
) -> ConversationDiff:
    old = {e.segment: e.to_json() for e in before.record.entries}
    new = {e.segment: e.to_json() for e in after.record.entries}
    records: list[RecordChange] = []
    for segment in [*old, *(s for s in new if s not in old)]:
        was, now = old.get(segment), new.get(segment)
        if was is None or now is None or any(was[f] != now[f] for f in RECORD_FIELDS):
            records.append((segment, was, now))
    notes_before, notes_after = _notes(events, before_rules), _notes(events, after_rules)
    return ConversationDiff(
        conversation=conversation,
        records_changed=records,
        notes_removed=[n for n in notes_before if n not in notes_after],
        notes_added=[n for n in notes_after if n not in notes_before],
    )


def _notes(events: Sequence[ConversationEvent], rules: RuleSet | str) -> tuple[str, ...]:
    try:
        return turn.build_turn_input(events, rules).notes
    except NoTurnYet:
        return ()
