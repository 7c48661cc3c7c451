"""The view context read model: `pageId` of the latest turn and `lastPageId` (spec S34). `lastPageId`
is the page last selected, kept when a turn comes with page 0. It is no selected page: only the
prompt's page line reads it. Under `transcript-only`, `lastPageId` equals `pageId`. An edit goes
back to the kept messages' pages."""

from __future__ import annotations

from functools import singledispatch
from typing import Any

from domain.events import ConversationEvent, TurnsTruncated, UserMessagePosted
from domain.values import Immutable
from projections.dispatch import by_class
from projections.rules import RuleSet, resolve


class ViewContext(Immutable):
    """`page_id` of the latest turn and `last_page_id`, 0 meaning none. `changes` holds (message, page)
    for each typed message whose page differs from the one before."""

    page_id: int = 0
    """The page of the latest turn; 0 when none is selected."""
    last_page_id: int = 0
    """The page last selected in the conversation; 0 when none was yet."""
    changes: tuple[tuple[int, int], ...] = ()
    """(message, page) for each typed message whose page differs from the one before it."""

    def to_json(self) -> dict[str, Any]:
        """Returns `{"pageId": …, "lastPageId": …}` as the contract names them (docs/spec-map.md, D15)."""
        return {"pageId": self.page_id, "lastPageId": self.last_page_id}


def initial() -> ViewContext:
    """Returns the view context of a conversation before its first event."""
    return ViewContext()


def apply(state: ViewContext, event: ConversationEvent, rules: RuleSet | str) -> ViewContext:
    """Returns the view context after `event` under `rules`."""
    return _APPLY(event, state, resolve(rules))


def reading(rules: RuleSet) -> bool:
    """Returns what of `rules` the view context's fold reads (whether it keeps the last page):
    rule sets with the same reading fold the same view context from the same one."""
    return rules.keeps_last_page


def last_page(page_id: int, last_page_id: int, rules: RuleSet) -> int:
    """Returns lastPageId after a turn with `page_id`. Page 0 gives the page kept from before, when the
    rule set keeps it."""
    if page_id or not rules.keeps_last_page:
        return page_id
    return last_page_id


@singledispatch
def _apply(event: ConversationEvent, state: ViewContext, rules: RuleSet) -> ViewContext:
    return state


@_apply.register
def _(event: UserMessagePosted, state: ViewContext, rules: RuleSet) -> ViewContext:
    changes = state.changes
    if not changes or changes[-1][1] != event.page:
        changes = (*changes, (event.message, event.page))
    last_page_id = last_page(event.page, state.last_page_id, rules)
    return state.model_copy(update={"page_id": event.page, "last_page_id": last_page_id, "changes": changes})


@_apply.register
def _(event: TurnsTruncated, state: ViewContext, rules: RuleSet) -> ViewContext:
    changes = tuple(c for c in state.changes if c[0] <= event.after_message)
    page_id = last_page_id = 0
    for _, page in changes:
        page_id = page
        last_page_id = last_page(page, last_page_id, rules)
    return ViewContext(page_id=page_id, last_page_id=last_page_id, changes=changes)


_APPLY = by_class(_apply)
"""The dispatch the fold calls (`projections.dispatch`), made after every branch above is registered."""
