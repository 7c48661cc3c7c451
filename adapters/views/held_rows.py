"""The newest run record entries and card outcomes of a conversation as this process last read or wrote them
(`TurnRowsCache`). The turn read after its own append need not read them again. `seeded` takes them from
a turn read; `advanced` follows an append's document (`views`). The turn read's statement skips them when
the summary is at the held version (`turn_rows`' `held_at`). Anything not followed exactly drops them,
and the next read reads them again."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.views.caches import SEPARATOR
from projections.rules import RULE_SET_IDS, resolve
from projections.summary_rows import Summary

NEWEST_OUTCOMES = max(resolve(rules).max_notes for rules in RULE_SET_IDS) + 1
"""The card outcomes a turn read fetches with its summary: enough for any rule set's notes."""
NEWEST_ENTRIES = 2 * NEWEST_OUTCOMES
"""The run record entries a turn read reads at first (on PostgreSQL with its summary): the notes
take the newest until their budget is full, skipping entries of empty steps; a read that
reaches older ones reads them in one more statement (`ViewRows.entries`)."""


@dataclass(frozen=True)
class TurnRowsCache:
    """The newest entries and card outcomes of one conversation in `generation`, at summary `version`.
    `seqs`, `entries`: the newest entries' seqs and bodies, at most `NEWEST_ENTRIES`, oldest first.
    `outcomes`: the newest card outcomes' bodies, at most `NEWEST_OUTCOMES`, oldest first, of `total`.
    Bodies are stored text, each the same string object while held."""

    generation: int
    version: int
    seqs: tuple[int, ...]
    entries: tuple[str, ...]
    outcomes: tuple[str, ...]
    total: int


def seeded(
    generation: int, summary: Summary, entries: str, outcomes: str, newest_entries: int, newest_outcomes: int
) -> TurnRowsCache | None:
    """Returns the rows a turn read's statement read, as TurnRowsCache. None when they are fewer than
    `newest_entries` and `newest_outcomes`. `entries`, `outcomes`: bodies joined by SEPARATOR, oldest
    first."""
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
    """Returns `held` after a committed append, or None where it cannot be followed exactly. The fold began
    at summary version `start`, wrote document section `views` (None: not one document) and left summary
    `after`. None when: nothing is held at `start` in `generation`; an edit cut card outcomes; new
    outcomes are not newer or not all counted; entries are not the summary's newest seqs."""
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
