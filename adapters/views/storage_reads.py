"""What the views' storage hands the read models: the live pointer (`Pointer`) and one statement's turn read
(`TurnRows`, `TurnInputRows`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pointer:
    """The live generation, its rule set, and the next generation number to hand out."""

    generation: int
    rules: str
    next: int


@dataclass(frozen=True)
class TurnRows:
    """What `PostgresViewStorage.turn_rows` read. The live pointer, the summary's body (None before the
    first event), the log's version, and the newest entries' and outcomes' bodies, oldest first, joined
    by U+001E. `matches` is False when the guessed generation was not live; then only `live` is read."""

    live: Pointer
    summary: str | None
    logged: int
    entries: str
    outcomes: str
    matches: bool = True
    skipped: bool = False
    """True when the entries and outcomes were left unread (the summary was at the version the
    caller keeps notes of)."""
    held: bool = False
    """True when the entries and outcomes were left unread because the summary was at the version
    whose entries and outcomes the caller holds (`held_at`, `adapters.views.held_rows.TurnRowsCache`)."""
    topics: str | None = None
    """The distinct topics of the conversation's events after the version `since` asked about,
    up to the summary's, joined by U+001E; None when not asked, or after more than TAIL_EVENTS."""
    tail: str | None = None
    """The transcript rows from index `tail_from` on (at most TAIL_ROWS + 1), each as its
    index, role, number, block end and body joined by U+001F (a missing value empty), the
    rows joined by U+001E; None when `topics` is."""
    tip: bytes | None = None
    """The hash chain's hash at the summary's version (None: the store keeps no chain): what the
    summary's version stands for, so a read kept of that version is known to be of this log."""
    since_tip: bytes | None = None
    """The hash chain's hash at the version `since` asked about."""


@dataclass(frozen=True)
class TurnInputRows:
    """What `PostgresViewStorage.turn_input_rows` read in one statement.

    The live pointer, the summary's body (None before the first event) and the log's version. Where the
    latest turn is intact (`Summary.turn_intact`), what it saw, oldest first, joined by U+001E: the first
    `turn.length` messages, the entries up to `turn.version` with those set aside, and the card outcomes
    up to `turn.version`. These three are None otherwise. `matches` is False when the guessed generation
    was not live; then only `live` is read."""

    live: Pointer
    summary: str | None
    logged: int
    messages: str | None = None
    entries: str | None = None
    outcomes: str | None = None
    matches: bool = True
