"""Which events started the turns of one user message, read from a generation's `turns` table
(one row per model call a user message started, `(cid, version,
message, at)`, written by the fold's `Rows.put_turn` and never cut by an edit), for
`ReadModels.turn_starts`: what `replay --at N` reads before it reads the log up to that turn.

A turn's start does not depend on the rule set (`projections.turn.starts_turn` reads only the
event and whether the event before it was an edit), so the live generation's rows name the
turns of any rule set's replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.views.ports import ViewRows
from projections.summary_rows import Summary


@dataclass(frozen=True)
class TurnStarts:
    """The turn starts of user message `message` in one conversation's rows, read in one
    snapshot after the rows caught up with the log.

    `versions`: the versions of the events that started a turn of `message` (its typed
    message, each retry, each edit's cut that ran it again), oldest first; empty when it started
    none. `started`: then the user message numbers that started any turn, ascending (empty when
    `versions` is not, or when no turn started at all). `latest`: the version of the event that
    started the conversation's latest turn (None: no turn yet). `version`: the summary's version
    (the log's, at the read). `rules`: the live rule set of the rows read."""

    message: int
    versions: tuple[int, ...]
    started: tuple[int, ...]
    latest: int | None
    version: int
    rules: str


def turn_starts(rows: ViewRows, summary: Summary, rules: str, message: int) -> TurnStarts:
    """Returns the turn starts of user message `message` from one conversation's `rows`
    and its `summary`, the rows of rule set `rules` (`ViewRows.turn_starts`): it costs the
    conversation's turns, never its events."""
    versions, started = rows.turn_starts(message)
    latest = summary.turn.version if summary.turn is not None else None
    return TurnStarts(message, versions, started, latest, summary.version, rules)
