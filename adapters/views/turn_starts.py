"""Which events started the turns of one user message, from a generation's `turns` table. One row per model
call a user message started, `(cid, version, message, at)`. The fold writes them (`Rows.put_turn`); an
edit never cuts them. `replay --at N` reads them first. A turn's start does not depend on the rule set,
so the live rows serve any rule set's replay."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.views.ports import ViewRows
from projections.summary_rows import Summary


@dataclass(frozen=True)
class TurnStarts:
    """The turn starts of user message `message` in one conversation's rows, read in one snapshot.

    - `versions`: the events that started a turn of `message`, oldest first; empty when none.
    - `started`: if `versions` is empty, the user message numbers that started any turn, ascending.
    - `latest`: the version that started the latest turn (None: no turn yet).
    - `version`: the summary's version, the log's at the read.
    - `rules`: the live rule set of the rows read."""

    message: int
    versions: tuple[int, ...]
    started: tuple[int, ...]
    latest: int | None
    version: int
    rules: str


def turn_starts(rows: ViewRows, summary: Summary, rules: str, message: int) -> TurnStarts:
    """Returns the turn starts of user message `message` from `rows` and `summary` under `rules`. Costs the
    conversation's turns, never its events."""
    versions, started = rows.turn_starts(message)
    latest = summary.turn.version if summary.turn is not None else None
    return TurnStarts(message, versions, started, latest, summary.version, rules)
