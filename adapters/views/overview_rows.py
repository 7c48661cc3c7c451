"""The overview read model's rows (`projections.overview`), in a generation's tables.

A generation `g` made by this version has two more tables: `views_g<g>_overview` (one row per
conversation: the version its overview is folded to, its tracking position, and the overview
as JSON, at most `projections.overview.BUCKETS` buckets) and `views_g<g>_overview_marks` (one
row per segment and user message point: its key, version, kind and tone, which an edit's cut
looks up). The overview has its own tracking position: appends do not write it (a page's
first open after new events folds those events, and writes them); so the first open of the
page after a server start reads one row, plus the events appended since the last open, never
the whole log. `read_overview` returns None where the live generation has no such tables (an
earlier version made it: `chatrecord rebuild` makes a generation with them) or the backend
keeps no SQL tables (the in-memory store): the caller folds the log then, as before.
"""

from __future__ import annotations

from uuid import UUID

from adapters.store.application import ConversationStore
from adapters.views.ports import ViewStorage
from projections.overview import Marks, Overview, fold


class OverviewRows:
    """Reads a conversation's overview read model, caught up with its log first."""

    def __init__(self, storage: ViewStorage, store: ConversationStore) -> None:
        self.storage, self.store = storage, store

    def read(self, cid: UUID, generation: int, rules: str, logged: int) -> Overview | None:
        """Returns the overview of conversation `cid` (its stored key's UUID) in `generation`
        (under its rule set `rules`), folded up to at least version `logged` (the log's now):
        the kept one when it is; else the events after its version folded and written back
        (`ViewStorage.overview`). A kept one folded past `logged` (the database was restored,
        or failed over, to a shorter log) is folded anew from the log's start. None where the
        generation has no overview tables, or the backend keeps none."""

        def catch_up(state: Overview, marks: Marks) -> Overview:
            events = list(self.store.events.get(cid, gt=state.version or None))
            return fold(state, events, rules, marks) if events else state

        return self.storage.overview(cid, generation, logged, catch_up)
