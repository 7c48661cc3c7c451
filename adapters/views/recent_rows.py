"""The newest rows an append's writes left (`WrittenRowsCache`), which the next append's fold reads
instead of the tables (`adapters.views.ports.ViewRows.prime`)."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.views.edit_window import EditWindow
from projections.run_record import Entry
from projections.transcript import Message


@dataclass(frozen=True)
class WrittenRowsCache:
    """The newest rows of a conversation as the append that wrote them left them: its newest
    run record entries by segment (at most `ENTRIES`) and its newest transcript message by
    index, and what an edit's fold asks (`edit`, `EditWindow`; None: nothing). Kept with that
    append's summary (`SummaryCache`), they answer the next append's lookups (a decision's entry,
    the message an answer joins, an edit's rows) without a read: valid exactly as long as the
    summary they came with, which is used only at its own version."""

    entries: dict[str, Entry]
    messages: dict[int, Message]
    edit: EditWindow | None = None

    ENTRIES = 8
