"""Replay turn by turn: each turn's model input streamed as the log is folded (`turn_stream`).

A turn is given whole (`TurnInput.to_json`, `replay --json`) or as its changes (`--changes`). A
turn's changes, beside `message`, `at` and `view_context`:

- `page_line`: the system text where it differs from the turn before's; null when the same.
- `kept`, `appended`: the transcript is the turn before's first `kept` messages, then `appended`.
- `notes`: `dropped` (`n`, `text`), `moved` (`was`) and `added` (`PlacedNote` with `n`). Other notes
  keep their order and fill the positions left.
- `record`: entries `dropped` (by segment) and `changed` (whole; a new one goes at the end).
- `card_outcomes`: the turn before's first `kept`, then `appended`.

`Rebuilt`, the reference reader, gives each whole turn as `replay --json` prints it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from domain.events import ConversationEvent, MessageEdited
from projections import turn as turns
from projections.card_outcomes import CardOutcome
from projections.notes import select_notes
from projections.page_line import PageCheck, every_page, page_line
from projections.placement import PlacedNote, apply_notes, block_ends, place_notes
from projections.rules import RuleSet, resolve
from projections.run_record import Entry
from projections.transcript import Message, held_messages
from projections.turn import TurnState, iso, starts_turn


class HeldMessages(Sequence[Message]):
    """A transcript's messages read where the fold holds them, without building their tuple."""

    def __init__(self, state: TurnState) -> None:
        self.done, self.n, self.last = held_messages(state.transcript)

    def __len__(self) -> int:
        return self.n + (self.last is not None)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index == self.n and self.last is not None:
            return self.last
        if not 0 <= index < self.n:
            raise IndexError(index)
        return self.done[index]


@dataclass(frozen=True)
class Turn:
    """One turn as the fold met it: `index` (from 0), its user message, its time and the read models."""

    index: int
    message: int
    at: Any
    state: TurnState


def turn_states(events: Iterable[ConversationEvent], rules: RuleSet) -> Iterator[Turn]:
    """Yields each turn the events start, with its read models; one pass, nothing of an earlier turn kept."""
    state, edited, index = turns.initial(), None, 0
    for event in events:
        state = turns.apply(state, event, rules)
        number = starts_turn(event, edited)
        edited = event.message if isinstance(event, MessageEdited) else None
        if number is not None:
            yield Turn(index, number, event.timestamp, state)
            index += 1


def placed_notes(state: TurnState, rules: RuleSet, can_see_page: PageCheck = every_page) -> tuple[PlacedNote, ...]:
    """Returns the notes of `state`'s turn input with their places, as `turn_input` places them."""
    if not rules.notes or state.transcript.kind != "chat":
        return ()
    held = HeldMessages(state)
    selected, older = select_notes(state.record, state.outcomes.outcomes, rules, can_see_page)
    return place_notes(selected, older, len(held), lambda wanted: {i: held[i] for i in wanted}, lambda n: block_ends(held, n))


@dataclass(frozen=True)
class Seen:
    """What a turn's changes are counted from: the turn before's transcript, notes, page line, record,
    outcomes."""

    messages: HeldMessages
    notes: tuple[PlacedNote, ...]
    system: str
    record: tuple[Entry, ...]
    outcomes: tuple[CardOutcome, ...]


def seen(state: TurnState, rules: RuleSet, can_see_page: PageCheck = every_page) -> Seen:
    """Returns what the turn of `state` shows, for the changes of the turn after it."""
    return Seen(
        HeldMessages(state),
        placed_notes(state, rules, can_see_page),
        page_line(state.view, rules, can_see_page),
        state.record.entries,
        state.outcomes.outcomes,
    )


NOTHING = Seen(HeldMessages(turns.initial()), (), "", (), ())
"""What the first turn's changes are counted from."""


def _kept_messages(before: HeldMessages, now: HeldMessages) -> int:
    """Returns how many first messages `now` shares with `before`."""
    start = min(before.n, now.n) if before.done is now.done else 0
    limit = min(len(before), len(now))
    kept = start
    while kept < limit and (before[kept] is now[kept] or before[kept] == now[kept]):
        kept += 1
    return kept


def _kept_prefix(before: tuple[Any, ...], now: tuple[Any, ...]) -> int:
    if now[: len(before)] == before:  # the usual case, compared at C speed (identity first)
        return len(before)
    kept = 0
    while kept < min(len(before), len(now)) and before[kept] == now[kept]:
        kept += 1
    return kept


def _notes_changes(before: Sequence[PlacedNote], now: Sequence[PlacedNote]) -> dict[str, Any]:
    """Returns the notes `added`, `moved` and `dropped` between `before` and `now`. Added and moved
    carry `n`, the position in `now`; moved also `was`, the position in `before`. Dropped carry `n`
    in `before` and the text. Unchanged notes are not named."""
    places: dict[tuple[str, int, str, int | None], list[int]] = {}
    for i, n in enumerate(before):
        places.setdefault((n.text, n.index, n.into, n.at), []).append(i)
    stayed: set[int] = set()
    rest: list[tuple[int, PlacedNote]] = []
    last = -1
    for position, note in enumerate(now):
        found = next((i for i in places.get((note.text, note.index, note.into, note.at), ()) if i > last), None)
        if found is None:
            rest.append((position, note))
            continue
        stayed.add(found)
        last = found
    left: dict[str, list[int]] = {}
    for i, n in enumerate(before):
        if i not in stayed:
            left.setdefault(n.text, []).append(i)
    added, moved = [], []
    for position, note in rest:
        old = left.get(note.text)
        if old:
            moved.append({**note.to_json(), "n": position, "was": old.pop(0)})
        else:
            added.append({**note.to_json(), "n": position})
    dropped = sorted(i for held in left.values() for i in held)
    return {"added": added, "moved": moved, "dropped": [{"n": i, "text": before[i].text} for i in dropped]}


def _record_changes(before: tuple[Entry, ...], now: tuple[Entry, ...]) -> dict[str, Any]:
    old = {e.segment: e for e in before}
    present = {e.segment for e in now}
    changed = [e.to_json() for e in now if (o := old.get(e.segment)) is None or (o is not e and o != e)]
    return {"dropped": [e.segment for e in before if e.segment not in present], "changed": changed}


def changes_json(turn: Turn, before: Seen, now: Seen) -> dict[str, Any]:
    """Returns the `--changes` object of `turn`, from what it shows (`now`) and what the turn before
    showed. `before` is `NOTHING` for the first turn."""
    kept = _kept_messages(before.messages, now.messages)
    kept_outcomes = _kept_prefix(before.outcomes, now.outcomes)
    return {
        "message": turn.message,
        "at": iso(turn.at),
        "view_context": turn.state.view.to_json(),
        "page_line": now.system if now.system != before.system or before is NOTHING else None,
        "kept": kept,
        "appended": [{"role": m.role, "content": m.text} for m in now.messages[kept:]],
        "notes": _notes_changes(before.notes, now.notes),
        "record": _record_changes(before.record, now.record),
        "card_outcomes": {"kept": kept_outcomes, "appended": [o.to_json() for o in now.outcomes[kept_outcomes:]]},
    }


def in_range(message: int, first: int | None, last: int | None) -> bool:
    """Whether the turn of user message `message` lies in `first`…`last` (either open)."""
    return (first is None or message >= first) and (last is None or message <= last)


class TurnWriter:
    """Writes each turn's JSON under one rule set, whole or as its changes. `passed` is told every turn
    in order, so changes count from a turn not written too."""

    def __init__(self, rules: RuleSet, can_see_page: PageCheck, changes: bool) -> None:
        self.rules, self.can_see_page, self.changes = rules, can_see_page, changes
        self.before: Turn | None = None
        self.shown: tuple[int, Seen] | None = None

    def json(self, turn: Turn) -> dict[str, Any]:
        """Returns the JSON of `turn`, whole or its changes."""
        if not self.changes:
            return turns.turn_input(turn.state, turn.message, turn.at, self.rules, self.can_see_page).to_json()
        if self.before is None:
            earlier = NOTHING
        elif self.shown is not None and self.shown[0] == self.before.index:
            earlier = self.shown[1]
        else:
            earlier = seen(self.before.state, self.rules, self.can_see_page)
        now = seen(turn.state, self.rules, self.can_see_page)
        self.shown = (turn.index, now)
        return changes_json(turn, earlier, now)

    def passed(self, turn: Turn) -> None:
        self.before = turn


def turn_stream(
    events: Iterable[ConversationEvent],
    rules: RuleSet | str,
    can_see_page: PageCheck = every_page,
    *,
    changes: bool = False,
    first: int | None = None,
    last: int | None = None,
    start: int = 0,
    limit: int | None = None,
) -> Iterator[tuple[Turn, dict[str, Any]]]:
    """Yields each turn of messages `first`…`last` (inclusive, either open) with its JSON. It starts at
    the `start`th turn and yields at most `limit`. Changes count from the turn before, yielded or
    not. One pass; a turn not yielded costs its fold only."""
    writer = TurnWriter(resolve(rules), can_see_page, changes)
    given = 0
    for turn in turn_states(events, writer.rules):
        if turn.index >= start and in_range(turn.message, first, last):
            if limit is not None and given >= limit:
                return
            yield turn, writer.json(turn)
            given += 1
        writer.passed(turn)


class Rebuilt:
    """The reference reader of the `--changes` form. Fed each turn's changes in order, from the first
    or after the one it `started` at, it returns each whole turn as `replay --json` prints it."""

    def __init__(self) -> None:
        self.transcript: list[dict[str, str]] = []
        self.notes: list[dict[str, Any]] = []
        self.system = ""
        self.record: list[dict[str, Any]] = []
        self.outcomes: list[dict[str, Any]] = []

    def turn(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Returns the whole turn of `changes`, the turn before's being the last returned."""
        self.transcript = [*self.transcript[: changes["kept"]], *changes["appended"]]
        notes = changes["notes"]
        gone = {n["n"] for n in notes["dropped"]} | {n["was"] for n in notes["moved"]}
        stay = [n for i, n in enumerate(self.notes) if i not in gone]
        given = {n["n"]: n for n in [*notes["added"], *notes["moved"]]}
        left = iter(stay)
        self.notes = [given[i] if i in given else next(left) for i in range(len(stay) + len(given))]
        if changes["page_line"] is not None:
            self.system = changes["page_line"]
        dropped = set(changes["record"]["dropped"])
        changed = {e["segment"]: e for e in changes["record"]["changed"]}
        kept = [changed.pop(e["segment"], e) for e in self.record if e["segment"] not in dropped]
        self.record = kept + list(changed.values())
        outcomes = changes["card_outcomes"]
        self.outcomes = self.outcomes[: outcomes["kept"]] + outcomes["appended"]
        messages = apply_notes(
            [Message.model_validate({"role": m["role"], "text": m["content"]}) for m in self.transcript],
            [PlacedNote(n["text"], n["index"], n["into"], n["at"], n["at_byte"]) for n in self.notes],
        )
        return {
            "message": changes["message"],
            "at": changes["at"],
            "view_context": changes["view_context"],
            "messages": [{"role": "system", "content": self.system}] + [{"role": m.role, "content": m.text} for m in messages],
            "notes": [n["text"] for n in self.notes],
            "record": self.record,
            "card_outcomes": self.outcomes,
        }
