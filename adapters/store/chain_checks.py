"""What the store keeps of its chain checks: per conversation, a verified position or a break. The
guard stores a break when a row is changed by hand. `adapters.store.kept_verdicts` turns them into
verdicts and back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

VERIFIED_TABLE = "chatrecord_chain_verified"
"""The table of each conversation's verified position (`VerifiedPosition`), one row each:
`originator_id` (key), `version`, `hash`, `verified_at` (ISO 8601, UTC), `verified_by`."""


@dataclass(frozen=True)
class VerifiedPosition:
    """The last chain position whose every hash was recomputed from GENESIS and found ok. `version`,
    its `hash`, when (`at`, UTC) and by what (`by`)."""

    originator_id: UUID
    version: int
    hash: bytes
    at: datetime
    by: str


GUARD = "chatrecord_chain_guard"
"""The name (prefix, on SQLite) of the triggers that store a break (`BrokenChain`, by
GUARD_BY) and delete the verified position of a conversation one of whose stored events or chain
rows is updated or deleted (by hand: chatrecord never does either), so every look shows it at
once. A position is trusted only where the guard exists (a store an earlier version wrote gets
it with the first position stored); a writer who drops it first, or a file copied back, is seen
only by a look that recomputes every hash or starts from the position."""
GUARD_BY = "the store's guard"
GUARD_DETAIL = (
    "its event or hash was {} in the database, outside chatrecord; chatrecord verify recomputes every hash and names the break"
)

BROKEN_TABLE = "chatrecord_chain_broken"
"""The table of each conversation's stored broken verdict (`BrokenChain`), one row each:
`originator_id` (key), `version`, `problem`, `detail`, `found_at` (ISO 8601, UTC), `found_by`."""


@dataclass(frozen=True)
class BrokenChain:
    """The break a check found: at `version`, its `problem` and `detail`, when (`at`, UTC), by what
    (`by`). It replaces the verified position and stays until a full recomputation finds the chain
    ok."""

    originator_id: UUID
    version: int
    problem: str
    detail: str
    at: datetime
    by: str


def chained_before(
    mark: str | None,
    breaks: Sequence[tuple[UUID, int, str]],
    positions: Sequence[tuple[UUID, int, bytes]],
    later: bool = False,
) -> str | None:
    """Returns why a conversation without chain rows was chained before, or None. It reads the chain
    `mark`, stored `breaks`, verified `positions`, and `later`: stored after a chained event."""
    if breaks:
        return f"the store recorded a break of its chain at version {breaks[0][1]} ({breaks[0][2]})"
    if positions:
        return f"its chain was verified up to version {positions[0][1]}"
    if mark is not None:
        return "the store's chain is keyed, and a keyed store chains every event it stores"
    if later:
        return "its events were stored after events the store chained, so by a version that chains every event"
    return None


def upgrade_refused(key: UUID | str, reason: str) -> str:
    """Returns the one line refusing to chain conversation `key` (`verify --upgrade`) for `reason`."""
    return (
        f"conversation {key}: refused to chain it (verify --upgrade): {reason}; its chain rows were deleted in "
        "the database (a tamper), it was not stored before the chain; nothing was changed; run: chatrecord verify"
    )
