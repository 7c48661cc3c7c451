"""A turn's notes: the chat's own words about what ran (spec S24–S30).

Every note is labelled `[Chat record — written by the chat from the run, not by the assistant: …]`.
It never holds tool arguments, results or model text. Identifiers are reduced by
`projections.identifiers.clean`; a page the user may not see is never named. One note per run record
entry, one per card outcome. The budget is `RuleSet.max_notes` and `RuleSet.max_note_chars`
(labelled characters). Over it, notes where nothing ran, was written or decided go first, then the
oldest. The first note then says older notes exist. Only the newest notes are rendered."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from projections.card_outcomes import CardOutcome
from projections.identifiers import clean, clean_answer
from projections.page_line import PageCheck
from projections.rules import RuleSet
from projections.run_record import Entry, RunRecord, Waiting

LABEL = "Chat record — written by the chat from the run, not by the assistant"
OPEN = f"[{LABEL}: "
CLOSE = "]"


def note_body(note: str) -> str:
    """Returns a note's text without its label (`OPEN` … `CLOSE`); any other text as it is."""
    if note.startswith(OPEN) and note.endswith(CLOSE):
        return note[len(OPEN) : -len(CLOSE)]
    return note


def split_notes(content: str, notes: Sequence[str], start: int) -> tuple[list[tuple[str, Any]], int]:
    """Returns a message's `content` cut into ("text", str) and ("notes", [note, …]) pieces. It finds
    `notes[start:]` in order and also returns the index of the first not found. Blank text between
    two notes joins them; blank text pieces are left out."""
    pieces: list[tuple[str, Any]] = []
    pos, index = 0, start
    while index < len(notes):
        found = content.find(notes[index], pos)
        if found < 0:
            break
        between = content[pos:found]
        if between.strip() or not pieces or pieces[-1][0] != "notes":
            pieces.append(("text", between))
            pieces.append(("notes", []))
        pieces[-1][1].append(notes[index])
        pos, index = found + len(notes[index]), index + 1
    pieces.append(("text", content[pos:]))
    return [p for p in pieces if p[0] == "notes" or p[1].strip()], index


OLDER = (
    "Older notes of this conversation exist and cannot be read in this turn; "
    "that they are missing does not mean that nothing happened."
)


LISTED = 8
"""At most this many tools, records, waiting calls or fields are named in one note; the rest
are counted ("and 292 more"), so no single note can outgrow the budget and silence the others."""
LISTED_CHARS = 300
"""And a list names items only while it stays this short (the first item always), so a note's
closing sentences (nothing saved, AI Tasks) are never cut off."""

STEPS = {
    "turn": "The run of a user message",
    "retry": "The retried run of a user message",
    "approval": "The continuation after a card decision",
    "answer": "The continuation after an answer to a question",
}
ENDINGS = {
    "completed": "completed",
    "awaiting_approval": "paused for a card",
    "awaiting_input": "paused for a question",
    "failed": "failed",
    "cancelled": "was cancelled",
    "suspend_failed": "could not pause for a card and failed",
    "guardrail_blocked": "was blocked by a guardrail",
    "guardrail_approval_required": "stopped for a guardrail approval",
    "requeued": "was requeued",
    "lease_lost": "lost its lease",
    "unknown": "ended in a state the chat does not know",
}
UNDECIDED = {"new_message": "the editor wrote a new message", "tour_ended": "the editor ended the tour"}
OUTCOMES = {
    "applied": "approved ({answer}) and applied; the write is complete",
    "check": "approved ({answer}); whether it was saved needs checking, the write is not confirmed",
    "not_applied": "approved ({answer}) but not applied: the change was not saved as proposed",
    "kept": "declined with {answer}: the current value was kept, nothing was saved",
    "skipped": "declined with {answer}: skipped, nothing was saved",
    "variant": "declined with {answer}: nothing was saved, another proposal was asked for",
    "declined": "declined ({answer}): nothing was saved",
}
DEFAULT_ANSWERS = {"kept": "Behalten", "skipped": "Überspringen", "variant": "Andere Variante", "declined": "abgelehnt"}
FLAGGED = (
    "The chat flagged this answer: a change it describes as done in this step was not saved; "
    "what earlier steps saved is in the chat records."
)


@dataclass(frozen=True, slots=True)
class Note:
    """A rendered note. `body` is without the label. `anchor` is `message` (a user message number) or
    `position` (`at`). `order` sorts notes at one place. `seq` is its place in time."""

    body: str
    empty: bool
    seq: tuple[int, int]
    order: tuple[int, int, int, int]
    anchor: str
    at: int
    segment: str | None = None

    @property
    def text(self) -> str:
        """Returns the labelled note."""
        return labelled(self.body)


def labelled(body: str) -> str:
    """Returns `body` inside the chat record's label."""
    return f"{OPEN}{body}{CLOSE}"


LABEL_CHARS = len(OPEN) + len(CLOSE)
"""What the label adds to a note's length: `len(note.text) == LABEL_CHARS + len(note.body)`
(the budget counts labelled notes without building their texts)."""


def record_name(record: str | None, can_see_page: PageCheck) -> str:
    """Returns `table:uid` reduced to identifier characters; a page the user may not see is not named."""
    if record is None:
        return "a new record"
    table, _, uid = record.rpartition(":")
    if table == "pages" and uid.isdigit() and not can_see_page(int(uid)):
        return "a page not named here"
    return clean(record)


MAX_BODY = 2500
"""A note's text is cut to this many characters: a safety net under LISTED and LISTED_CHARS,
which keep notes far shorter; the budget of 6,000 always holds the newest note."""


def bounded(body: str) -> str:
    """Returns `body`, cut to MAX_BODY characters with `…` where it was longer."""
    return body if len(body) <= MAX_BODY else body[: MAX_BODY - 1] + "…"


def listed(items: list[str], separator: str = ", ") -> str:
    """Returns the first `items` joined (at most LISTED, about LISTED_CHARS) and how many more there are."""
    shown = items[:1]
    for item in items[1:LISTED]:
        if sum(map(len, shown)) + len(item) > LISTED_CHARS:
            break
        shown.append(item)
    text = separator.join(shown)
    if len(items) > len(shown):
        text += f"{separator}and {len(items) - len(shown)} more ({len(items)} in all)"
    return text


def _call(tool: str, record: str | None, fields: tuple[str, ...], can_see_page: PageCheck) -> str:
    text = clean(tool)
    if record is not None:
        text += f" on {record_name(record, can_see_page)}"
    if fields:
        text += (" (field " if len(fields) == 1 else " (fields ") + listed([clean(f) for f in fields]) + ")"
    return text


def _waiting(calls: tuple[Waiting, ...], can_see_page: PageCheck) -> str:
    return listed([_call(w.tool, w.record, w.fields, can_see_page) for w in calls], "; ")


def _writes(entry: Entry, can_see_page: PageCheck) -> list[str]:
    """Returns `record (completeness)` per record written, repeats counted: `pages:42 (complete, 3
    writes)`."""
    counts: dict[str, dict[str, int]] = {}
    for w in entry.written:
        how = counts.setdefault(record_name(w.record, can_see_page), {})
        how[w.completeness] = how.get(w.completeness, 0) + 1
    return [f"{name} ({_completeness(how)})" for name, how in counts.items()]


def _completeness(how: dict[str, int]) -> str:
    """Returns `complete`, `complete, 3 writes` or `2 writes: 1 complete, 1 unconfirmed`."""
    writes = sum(how.values())
    if len(how) == 1:
        [(word, _)] = how.items()
        return word if writes == 1 else f"{word}, {writes} writes"
    return f"{writes} writes: " + ", ".join(f"{n} {word}" for word, n in how.items())


def _card_or_question(entry: Entry, can_see_page: PageCheck) -> list[str]:
    """Returns the sentences on the card or question a segment paused for: what became of it."""
    calls = _waiting(entry.waiting, can_see_page)
    if entry.undecided is not None:
        said = [
            f"Left undecided, {UNDECIDED.get(entry.undecided, 'undecided')}: {calls or 'the card or question'}. "
            "Nothing from it was saved in the chat."
        ]
        if entry.decidable_elsewhere:
            said.append("The run may still be decided in AI Tasks; such a later decision is not recorded here.")
        return said
    if entry.resolved == "answered":
        return ["The editor answered the question."]
    if entry.resolved == "decided" and entry.decision is None:
        return ["The card was decided; its card outcome says how."]  # the outcome names the calls
    if entry.decision is not None:
        answer = clean_answer(entry.decision)
        named = f": {calls}." if calls else "; the card named no waiting call."
        if answer == "Übernehmen":
            return [f"The editor approved the card ({answer}){named}"]
        return [f"The editor declined the card ({answer}){named} Nothing of it was saved."]
    if entry.waiting:
        return [f"Still waiting for a decision: {calls}."]
    return []


def entry_body(entry: Entry, can_see_page: PageCheck) -> str:
    """Returns the note text of one run record entry (without the label)."""
    ending = ENDINGS.get(entry.ending, f"ended {clean(entry.ending)}")
    parts = [f"{STEPS.get(entry.trigger, 'A run segment')} {ending}."]
    if entry.tools:
        tools = listed(
            [
                f"{clean(t.name)} ({t.calls} call{'s' if t.calls != 1 else ''}" + (f", {t.failed} failed)" if t.failed else ")")
                for t in entry.tools
            ]
        )
        parts.append(f"Tools run: {tools}.")
    else:
        parts.append("Tools run: none.")
    written = listed(_writes(entry, can_see_page))
    parts.append(f"Records written: {written or 'none'}.")
    parts.extend(_card_or_question(entry, can_see_page))
    if entry.flagged:
        parts.append(FLAGGED)
    return " ".join(parts)


def outcome_body(outcome: CardOutcome, can_see_page: PageCheck) -> str:
    """Returns the note text of one card outcome (without the label)."""
    said = OUTCOMES.get(outcome.outcome, "decided; outcome " + clean(outcome.outcome))
    answer = outcome.answer or DEFAULT_ANSWERS.get(outcome.outcome)
    if answer is None:  # an approval a legacy row kept without its answer: no button is named
        said = said.replace(" ({answer})", "")
    said = said.format(answer=clean_answer(answer))
    return f"Card {_call(outcome.tool, outcome.record, outcome.fields, can_see_page)}: {said}."


def _entry_note(entry: Entry, can_see_page: PageCheck) -> Note:
    return Note(
        body=bounded(entry_body(entry, can_see_page)),
        empty=entry.empty,
        seq=(entry.seq, 0),
        order=(entry.card_outcomes_before, 0, entry.seq, 0),
        anchor="message",
        at=entry.message,
        segment=entry.segment,
    )


def _outcome_note(outcome: CardOutcome, can_see_page: PageCheck) -> Note:
    return Note(
        body=bounded(outcome_body(outcome, can_see_page)),
        empty=False,
        seq=outcome.seq,
        order=(outcome.index, 1, *outcome.seq),
        anchor="position",
        at=outcome.after,
    )


def _newest_first(record: RunRecord, outcomes: Sequence[CardOutcome]) -> Iterator[Entry | CardOutcome]:
    """Yields entries and card outcomes merged, newest first, lazily."""
    entries = record.entries
    i, j = len(entries) - 1, len(outcomes) - 1
    while i >= 0 or j >= 0:
        entry = entries[i] if i >= 0 else None  # each entry read once (a lazy sequence decodes on reading)
        if entry is not None and (j < 0 or (entry.seq, 0) > outcomes[j].seq):
            yield entry
            i -= 1
        else:
            yield outcomes[j]
            j -= 1


def note_of(item: Entry | CardOutcome, can_see_page: PageCheck) -> Note:
    """Returns the note of one run record entry or card outcome. It depends on its arguments only, so a
    caller may cache it (`NoteOf`)."""
    return _entry_note(item, can_see_page) if isinstance(item, Entry) else _outcome_note(item, can_see_page)


NoteOf = Callable[[Entry | CardOutcome, PageCheck], Note]
"""What renders an item's note: `note_of`, or one that keeps the notes it rendered."""


def select_notes(
    record: RunRecord,
    outcomes: Sequence[CardOutcome],
    rules: RuleSet,
    can_see_page: PageCheck,
    outcome_count: int | None = None,
    note: NoteOf = note_of,
) -> tuple[list[Note], bool]:
    """Returns the notes within the budget, oldest first, and whether older ones were left out. If so,
    the first note says it; its sentence counts in the budget. `outcomes` may be only the newest, at
    least `rules.max_notes + 1`, with `outcome_count` the total. `note` renders each item (default
    `note_of`)."""
    total = len(record.entries) + (len(outcomes) if outcome_count is None else outcome_count)
    if record.dropped == 0 and total <= rules.max_notes:
        every = [note(item, can_see_page) for item in _newest_first(record, outcomes)]
        if sum(len(n.body) for n in every) + LABEL_CHARS * len(every) <= rules.max_note_chars:
            return every[::-1], False
    room = rules.max_note_chars - len(OLDER) - 1
    kept: list[Note] = []
    chars = 0

    def fits(rendered: Note) -> bool:
        return len(kept) < rules.max_notes and chars + LABEL_CHARS + len(rendered.body) <= room

    exhausted = True
    for item in _newest_first(record, outcomes):
        if isinstance(item, Entry) and item.empty:
            continue
        rendered = note(item, can_see_page)
        if not fits(rendered):
            exhausted = False  # the oldest non-empty notes go
            break
        kept.append(rendered)
        chars += LABEL_CHARS + len(rendered.body)
    if exhausted:
        for entry in reversed(record.entries):
            if not entry.empty:
                continue
            rendered = note(entry, can_see_page)
            if not fits(rendered):
                break  # the oldest notes of empty steps go
            kept.append(rendered)
            chars += LABEL_CHARS + len(rendered.body)
    kept.sort(key=lambda n: n.seq)
    return kept, True
