"""The overview read model's rows (`projections.overview`), in a generation's tables.

A generation has `views_g<g>_overview` (per conversation: folded version, tracking position, the overview
as JSON of at most `BUCKETS` buckets) and `views_g<g>_overview_marks` (per segment and user message
point: key, version, kind, tone; an edit's cut looks them up). Appends do not write the overview; a
page's open folds the events since and writes them back. `read_overview` returns None where the live
generation lacks these tables, or the backend keeps none; the caller folds the log."""

from __future__ import annotations

from uuid import UUID

from adapters.store.application import ConversationStore
from adapters.views.ports import ViewStorage
from projections.overview import Marks, Overview, fold


class OverviewRows:
    """Reads a conversation's overview read model, caught up with its log first."""

    def __init__(self, storage: ViewStorage, store: ConversationStore) -> None:
        self.storage, self.store = storage, store

    def read(self, cid: UUID, generation: int, rules: str, logged: int, keep: bool = True) -> Overview | None:
        """Returns the overview of `cid` in `generation` under `rules`, folded to at least version `logged`.
        A kept one at `logged` is returned; else the events after it are folded and written back
        (`ViewStorage.overview`). A kept one past `logged` (a restored or failed-over database) is folded
        anew. Returns None where the generation or the backend keeps no overview tables, and, without `keep`
        (a store opened read-only), where none is kept at `logged`."""

        def catch_up(state: Overview, marks: Marks) -> Overview:
            events = list(self.store.events.get(cid, gt=state.version or None))
            return fold(state, events, rules, marks) if events else state

        return self.storage.overview(cid, generation, logged, catch_up, keep)
