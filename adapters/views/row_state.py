"""A conversation's read models (`TurnState`) built from its rows: after its last event (`_state`), or as
its latest turn saw them (`turn_rows_state`)."""

from __future__ import annotations

from typing import Any

from adapters.views.caches import MessagesCache, NotesCache
from projections.card_outcomes import CardOutcomes, held_outcomes
from projections.run_record import RunRecord
from projections.summary_rows import Summary
from projections.transcript import Transcript
from projections.turn import TurnState


def _state(rows: Any, summary: Summary) -> TurnState:
    """Returns the folded read models of a conversation from its rows (whole transcript)."""
    return TurnState.model_construct(
        transcript=Transcript(kind=summary.kind, messages=rows.messages()),
        record=RunRecord(
            entries=rows.entries(),
            dropped=summary.dropped,
            follow=summary.follow,
            open_waits=summary.open_waits,
            pending=summary.pending,
        ),
        outcomes=CardOutcomes(outcomes=rows.outcomes(), open_cards=summary.open_cards, approval=summary.approval),
        view=summary.view,
    )


def turn_rows_state(
    rows: Any, summary: Summary, kept: MessagesCache | None = None, rendered: NotesCache | None = None
) -> TurnState:
    """Returns the read models as the latest turn saw them, from rows that still hold them. It sets the
    first `turn.length` messages, the entries up to `turn.version` and those set aside for it, the card
    outcomes up to `turn.version` and the view context. Only what `turn_input` reads is set. `kept` and
    `rendered` are caches for decoding, where given."""
    mark = summary.turn
    assert mark is not None and summary.turn_intact
    read = rows.turn_rows(mark.length, mark.version, kept, rendered)
    if read is not None:  # one statement
        messages, entries, outcomes = read
    else:
        messages = rows.messages()[: mark.length]
        entries = (*rows.aside(), *(e for e in rows.entries() if e.seq <= mark.version))
        outcomes = tuple(o for o in rows.outcomes() if o.seq[0] <= mark.version)
    return TurnState.model_construct(
        transcript=Transcript(kind=summary.kind, messages=messages),
        record=RunRecord.model_construct(entries=entries, dropped=mark.dropped),
        outcomes=held_outcomes(outcomes),
        view=summary.view,
    )
