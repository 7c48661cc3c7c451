"""The store's conversations: how a conversation id a user gives is found (`stored_id`), the
list of conversations, newest activity first, in pages (`list_conversations`); a conversation
written back as the chat's JSON Lines is `adapters.service.export`.

Ids. A conversation is stored under the reduced form of the chat's id
(`adapters.ingest.names.reduce_id`: `chat 17` is kept as `chat17:h9a90eaf363ff759f`), and that
stored form is what `list`, `verify` and the error messages print; reducing a stored form gives
it back, so `stored_id` accepts both. A store written before stored forms were kept as they are
may hold a conversation of a chat id that looked like one under that id reduced once more
(`names.earlier_stored_id`); `stored_id` finds it by the chat's id too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from adapters.ingest.names import earlier_stored_id, lookup_id
from adapters.service.data_keys import key_kept
from adapters.store.application import ConversationStore
from adapters.views.listing import OUTCOMES, ListQuery
from adapters.views.readmodels import ReadModels
from domain.errors import ChatrecordError
from domain.events import (
    conversation_uuid,
)
from projections.summary_rows import micros

LIST_LIMIT_MAX = 1000
"""The most conversations one page of `list_conversations` holds."""


class BadCursor(ChatrecordError):
    """Raised when a `--cursor` (or `cursor=`) is not one a page of the list returned."""


def _started(store: ConversationStore, key: str) -> bool:
    """Whether the store holds a conversation stored under `key`: known without a read where
    this process holds its state (`ConversationStore.holds`), else one index lookup."""
    uuid = conversation_uuid(key)
    return store.holds(uuid) or bool(store.recorder.select_events(uuid, limit=1))


def stored_id(store: ConversationStore, conversation: str) -> str:
    """Returns the id `conversation` is stored under: the reduced form of the chat's id
    (`lookup_id`; a stored form as a command printed it is its own reduced form) when the store
    holds that conversation; else the id an earlier store gave an id of that look
    (`earlier_stored_id`) when the store holds that one; else the reduced form (which then names no
    stored conversation: the caller says so)."""
    found = lookup_id(conversation)
    if not _started(store, found):
        earlier = earlier_stored_id(found)
        if earlier is not None and _started(store, earlier):
            return earlier
    return found


# ---------------------------------------------------------------- list


@dataclass(frozen=True)
class ConversationSummary:
    """One conversation as `list` shows it. `conversation`: its id as the store keeps it and
    every command accepts it; `kind`: `chat` or `alt_text`; `messages`: how many user messages
    it has (those no edit cut; 0 before the first), whatever their numbers; `segments`: segments recorded and not cut by an edit;
    `events`: the events of its log (its version); `first_at`/`last_at`: the times (UTC) of its
    first and last event; `erased`: whether its texts were erased (its data key deleted, not
    only its erasure recorded); `owner`: the backend user id of its owner (None where its list
    row, written by an earlier version, keeps none); `status`: what of `STATUSES` it has, in
    their order (`failed`, `waiting`, `undecided`, `erased` from its list row, `broken` when a
    break of its chain is stored)."""

    conversation: str
    kind: str
    messages: int
    segments: int
    events: int
    first_at: datetime
    last_at: datetime
    erased: bool
    owner: int | None = None
    status: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Returns `{"conversation", "kind", "messages", "segments", "events", "first_at",
        "last_at", "erased", "owner", "status"}`, the times as ISO-8601 UTC (`2026-10-28T09:00:00Z`)."""
        return {
            "conversation": self.conversation,
            "kind": self.kind,
            "messages": self.messages,
            "segments": self.segments,
            "events": self.events,
            "first_at": iso(self.first_at),
            "last_at": iso(self.last_at),
            "erased": self.erased,
            "owner": self.owner,
            "status": list(self.status),
        }


@dataclass(frozen=True)
class ConversationPage:
    """One page of the list: `conversations` newest activity first; `cursor`: pass it to get
    the next page, None after the last one."""

    conversations: tuple[ConversationSummary, ...]
    cursor: str | None

    def to_json(self) -> dict[str, Any]:
        """Returns `{"conversations": [ConversationSummary.to_json()], "next_cursor": str|null}`."""
        return {"conversations": [c.to_json() for c in self.conversations], "next_cursor": self.cursor}


def iso(at: datetime) -> str:
    """Returns `at` (aware, UTC) as `2026-10-28T09:00:00Z` (microseconds only where it has some)."""
    return at.isoformat().replace("+00:00", "Z")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

CURSOR_PATTERN = r"^c[0-9]{1,18}\.[0-9a-f]{32}$"
"""The form of a cursor: `c`, the last activity of a page's last conversation (microseconds
since the epoch), `.` and its id in the read models (a UUID's 32 hex). Every cursor of this
form is a page start (the conversations listed after that one, newest activity first), so a
client (or a schema-driven tester) that sends one well-formed gets a page, never an error;
only `encode_cursor` makes them."""


def encode_cursor(at: int, cid: str) -> str:
    """Returns the cursor of a page whose last conversation is `cid` (a UUID's text) with last
    activity `at` (microseconds since the epoch)."""
    return f"c{at}.{UUID(cid).hex}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """Returns the `(last_at, cid)` a cursor of `encode_cursor` holds. Raises BadCursor for any
    other form (see CURSOR_PATTERN)."""
    if re.fullmatch(CURSOR_PATTERN, cursor) is None:
        raise BadCursor(
            f"{cursor[:40]!r} is not a cursor of chatrecord list; pass the next_cursor "
            "a page returned, or none for the first page"
        )
    at, cid = cursor[1:].split(".")
    return int(at), str(UUID(cid))


class ListNeedsRebuild(ChatrecordError):
    """Raised by `list_conversations` on read models an earlier version made, which keep no
    index of the conversations by last activity: `chatrecord rebuild` makes ones that do."""


def summary(
    store: ConversationStore, key: str, users: int | None = None, last_at: int | None = None
) -> ConversationSummary | None:
    """Returns the summary of the conversation stored under `key`, None when there is none. Reads
    its state (snapshot and the events since) and its index's live segments: bounded reads.
    `users`: its live user messages as its read-model head counts them (`Summary.users`); None
    (a head an earlier version wrote keeps no count) counts them in its history index instead.
    `last_at`: its last activity as its head keeps it (`Summary.last_at`, microseconds; the chat's
    time, not an erasure's); None: its last event's time."""
    state = store.get(key)
    if state is None:
        return None
    with store.history.reading(state.id) as index:
        segments = len(index.segments_from(0))
        if users is None:
            users = len(index.messages_after(0))
    return ConversationSummary(
        conversation=state.conversation,
        kind=state.kind,
        messages=users,
        segments=segments,
        events=state.version,
        first_at=state.created_on,
        last_at=state.modified_on if last_at is None else _EPOCH + timedelta(microseconds=last_at),
        erased=state.erased and not key_kept(store, state.id),  # its texts read [erased] once its key is gone
    )


CHAIN_STATES = ("broken", "verified", "unchecked")
"""The states of a conversation's hash chain the list filters by, as the chain verdict tables
keep them (`adapters.store.chain_checks`): a break stored, a verified position stored, neither."""

STATUSES = (*OUTCOMES, *CHAIN_STATES)
"""Every status `list --status` takes: the list row's (`adapters.views.listing.OUTCOMES`) and
the chain's (`CHAIN_STATES`)."""

SCAN_MAX = 2000
"""The most list rows one page looks at when it filters by the chain's state (a look-up per
conversation, not an index): a page may then hold fewer than its limit, with a cursor on."""


class BadFilter(ChatrecordError):
    """Raised for a filter of the list that names no status, or a search text no id can hold;
    `field` names the filter."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ListFilter:
    """What the list is filtered by (every one given must hold): `owner`, activity at or after
    `since` and before `until` (aware datetimes, the chat's time of a conversation's last
    activity), `search` (a part of its id, letters in either case, `%` and `_` as themselves),
    and `status` (any of `STATUSES`: a conversation with at least one of them)."""

    owner: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    search: str | None = None
    status: tuple[str, ...] = ()

    def checked(self) -> ListFilter:
        """Returns this filter; raises BadFilter (its `field` the filter's name) for a status not
        in `STATUSES` or a search text with a NUL character. An `until` not after `since` is a
        range no conversation is in (an empty page), as every filter of a valid form is a query."""
        wrong = [s for s in self.status if s not in STATUSES]
        if wrong:
            raise BadFilter(f"status {wrong[0]!r} is none of {', '.join(STATUSES)}", "status")
        if self.search is not None and "\x00" in self.search:
            raise BadFilter("search: a NUL character is in no conversation id", "search")
        return self


def chain_state(store: ConversationStore, key: str, full: bool) -> str | None:
    """Returns `broken` when a break of conversation `key`'s chain is stored; with `full`,
    else `verified` when a verified position is, else `unchecked`; without, None then."""
    recorder, uuid = store.recorder, conversation_uuid(key)
    broken = getattr(recorder, "broken_chain", None)
    if broken is not None and broken(uuid) is not None:
        return "broken"
    if not full:
        return None
    verified = getattr(recorder, "verified_position", None)
    return "verified" if verified is not None and verified(uuid) is not None else "unchecked"


def list_conversations(
    models: ReadModels,
    limit: int = 50,
    cursor: str | None = None,
    since: datetime | None = None,
    filters: ListFilter | None = None,
) -> ConversationPage:
    """Returns one page of the store's conversations (`models.store`), newest activity first: at
    most `limit` (1–LIST_LIMIT_MAX) of them, after `cursor` (a `ConversationPage.cursor`; None:
    the first page), only those whose last activity is at or after `since` (aware datetime) if
    given, and those `filters` admits (`ListFilter`; its `since` is taken where `since` is None).

    Activity is the chat's time (`at`) of a conversation's last event, as its list row keeps it
    (`Summary.last_at`, in the list table, indexed: `ViewStorage.listed`); ties go by the
    conversation's UUID. A page is one index range read of the list table (its filters on the
    same rows: owner by its index, a part of the id and the statuses by a scan of the range) and
    a bounded read per conversation listed, whatever the store holds and however its storage
    order and times disagree. Memory stays flat: one page of summaries. A filter by the chain's
    state looks each conversation's verdict up: up to `SCAN_MAX` rows a page, so such a page may
    hold fewer than `limit` with a cursor to go on.

    The cursor is the last conversation's `(last activity, UUID)`, so it stays valid while
    conversations grow: the next page lists the conversations after it in that order as they
    are then. A conversation that moves to the front meanwhile (a new event) is not on the later
    pages (it is on a fresh first page); one that was on an earlier page is never listed again
    on a later one, unless a line stamped earlier than its last one moved it back behind the
    cursor. Erased conversations are listed (marked `erased`). The same cursor serves with the
    same filters only.

    Raises ValueError for a `limit` outside 1–LIST_LIMIT_MAX, BadCursor for a cursor no page
    returned, BadFilter for a filter `ListFilter.checked` refuses, ListNeedsRebuild on read
    models an earlier version made.
    """
    if not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValueError(f"limit must be 1 to {LIST_LIMIT_MAX}, not {limit}")
    asked = (filters or ListFilter()).checked()
    before = decode_cursor(cursor) if cursor is not None else None
    start = since if since is not None else asked.since
    chain = tuple(s for s in asked.status if s in CHAIN_STATES)
    outcomes = frozenset(s for s in asked.status if s in OUTCOMES)
    if chain and outcomes:  # either kind admits: the rows are read unfiltered and looked at here
        outcomes = frozenset()
    query = ListQuery(
        limit + 1,
        before,
        micros(start) if start is not None else None,
        micros(asked.until) if asked.until is not None else None,
        asked.owner,
        asked.search or None,
        outcomes,
    )
    store, storage = models.store, models.storage
    live = models.live_pointer()
    found: list[ConversationSummary] = []
    last: tuple[int, str] | None = None
    scanned, more = 0, False
    while True:
        with storage.transaction(write=False) as curs:
            if not storage.has_activity(curs, live.generation):
                raise ListNeedsRebuild(
                    "the read models were made by an earlier version of chatrecord and keep no "
                    f"list of the conversations by last activity; run: chatrecord rebuild --rules {live.rules}"
                )
            rows = storage.listed(curs, live.generation, query)
        for row in rows:
            if len(found) == limit or (chain and scanned >= SCAN_MAX):
                more = True
                break
            assert row.at is not None  # a row without activity is not listed
            scanned += 1
            last = (row.at, row.cid)
            state = chain_state(store, row.conversation, full=bool(chain))
            if chain and not (state in chain or set(row.statuses) & set(asked.status)):
                continue
            item = summary(store, row.conversation, row.users, row.at)
            if item is not None:
                status = (*row.statuses, *(["broken"] if state == "broken" else []))
                found.append(replace(item, owner=row.owner, status=status))
        if more or len(rows) < query.limit or last is None:
            break
        query = replace(query, before=last)
    return ConversationPage(tuple(found), encode_cursor(*last) if more and last is not None else None)
