"""The verdicts of the hash chains a store keeps between processes: each conversation's verified
position (`VerifiedPosition`: the last version whose every hash was recomputed and found ok) or
the break a check found (`BrokenChain`), never both. A look starts from a position; a stored
break is shown as it is, and the position is not trusted, until a look that recomputes every hash
finds the chain ok again."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from adapters.store.chain import CUTS
from adapters.store.chain_checks import BrokenChain, VerifiedPosition
from adapters.store.verify import Verdict


def from_position(position: VerifiedPosition, conversation: str) -> Verdict:
    """Returns the verdict a stored verified position stands for (`verify_after` starts from
    it): ok up to its version, with its hash, every hash up to there recomputed at its time by
    what it names."""
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
    """Returns the verified position an ok verdict that recomputed every hash (`kept` None)
    gives: its head, at `at` (default now, UTC), by `by`; None for any other verdict."""
    if not verdict.ok or verdict.kept is not None or verdict.hash is None:
        return None
    return VerifiedPosition(verdict.originator_id, verdict.version, verdict.hash, at or datetime.now(UTC), by)


def from_broken(broken: BrokenChain, conversation: str) -> Verdict:
    """Returns the verdict a stored break stands for: broken at its version, as it was found,
    when and by what (`Verdict.found_at`, `found_by`)."""
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
    """Returns the break to store for a broken verdict this look found (not one read back as
    stored), at `at` (default now, UTC), by `by`; None for an ok verdict, for `unchained` (a
    conversation stored before the chain existed: `verify --upgrade`'s to mend, no break) and
    for `unkeyed` (a chain of a store written before chains were keyed: `keys wrap`'s to mend,
    no break; its verified position is kept, which a re-key checks, so that a chain replaced
    by hand is not keyed: `ChainedRecorder.rekey_chain`)."""
    if verdict.ok or verdict.found_at is not None or verdict.problem in (None, "unchained", "unkeyed"):
        return None
    assert verdict.problem is not None
    return BrokenChain(verdict.originator_id, verdict.version, verdict.problem, verdict.detail or "", at or datetime.now(UTC), by)


def held(verdict: Verdict | None, position: VerifiedPosition | None, broken: BrokenChain | None) -> Verdict | None:
    """Returns `verdict` (a look's own), unless it is ok and its head lies below the version of
    the conversation's stored verified position, or of its stored break that names an event
    the chain once held (`CUTS`): then the chain was cut there, which no recomputed hash can
    see, and the verdict is `cut_off` at that version (stored as a break like any other, so the
    cut is never cleared, nor the position lowered)."""
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
    """Whether `verdict`, a look's own of a chain checked against a heads file whose line for its
    conversation records `head_version` (None: no line), clears the stored `broken`: a `cut_off`
    break stored by a look against a heads file (found by `against`), where this chain is ok,
    reaches that line and matched its hash (`adapters.store.verify`). A cut a wrong heads file
    claimed is cleared by a right one; a cut any other look stored is not."""
    return (
        verdict.ok
        and head_version is not None
        and head_version <= verdict.version
        and broken is not None
        and broken.problem == "cut_off"
        and broken.by == against
    )
