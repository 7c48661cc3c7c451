"""The list's row of a conversation and what a page of the list asks of it. Each conversation has one narrow
row in its generation's list table (`views_g<N>_listing`; a dict in memory). It is written with its
summary (`listing_values`). The list orders, filters and pages on it. `ListQuery` is one page's ask
(`ViewStorage.listed`); `Listed` is one row it returns."""

from __future__ import annotations

from dataclasses import dataclass

from projections.summary_rows import Summary

OUTCOMES = ("failed", "waiting", "undecided", "erased")
"""The statuses a conversation's list row knows (`Listed.statuses`), in the order the list
shows them: a segment recorded failed, a card or question waiting, one left undecided, its
erasure recorded. The chain's state (`broken`, `verified`, `unchecked`) is the chain verdict
tables', not the row's."""


def listing_values(summary: Summary) -> tuple[int | None, str, int | None, int | None, int | None, int, int | None, int]:
    """Returns the list row of a summary as `LISTING`'s columns after `cid`: last activity, conversation,
    owner, users, failed, waiting, undecided, erased (0/1)."""
    return (
        summary.last_at,
        summary.conversation,
        summary.owner,
        summary.users,
        summary.failed,
        len(summary.open_waits),
        summary.undecided,
        1 if summary.erased else 0,
    )


def like_pattern(text: str) -> str:
    """Returns a LIKE pattern that finds `text` anywhere. `%`, `_` and `!` are escaped with `!` (`ESCAPE
    '!'`)."""
    escaped = text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


@dataclass(frozen=True)
class ListQuery:
    """What one page of the list asks. At most `limit` rows, newest activity first, then by `cid`
    descending. Filters: after `before` (a page's last `(at, cid)`); activity in [`since`, `until`) in
    microseconds; `owner`; `search`, a plain substring of the conversation id, ASCII case-insensitive;
    `statuses`, at least one of `OUTCOMES`."""

    limit: int
    before: tuple[int, str] | None = None
    since: int | None = None
    until: int | None = None
    owner: int | None = None
    search: str | None = None
    statuses: frozenset[str] = frozenset()

    def admits(self, row: Listed) -> bool:
        """Whether this query lists `row`, `limit` aside. The memory backend filters with it; the SQL
        statements follow it."""
        if row.at is None:
            return False
        if self.before is not None and (row.at, row.cid) >= self.before:
            return False
        if self.since is not None and row.at < self.since:
            return False
        if self.until is not None and row.at >= self.until:
            return False
        if self.owner is not None and row.owner != self.owner:
            return False
        if self.search and self.search.lower() not in row.conversation.lower():
            return False
        return not self.statuses or bool(self.statuses & set(row.statuses))


@dataclass(frozen=True)
class Listed:
    """One conversation's list row (`listing_values`) with its `cid` (the UUID's text)."""

    cid: str
    at: int | None
    conversation: str
    owner: int | None
    users: int | None
    failed: int | None
    waiting: int
    undecided: int | None
    erased: bool

    @classmethod
    def of(cls, cid: str, summary: Summary) -> Listed:
        """Returns the list row of conversation `cid` with `summary`."""
        at, conversation, owner, users, failed, waiting, undecided, erased = listing_values(summary)
        return cls(cid, at, conversation, owner, users, failed, waiting, undecided, bool(erased))

    @property
    def statuses(self) -> tuple[str, ...]:
        """The `OUTCOMES` this conversation has, in their order."""
        has = {
            "failed": bool(self.failed),
            "waiting": self.waiting > 0,
            "undecided": bool(self.undecided),
            "erased": self.erased,
        }
        return tuple(s for s in OUTCOMES if has[s])
