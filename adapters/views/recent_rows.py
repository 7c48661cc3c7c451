"""The newest rows an append's writes left (`WrittenRowsCache`), which the next append's fold reads
instead of the tables (`adapters.views.ports.ViewRows.prime`)."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.views.edit_window import EditWindow
from projections.run_record import Entry
from projections.transcript import Message


@dataclass(frozen=True)
class WrittenRowsCache:
    """The newest rows of a conversation as the append that wrote them left them. Its newest entries by
    segment (at most `ENTRIES`), its newest transcript message by index, and what an edit's fold asks
    (`edit`; None: nothing). Kept with that append's summary, they answer the next append's lookups
    without a read. Valid as long as that summary."""

    entries: dict[str, Entry]
    messages: dict[int, Message]
    edit: EditWindow | None = None

    ENTRIES = 8
