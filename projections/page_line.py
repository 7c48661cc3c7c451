"""The page line of a turn's system message (docs/spec-map.md, S36, S37).

With a selected page the user may see: that page. Without one (page 0), under a rule set that keeps
the last page, it says: no page is selected; which page was last; that earlier steps' pages are in
the records; and to ask before new work on another page. A page is named only where
`can_see_page(page_id)` allows it. Under `transcript-only`: "No page is selected."
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from projections.rules import RuleSet
from projections.view_context import ViewContext

PageCheck = Callable[[int], bool]
"""Whether the user may see a page (uid -> bool): a page is named only where it says yes."""


def every_page(page_id: int) -> bool:
    """Returns True: the page check of a user who may see every page (the default)."""
    return True


@dataclass(frozen=True)
class PageFilter:
    """The page check of a user who sees the `visible` pages only (all when empty), never a `hidden`
    one. Equal filters compare equal, so a read can be cached per filter."""

    visible: frozenset[int] = frozenset()
    hidden: frozenset[int] = frozenset()

    def __call__(self, page_id: int) -> bool:
        return (not self.visible or page_id in self.visible) and page_id not in self.hidden


def check_slot(can_see_page: PageCheck) -> Hashable | None:
    """Returns the cache slot of `can_see_page`. The filter itself; "every" for `every_page`; None for
    any other callable."""
    if isinstance(can_see_page, PageFilter):
        return can_see_page
    return "every" if can_see_page is every_page else None


NO_PAGE_BEFORE = "No page is selected."
NO_PAGE_NOW = "No page is selected now."
EARLIER_PAGES = "The transcript and the chat records say which pages earlier steps worked on."
ASK_FIRST = "Ask before starting new work on a page the user does not refer to."
HIDDEN_PAGE = "A page is selected; it is not named here."


def page_line(view: ViewContext, rules: RuleSet, can_see_page: PageCheck) -> str:
    """Returns the page line for a turn with view context `view`."""
    if view.page_id and can_see_page(view.page_id):
        return f"The selected page is page {view.page_id}."
    if not rules.keeps_last_page:
        return NO_PAGE_BEFORE
    if view.page_id:  # selected, but the user may not see it: not named, and not denied either
        return f"{HIDDEN_PAGE} {ASK_FIRST}"
    last = view.last_page_id
    if last and can_see_page(last):
        said = f"The page last selected in this conversation is page {last}."
    elif last:
        said = "A page was selected earlier in this conversation; it is not named here."
    else:
        said = "No page was selected earlier in this conversation."
    return " ".join((NO_PAGE_NOW, said, EARLIER_PAGES, ASK_FIRST))
