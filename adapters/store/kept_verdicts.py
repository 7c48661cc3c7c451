"""The chain verdicts a store keeps between processes: a verified position or a break, never both. A
look starts from a position. A stored break is shown until a full recomputation finds the chain ok."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from adapters.store.chain import CUTS
from adapters.store.chain_checks import BrokenChain, VerifiedPosition
from adapters.store.verify import Verdict


def from_position(position: VerifiedPosition, conversation: str) -> Verdict:
    """Returns the ok verdict a stored verified position stands for, with its version and hash."""
    return Verdict(
        conversation,
        position.originator_id,
        position.version,
        position.version,
        hash=position.hash,
        kept=position.version,
        kept_at=position.at,
        kept_by=position.by,
    )


def position_of(verdict: Verdict, by: str, at: datetime | None = None) -> VerifiedPosition | None:
    """Returns the verified position of an ok verdict that recomputed every hash, or None. It is at
    `at` (default now, UTC), by `by`."""
    if not verdict.ok or verdict.kept is not None or verdict.hash is None:
        return None
    return VerifiedPosition(verdict.originator_id, verdict.version, verdict.hash, at or datetime.now(UTC), by)


def from_broken(broken: BrokenChain, conversation: str) -> Verdict:
    """Returns the verdict a stored break stands for, with when and by what it was found."""
    return Verdict(
        conversation,
        broken.originator_id,
        broken.version,
        0,
        problem=broken.problem,
        detail=broken.detail,
        found_at=broken.at,
        found_by=broken.by,
    )


def broken_of(verdict: Verdict, by: str, at: datetime | None = None) -> BrokenChain | None:
    """Returns the break to store for a broken verdict this look found, at `at` (default now, UTC), by
    `by`. Returns None for an ok verdict, for `unchained` and for `unkeyed`."""
    if verdict.ok or verdict.found_at is not None or verdict.problem in (None, "unchained", "unkeyed"):
        return None
    assert verdict.problem is not None
    return BrokenChain(verdict.originator_id, verdict.version, verdict.problem, verdict.detail or "", at or datetime.now(UTC), by)


def held(verdict: Verdict | None, position: VerifiedPosition | None, broken: BrokenChain | None) -> Verdict | None:
    """Returns `verdict`, or `cut_off` when an ok head lies below a stored position or cut. A cut is
    stored as a break and never cleared."""
    if verdict is None or not verdict.ok:
        return verdict
    floor = max(
        position.version if position is not None else 0,
        broken.version if broken is not None and broken.problem in CUTS else 0,
    )
    if floor <= verdict.version:
        return verdict
    held_by = f"stored as verified by {position.by}" if position is not None and position.version == floor else "stored"
    detail = f"version {floor} was {held_by}; the store ends at version {verdict.version}: the newest events were removed"
    if held_by == "stored" and broken is not None and broken.problem == "cut_off":
        # the stored cut as the look that found it said it (a heads file's claim), not stored again by this look
        return replace(from_broken(broken, verdict.conversation), events=verdict.events)
    return Verdict(verdict.conversation, verdict.originator_id, floor, verdict.events, problem="cut_off", detail=detail)


def cleared_by_heads(verdict: Verdict, head_version: int | None, broken: BrokenChain | None, against: str) -> bool:
    """Returns True when `verdict` clears the stored `broken`, a `cut_off` a heads file look stored.
    The chain must be ok and reach `head_version`, matching its hash. A cut any other look stored is
    not cleared."""
    return (
        verdict.ok
        and head_version is not None
        and head_version <= verdict.version
        and broken is not None
        and broken.problem == "cut_off"
        and broken.by == against
    )
