"""The newest run record entries and card outcomes of a conversation as this process last read
or wrote them (`TurnRowsCache`), so the turn read after its own append need not read them again.

A turn read on PostgreSQL reads, in one statement, the summary, the newest entries and the newest
card outcomes. Right after this process appended to the conversation, those rows are the ones
its last turn read saw with the append's writes applied: the append's document (`views`: the
entries upserted, deleted and set aside, the outcomes inserted) says exactly what changed, in
the transaction that committed. `seeded` takes them from a turn read, `advanced` follows an
append; the turn read's statement then leaves them unread when the summary is at the held version
(`PostgresViewStorage.turn_rows`' `held_at`). Anything this cannot follow exactly (an edit's
cut of card outcomes, an append not sent as one document, a version it did not see) drops
them, and the next read reads them again.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.views.caches import SEPARATOR
from projections.summary_rows import Summary
from projections.rules import RULE_SET_IDS, resolve

NEWEST_OUTCOMES = max(resolve(rules).max_notes for rules in RULE_SET_IDS) + 1
"""The card outcomes a turn read fetches with its summary: enough for any rule set's notes."""
NEWEST_ENTRIES = 2 * NEWEST_OUTCOMES
"""The run record entries a turn read reads at first (on PostgreSQL with its summary): the notes
take the newest until their budget is full, skipping entries of empty steps; a read that
reaches older ones reads them in one more statement (`ViewRows.entries`)."""


@dataclass(frozen=True)
class TurnRowsCache:
    """The newest entries and card outcomes of one conversation in generation `generation`, as
    they stand at summary version `version`: `seqs` and `entries` the seqs and bodies of the
    newest entries (at most the turn read's `NEWEST_ENTRIES`), oldest first, the seqs the
    summary's newest; `outcomes` the bodies of the newest card outcomes (at most
    `NEWEST_OUTCOMES`), oldest first, of `total` (the summary's count). Bodies are the rows' text
    as stored, each the same string object for as long as it is held."""

    generation: int
    version: int
    seqs: tuple[int, ...]
    entries: tuple[str, ...]
    outcomes: tuple[str, ...]
    total: int


def seeded(
    generation: int, summary: Summary, entries: str, outcomes: str, newest_entries: int, newest_outcomes: int
) -> TurnRowsCache | None:
    """Returns the rows a turn read's one statement read (`entries` and `outcomes`: bodies joined
    by SEPARATOR, oldest first, the newest `newest_entries` and `newest_outcomes` with `summary`)
    as TurnRowsCache, or None when they are not that many (the summary says how many there are)."""
    bodies = entries.split(SEPARATOR) if entries else []
    kept = outcomes.split(SEPARATOR) if outcomes else []
    if len(bodies) != min(newest_entries, len(summary.seqs)) or len(kept) != min(newest_outcomes, summary.outcomes):
        return None
    seqs = summary.seqs[len(summary.seqs) - len(bodies) :]
    return TurnRowsCache(generation, summary.version, tuple(seqs), tuple(bodies), tuple(kept), summary.outcomes)


def advanced(
    held: TurnRowsCache | None,
    generation: int,
    start: int,
    views: Mapping[str, Any] | None,
    after: Summary | None,
    newest_entries: int,
    newest_outcomes: int,
) -> TurnRowsCache | None:
    """Returns `held` after an append that committed: its fold began at summary version `start`,
    wrote the document section `views` (the append document of one call;
    None: the append was not sent as one document) and left summary `after`. Returns None where
    that cannot be followed exactly: nothing held of `start` in `generation`, an edit's cut of
    card outcomes, new outcomes not newer than the held version or not all the summary counts,
    or entries that are not the summary's newest seqs (a delete inside the held ones leaves one
    older unknown)."""
    if held is None or views is None or after is None or held.generation != generation or held.version != start:
        return None
    if views.get("drop_outcomes") is not None:
        return None
    seqs, bodies = list(held.seqs), list(held.entries)
    gone = {*views.get("delete_entries", ()), *views.get("aside", ())}
    if gone.intersection(seqs):
        kept = [(seq, body) for seq, body in zip(seqs, bodies, strict=True) if seq not in gone]
        seqs, bodies = [seq for seq, _ in kept], [body for _, body in kept]
    for seq, _segment, body in views.get("entries", ()):
        if not seqs or seq > seqs[-1]:  # a new entry: the newest (each append's usual write)
            seqs.append(seq)
            bodies.append(body)
            continue
        at = bisect_left(seqs, seq)
        if at < len(seqs) and seqs[at] == seq:  # a held entry updated (a decision, an answer)
            bodies[at] = body
        # else an entry older than those held, updated: not held (the check below sees to the rest)
    if len(seqs) > newest_entries:
        del seqs[: len(seqs) - newest_entries], bodies[: len(bodies) - newest_entries]
    if len(seqs) != min(newest_entries, len(after.seqs)) or tuple(seqs) != after.seqs[len(after.seqs) - len(seqs) :]:
        return None
    new = sorted(views.get("outcomes", ()), key=lambda row: (row[0], row[1]))
    if (new and int(new[0][0]) <= held.version) or held.total + len(new) != after.outcomes:
        return None
    outcomes = (*held.outcomes, *(row[4] for row in new))[-newest_outcomes:] if newest_outcomes else ()
    return TurnRowsCache(generation, after.version, tuple(seqs), tuple(bodies), tuple(outcomes), after.outcomes)
