"""What the views' storage reads and hands to the read models: the live generation's pointer
(`Pointer`), and what one statement of a turn read reads (`TurnRows`, `TurnInputRows`)."""

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
    """What `PostgresViewStorage.turn_rows` read: the live pointer, the summary row's body (None
    before the first event), the log's version, the newest entries' bodies joined by the record
    separator U+001E (which JSON never holds unescaped) and the newest outcomes' bodies joined
    by the same separator, oldest first; `matches` is False when the guessed generation was not the
    live one (then only `live` is read)."""

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
    """What `PostgresViewStorage.turn_input_rows` read in one statement: the live pointer, the summary
    row's body (None before the first event), the log's version and, where the summary says its
    latest turn is still intact in the rows (`projections.row_fold.Head.turn_intact`), what that
    turn saw (`adapters.views.row_state.turn_rows_state`), each kind's row bodies joined by
    the record separator U+001E, oldest first: the first `turn.length` transcript messages, the
    run record entries of versions up to `turn.version` with those set aside for it, and the
    card outcomes recorded up to `turn.version`. The three are None when the turn is not intact
    (or there is none); `matches` is False when the guessed generation was not the live one
    (then only `live` is read)."""

    live: Pointer
    summary: str | None
    logged: int
    messages: str | None = None
    entries: str | None = None
    outcomes: str | None = None
    matches: bool = True
