"""The fold of the event log into a generation's rows: one conversation's events in order
(`fold_into`), and the whole log (or one worker's part of it), page by page (`fold_log`,
`fold_page`), which a new store's first generation and a rebuild (`adapters.views.rebuild`)
are made with."""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from uuid import UUID

from adapters.store.application import ConversationStore
from adapters.store.lru import LRU
from adapters.store.serialization import originator_uuid
from adapters.views.summary_cache import _kept
from adapters.views.ports import FoldsInParts, ViewStorage
from domain.errors import ChatrecordError
from domain.events import ConversationEvent
from projections.row_fold import apply_to_rows
from projections.summary_rows import Summary
from projections.rules import RuleSet, resolve

log = logging.getLogger("chatrecord")
Progress = Callable[[int, int], None]

PAGE = 2000
"""Notifications a rebuild reads and writes per transaction."""

KEPT_HEADS = 1024
"""The summaries a rebuild keeps between its pages (the conversations it wrote last)."""


class ViewOutOfStep(ChatrecordError):
    """Raised when a conversation's events cannot be applied to its rows in order (an event
    is missing from the log); `chatrecord rebuild` folds the rows anew."""


def fold_into(rows: Any, summary: Summary | None, events: Iterable[ConversationEvent], rules: RuleSet) -> Summary | None:
    """Applies `events` (one conversation's, in order) to its rows and returns the summary after
    them; events at or below the summary's version are skipped. Raises ViewOutOfStep on a gap."""
    for event in events:
        version = summary.version if summary else 0
        if event.originator_version <= version:
            continue
        if event.originator_version != version + 1:
            raise ViewOutOfStep(
                f"event {event.originator_version} of conversation {event.originator_id} does not follow "
                f"the read models' version {version}; run: chatrecord rebuild --rules {rules.id}"
            )
        summary = apply_to_rows(rows, summary or Summary(), event, rules)
    return summary


def fold_log(
    store: ConversationStore,
    storage: ViewStorage,
    generation: int,
    rules: str,
    start: int,
    stop: int | None,
    progress: Progress | None = None,
    curs: Any = None,
    unreadable: set[UUID] | None = None,
    part: tuple[int, int] | None = None,
) -> tuple[int, set[UUID]]:
    """Folds the notifications after `start` (up to `stop`) into `generation`, a page of
    PAGE per transaction (or all in `curs`); returns how many events and which conversations.
    `generation` holds only what folds of the log from its start wrote into it (a new
    generation's tables are written by no other writer). Without `curs`, where the backend
    writes on a thread of its own (`ViewStorage.queued`), a page is written while the next is
    folded, and the summaries written are kept (`KEPT_HEADS`) so that the next page need not read them.
    Without `curs`, where the backend `reads_ahead`, the next page is read on a thread of its
    own while this one is folded (the wait for the server's answer overlaps the fold); and
    unless something else froze objects, what the process held before is frozen (`gc.freeze`)
    until the fold ends, so that the collections of the fold's garbage do not scan it.
    A conversation whose event cannot be read or folded (`fold_page`) is left where it
    stopped, and added to `unreadable`: one conversation's damaged log stops no other's.
    With `part` (part, parts), only the conversations of that part (`adapters.views.rebuild.part_of`) are read
    and folded (`select_notifications_to_fold`): a worker of `adapters.views.rebuild.Rebuilds._fold_in_parts`."""
    rule_set, folded, seen = resolve(rules), 0, set()
    unreadable = set() if unreadable is None else unreadable
    total = stop or store.max_notification_id()
    queued = storage.queued() if curs is None else None
    kept: LRU[UUID, Summary | None] | None = LRU(maxsize=KEPT_HEADS) if queued is not None else None

    recorder = store.recorder
    to_fold = recorder.select_notifications_to_fold if isinstance(recorder, FoldsInParts) else None

    def read(after: int) -> Sequence[Any]:
        if to_fold is not None:
            folded: Sequence[Any] = to_fold(after, PAGE, stop, part)
            return folded
        assert part is None, "a backend that folds in parts reads them"
        return store.recorder.select_notifications(after, PAGE, stop=stop, inclusive_of_start=False)

    ahead = ThreadPoolExecutor(1, thread_name_prefix="chatrecord-rebuild-reads") if curs is None and storage.reads_ahead else None
    following: Future[Sequence[Any]] | None = None
    frozen = curs is None and gc.get_freeze_count() == 0  # else whoever froze them keeps them frozen
    if frozen:
        gc.freeze()  # what lived before the fold is not searched for cycles again and again during it
    try:
        page = read(start)
        while page:
            if ahead is not None and len(page) == PAGE:  # the next page is read while this one is folded
                following = ahead.submit(read, page[-1].id)
            if queued is not None:
                seen.update(fold_page(store, storage, queued, generation, rule_set, page, kept, unreadable))
                queued.commit()
            elif curs is None:
                with storage.transaction(write=True) as own:
                    seen.update(fold_page(store, storage, own, generation, rule_set, page, unreadable=unreadable))
            else:
                seen.update(fold_page(store, storage, curs, generation, rule_set, page, unreadable=unreadable))
            folded += len(page)
            start = page[-1].id
            if progress:
                progress(start, max(total, start))
            if len(page) < PAGE:
                break
            page, following = (following.result() if following is not None else read(start)), None
    except BaseException:
        if queued is not None:
            with contextlib.suppress(Exception):
                queued.close()
        raise
    finally:
        if ahead is not None:
            ahead.shutdown(wait=True, cancel_futures=True)
        if frozen:
            gc.unfreeze()
    if queued is not None:
        queued.close()  # every page written and committed, or the first error raised
    return folded, seen


def fold_page(
    store: ConversationStore,
    storage: ViewStorage,
    curs: Any,
    generation: int,
    rules: RuleSet,
    page: Sequence[Any],
    kept: LRU[UUID, Summary | None] | None = None,
    unreadable: set[UUID] | None = None,
) -> set[UUID]:
    """Decodes the page's notifications in order and folds each event, once, into its
    conversation's rows, which hold their writes until the page is folded (`BufferedRows`):
    an event is dropped as soon as it is applied. A conversation whose summary is behind the
    page's first event of it is filled from its own log first. With `kept` (the summaries the
    fold wrote, by conversation), a kept summary is not read, nor the summary of a conversation
    whose first event here is its first (`fold_log`: none yet); the summaries written are
    kept. A conversation whose event here cannot be read back (UnreadableEvent) or folded
    (another ChatrecordError) gets none of this page's rows and no more of them at all: it is
    added to `unreadable` (with one line logged), whose conversations are passed over.
    Returns the conversations."""
    folding: dict[UUID, list[Any]] = {}  # conversation: [rows, summary read, summary now]
    decode = store.mapper.to_domain_event
    unreadable = set() if unreadable is None else unreadable
    for notification in page:
        if unreadable and originator_uuid(notification.originator_id) in unreadable:
            continue
        try:
            event = decode(notification)
            key = event.originator_id
            held = folding.get(key)
            if held is None:
                rows = storage.rows(curs, generation, key, buffered=True)
                summary = _kept(kept, key) if kept is not None else None
                if summary is None and not (kept is not None and event.originator_version == 1):
                    summary = rows.summary()
                held = folding[key] = [rows, summary, summary]
            rows, _, summary = held
            version = summary.version if summary is not None else 0
            if event.originator_version == version + 1:  # `fold_into` of one event, without its loop
                held[2] = apply_to_rows(rows, summary or Summary(), event, rules)
            elif event.originator_version > version:  # a gap: filled from the conversation's own log
                missed = store.events.get(key, gt=version or None, lte=event.originator_version)
                held[2] = fold_into(rows, summary, missed, rules)
        except ChatrecordError as error:
            key = originator_uuid(notification.originator_id)
            unreadable.add(key)
            folding.pop(key, None)  # none of this page's rows: they stop where an earlier page left them
            log.warning(
                "chatrecord: the read models of conversation %s stop before version %s: %s",
                key,
                notification.originator_version,
                error,
            )
    for key, (rows, read, summary) in folding.items():
        if summary is not None and summary is not read:
            rows.put_summary(summary)
        rows.flush()
        if kept is not None and summary is not None:
            kept.put(key, summary)
    return set(folding)
