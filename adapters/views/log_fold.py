"""The fold of the event log into a generation's rows: one conversation's events (`fold_into`), one
conversation's whole log again in place (`refold`, after its erasure), or the whole log or a worker's part
of it, page by page (`fold_log`, `fold_page`)."""

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
from adapters.store.serialization import UnreadableEvent, originator_uuid
from adapters.views.ports import FoldsInParts, ViewStorage
from adapters.views.summary_cache import _kept
from domain.errors import ChatrecordError
from domain.events import ConversationEvent
from projections.row_fold import apply_to_rows
from projections.rules import RuleSet, resolve
from projections.summary_rows import Summary

log = logging.getLogger("chatrecord")
Progress = Callable[[int, int], None]

PAGE = 2000
"""Notifications a rebuild reads and writes per transaction."""

FOLD_ERRORS = (
    ChatrecordError,
    ArithmeticError,
    LookupError,
    TypeError,
    ValueError,
    AttributeError,
    AssertionError,
    RecursionError,
)
"""What one conversation's fold may raise of its own data (a stored value the fold cannot take, a
bug met only by that data): the conversation stops there, the others go on. The store's own errors
(a lost connection, a full disk) are not among them: they stop the fold."""

KEPT_HEADS = 1024
"""The summaries a rebuild keeps between its pages (the conversations it wrote last)."""


class ViewOutOfStep(ChatrecordError):
    """Raised when a conversation's events cannot be applied to its rows in order (an event is missing).
    `chatrecord rebuild` folds the rows anew."""


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


def refold(store: ConversationStore, storage: ViewStorage, curs: Any, generation: int, rules: str, key: UUID) -> bool:
    """Deletes conversation `key`'s rows in `generation` and folds its whole log into them again, in the
    transaction of `curs`: after its erasure, its texts now read as erased. The new summary counts
    the fold (`Summary.refolds`), so other processes' kept reads of its version go. Returns False
    when its log cannot be read back (UnreadableEvent): its rows stay deleted, and a read says why."""
    rows = storage.rows(curs, generation, key)
    before = rows.summary()
    rows.clear()
    try:
        after = fold_into(rows, None, store.events.get(key), resolve(rules))
    except UnreadableEvent:
        rows.clear()
        return False
    if after is not None:
        rows.put_summary(after.model_copy(update={"refolds": (before.refolds if before else 0) + 1}))
    return True


def fold_log(
    store: ConversationStore,
    storage: ViewStorage,
    generation: int,
    rules: str,
    start: int,
    stop: int | None,
    progress: Progress | None = None,
    curs: Any = None,
    unreadable: dict[UUID, str] | None = None,
    part: tuple[int, int] | None = None,
) -> tuple[int, set[UUID]]:
    """Folds the notifications after `start` (up to `stop`) into `generation`; returns the event count and
    the conversations.

    Only folds of the log write `generation`. A page of PAGE events is one transaction, or all go in
    `curs`. Without `curs`:
    - where the backend writes on its own thread (`ViewStorage.queued`), a page is written while the next
      is folded; the written summaries are kept (`KEPT_HEADS`);
    - where the backend `reads_ahead`, the next page is read while this one is folded;
    - what the process held before is frozen (`gc.freeze`) until the fold ends, unless already frozen.

    A conversation whose event cannot be read or folded stops there and joins `unreadable` (with why);
    others go on.
    With `part` (part, parts), only that part's conversations are folded (`rebuild.part_of`,
    `select_notifications_to_fold`)."""
    rule_set, folded, seen = resolve(rules), 0, set()
    unreadable = {} if unreadable is None else unreadable
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
    unreadable: dict[UUID, str] | None = None,
) -> set[UUID]:
    """Folds each notification of the page, once and in order, into its conversation's rows; returns the
    conversations.

    Rows hold their writes until the page is folded (`BufferedRows`). A conversation whose summary is
    behind is filled from its own log first. `kept` (summaries by conversation) saves reading them; it is
    updated. A conversation whose event cannot be read back (UnreadableEvent) or folded (another
    ChatrecordError, or any other error of its fold: one conversation's data never stops another's)
    gets none of this page's rows. It joins `unreadable` with the error, one line logged, and is
    passed over from then on."""
    folding: dict[UUID, list[Any]] = {}  # conversation: [rows, summary read, summary now]
    decode = store.mapper.to_domain_event
    unreadable = {} if unreadable is None else unreadable
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
        except FOLD_ERRORS as error:  # this conversation's rows stop here; the others go on
            key = originator_uuid(notification.originator_id)
            said = str(error) if isinstance(error, ChatrecordError) else f"{type(error).__name__}: {error}"
            unreadable[key] = said
            folding.pop(key, None)  # none of this page's rows: they stop where an earlier page left them
            log.warning(
                "chatrecord: the read models of conversation %s stop before version %s: %s",
                key,
                notification.originator_version,
                said,
            )
    for key, (rows, read, summary) in folding.items():
        if summary is not None and summary is not read:
            rows.put_summary(summary)
        rows.flush()
        if kept is not None and summary is not None:
            kept.put(key, summary)
    return set(folding)
