"""The store's conversations: finding a user's id (`stored_id`) and the list in pages
(`list_conversations`). Export is `adapters.service.export`. A conversation is stored under the reduced
form of the chat's id (`names.reduce_id`, e.g. `chat 17` → `chat17:h9a90eaf363ff759f`). That form is what
commands and errors print. Reducing it gives it back, so `stored_id` accepts both. It also finds ids an
older store reduced twice (`names.earlier_stored_id`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from adapters.ingest.names import earlier_stored_id, lookup_id
from adapters.service.data_keys import key_kept
from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder
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
    """Whether the store holds a conversation under `key`. No read where this process holds its state; else
    one index lookup."""
    uuid = conversation_uuid(key)
    return store.holds(uuid) or bool(store.recorder.select_events(uuid, limit=1))


def stored_id(store: ConversationStore, conversation: str) -> str:
    """Returns the id `conversation` is stored under. The reduced form of the chat's id (`lookup_id`) when
    the store holds it; else the older store's id (`earlier_stored_id`) when held; else the reduced form,
    which then names no stored conversation."""
    found = lookup_id(conversation)
    if not _started(store, found):
        earlier = earlier_stored_id(found)
        if earlier is not None and _started(store, earlier):
            return earlier
    return found


# ---------------------------------------------------------------- list


@dataclass(frozen=True)
class ConversationSummary:
    """One conversation as `list` shows it.

    - `conversation`: its stored id, which every command accepts; `kind`: `chat` or `alt_text`.
    - `messages`: uncut user messages (0 before the first); `segments`: uncut segments.
    - `events`: its log's version; `first_at`, `last_at`: its first and last event times (UTC).
    - `erased`: whether its data key was deleted; `owner`: its owner's backend user id (None where an
      older list row keeps none).
    - `status`: those of `STATUSES` it has, in order; `broken` when a chain break is stored."""

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
    """One page of the list, newest activity first. `cursor` gets the next page; None after the last."""

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
    """Returns the cursor of a page ending at `cid` (a UUID's text) with last activity `at` (microseconds
    since the epoch)."""
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
    """Raised by `list_conversations` on read models an older version made, without the activity index.
    `chatrecord rebuild` makes them anew."""


def summary(
    store: ConversationStore, key: str, users: int | None = None, last_at: int | None = None
) -> ConversationSummary | None:
    """Returns the summary of the conversation under `key`, None when there is none. Reads its state and its
    index's uncut segments: bounded reads. `users`: its uncut user messages from the summary row
    (`Summary.users`); None counts them in the history index. `last_at`: its last activity in
    microseconds (`Summary.last_at`; the chat's time); None: its last event's time."""
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
    """Raised for a list filter that names no status, or a search text no id can hold. `field` names the
    filter."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ListFilter:
    """What the list is filtered by; every filter given must hold. `owner`; last activity in [`since`,
    `until`) (aware datetimes, the chat's time); `search`, a part of the id, case-insensitive, `%` and
    `_` literal; `status`, at least one of `STATUSES`."""

    owner: int | None = None
    since: datetime | None = None
    until: datetime | None = None
    search: str | None = None
    status: tuple[str, ...] = ()

    def checked(self) -> ListFilter:
        """Returns this filter. Raises BadFilter (`field`: the filter) for a status not in `STATUSES` or a
        search text with NUL. An `until` not after `since` gives an empty page."""
        wrong = [s for s in self.status if s not in STATUSES]
        if wrong:
            raise BadFilter(f"status {wrong[0]!r} is none of {', '.join(STATUSES)}", "status")
        if self.search is not None and "\x00" in self.search:
            raise BadFilter("search: a NUL character is in no conversation id", "search")
        return self


def chain_state(store: ConversationStore, key: str, full: bool) -> str | None:
    """Returns `broken` when a break of `key`'s chain is stored. Otherwise, with `full`: `verified` when a
    verified position is stored, else `unchecked`; without `full`: None."""
    recorder, uuid = store.recorder, conversation_uuid(key)
    if not isinstance(recorder, ChainedRecorder):
        return "unchecked" if full else None
    if recorder.broken_chain(uuid) is not None:
        return "broken"
    if not full:
        return None
    return "verified" if recorder.verified_position(uuid) is not None else "unchecked"


def list_conversations(
    models: ReadModels,
    limit: int = 50,
    cursor: str | None = None,
    since: datetime | None = None,
    filters: ListFilter | None = None,
) -> ConversationPage:
    """Returns one page of the store's conversations (`models.store`), newest activity first.

    At most `limit` (1–LIST_LIMIT_MAX) after `cursor` (None: the first page). Only those active at or
    after `since` (aware datetime), and those `filters` admits (its `since` where `since` is None).
    Activity is the chat's time of the last event (`Summary.last_at`); ties go by UUID. A page is one
    index range read plus a bounded read per conversation; memory stays flat. A chain-state filter reads
    up to `SCAN_MAX` rows a page, so a page may hold fewer than `limit`, with a cursor.

    The cursor is the last `(last activity, UUID)`; it stays valid as conversations grow. A conversation
    that moves to the front is on a fresh first page, not a later one. One listed earlier is not listed
    again, unless an earlier-stamped line moved it back. Erased conversations are listed (`erased`). A
    cursor serves with the same filters only. Raises ValueError for a `limit` out of range. Raises
    BadCursor for a cursor no page returned. Raises BadFilter for a filter `ListFilter.checked` refuses.
    Raises ListNeedsRebuild on read models an older version made."""
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
