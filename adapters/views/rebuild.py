"""The rebuild of the read models (`chatrecord rebuild`). `Rebuilds.rebuild(rules)` folds the whole log into
a new generation (`log_fold.fold_log`). Where the log is long and the backend folds in parts, worker
processes fold it (`Rebuilds.rebuild_workers`, `_fold_part`). Then, under the exclusive lock, it folds
what came meanwhile, folds again each conversation whose data key was erased meanwhile (its rows were
folded from texts read before), and switches the pointer. It reports a `RebuildReport` and raises the
errors below."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from adapters.processes import end_with
from adapters.store.application import ConversationStore
from adapters.views.log_fold import Progress, fold_log, refold
from adapters.views.ports import FoldsInParts, ViewStorage
from adapters.views.row_tables import TABLES
from adapters.views.storage_reads import Pointer
from domain.errors import ChatrecordError
from projections.rules import resolve

PARTS_FROM = 10_000
"""The events a log must hold before a rebuild folds it in worker processes by itself
(`ReadModels.rebuild_workers`): below, starting them costs more than they save."""
MAX_WORKERS = 4
"""The most worker processes a rebuild starts by itself (one per CPU up to this)."""
WORKER_CLOSE_SECONDS = 5.0
"""How long a rebuild waits for a worker that sent its answer to close its store and end, before
it stops it (SIGTERM)."""
MOST_WORKERS = 32
"""The most worker processes a rebuild may be asked for: each opens its own connections to the
server, and a log has at most 256 parts (the last byte of a conversation's UUID)."""
MOST_OF_A_PART = 2 / 3
"""The largest share of a log's events one part may hold for a rebuild to fold it in parts by
itself: beyond, the other processes have too little to fold to make up for the CPU they take
from the one with the most (docs/benchmarks.md, "Figures moved from docstrings")."""


class RebuildWorkerFailed(ChatrecordError):
    """Raised when a rebuild's worker process failed or ended before folding its part; the message names its
    error. The live tables stay; the next rebuild drops the half-written generation."""


UNSWITCHED = "nothing was switched: the live read models are as they were"
"""What a failed rebuild's message ends with (`RebuildWorkerFailed`)."""


class RebuildInterrupted(ChatrecordError):
    """Raised when an interrupt (Ctrl-C, SIGTERM) stopped a rebuild before it switched. Its half-built
    tables were dropped; the live read models are unchanged."""


class RebuildSuperseded(ChatrecordError):
    """Raised when a rebuild finishes after a later one switched. The later one stays live; this generation
    is dropped."""


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did: the rule set now live and the one replaced, the conversations (unreadable ones
    included) and events folded, the new tables and those dropped."""

    rules: str
    conversations: int
    events: int
    old_rules: str
    tables: tuple[str, ...]
    generation: int = 0
    dropped: tuple[str, ...] = ()
    unreadable: tuple[str, ...] = ()
    """The conversations (their UUIDs) whose logs could not be read or folded to the end: their
    rows stop before the event that failed, and reading them says why (one line each was logged)."""
    reasons: tuple[str, ...] = ()
    """Why each of `unreadable` stopped (the error its read or fold raised), in the same order."""
    workers: int = 1
    """The processes that folded the log up to the rebuild's start (this one included)."""
    refolded: tuple[str, ...] = ()
    """The conversations (their UUIDs) whose data key was erased while the rebuild ran: their rows
    were folded again from their logs before the switch, so their texts read as erased."""


class Rebuilds:
    """The rebuilds of one store's read models (`ReadModels.rebuild`, `.rebuild_workers`). `set_live` takes
    the new live pointer after a switch. `reopen` hands out the view storage of a store a worker opens
    anew; None: fold in this process only."""

    def __init__(
        self,
        store: ConversationStore,
        storage: ViewStorage,
        set_live: Callable[[Pointer], None],
        reopen: Callable[[ConversationStore], ViewStorage] | None = None,
    ) -> None:
        self.store = store
        self.storage = storage
        self._set_live = set_live
        self.reopen = reopen

    def rebuild_workers(self, stop: int, workers: int | None = None) -> int:
        """Returns how many processes a rebuild of the log up to notification `stop` folds in. `workers`
        where given. Else one per usable CPU, at most MAX_WORKERS, for a log of at least PARTS_FROM
        events spread over the parts (no part over MOST_OF_A_PART). One where the backend cannot fold in
        parts (`ViewStorage.folds_in_parts`) or the system cannot fork. Raises ValueError for `workers`
        outside 1 to MOST_WORKERS."""
        _check_workers(workers)
        if not self.storage.folds_in_parts or self.reopen is None or not hasattr(os, "fork"):
            return 1
        if workers is not None:
            return workers
        if stop < PARTS_FROM:
            return 1
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        parts = max(1, min(cpus, MAX_WORKERS))
        recorder = self.store.recorder
        if parts > 1 and isinstance(recorder, FoldsInParts):
            sizes = recorder.count_notifications_by_part(stop, parts)
            if max(sizes) > MOST_OF_A_PART * sum(sizes):
                return 1
        return parts

    def rebuild(
        self,
        rules: str,
        progress: Progress | None = None,
        workers: int | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> RebuildReport:
        """Folds the whole log under `rules` into a new generation, makes it live and drops the old one.

        Returns what it did. The log up to the start is folded in `rebuild_workers(stop, workers)`
        processes; `progress` follows this one's part. What came meanwhile is folded here under the
        exclusive lock. So is each conversation whose data key was erased since the start (the erased
        keys read at the start and again under the lock): its rows are folded anew from its log, so
        the switch never makes live the texts of a key deleted meanwhile. An erasure whose key goes
        after that read refolds the new generation itself: its shared lock waits for the switch.
        Raises:
        - UnknownRuleSet for an unknown id;
        - RebuildSuperseded when a later rebuild switched first;
        - RebuildWorkerFailed when a worker failed;
        - ValueError for `workers` outside 1 to MOST_WORKERS;
        - RebuildInterrupted on KeyboardInterrupt before the switch, after dropping the new tables (under
          `guard()`, so a second interrupt does not cut the drop)."""
        target = resolve(rules).id
        _check_workers(workers)  # before a generation is made
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            old = self.storage.pointer(curs)
            assert old is not None
            generation = old.next
            self.storage.set_pointer(curs, Pointer(old.generation, old.rules, generation + 1))
            self.storage.create(curs, generation)
        try:
            return self._rebuild_into(generation, old, target, progress, workers)
        except KeyboardInterrupt:
            with guard():
                dropped = self._drop_unswitched(generation)
            raise RebuildInterrupted(
                f"rebuild under {target}: "
                + (f"the half-built tables views_g{generation}_* were dropped; " if dropped else "")
                + f"{UNSWITCHED} ({old.rules}); run it again to rebuild"
            ) from None

    def _drop_unswitched(self, generation: int) -> bool:
        """Drops `generation`'s tables unless it went live; returns True when it dropped them."""
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            now = self.storage.pointer(curs)
            if now is not None and now.generation == generation:
                return False
            self.storage.drop(curs, generation)
            return True

    def _rebuild_into(
        self, generation: int, old: Pointer, target: str, progress: Progress | None, workers: int | None
    ) -> RebuildReport:
        """`rebuild`'s fold into the new `generation` (made already) and its switch."""
        erased = self._erased()  # before any fold reads a text: a key deleted after this is refolded
        stop = self.store.max_notification_id()
        unreadable: dict[UUID, str] = {}
        parts = self.rebuild_workers(stop or 0, workers)
        seen: set[UUID]
        if not stop:
            events, seen = 0, set()
        elif parts > 1:
            events, seen = self._fold_in_parts(generation, target, stop, parts, progress, unreadable)
        else:
            events, seen = fold_log(self.store, self.storage, generation, target, 0, stop, progress, unreadable=unreadable)
        with self.storage.transaction(write=True) as curs:
            self.storage.lock(curs, exclusive=True)
            now = self.storage.pointer(curs)
            assert now is not None
            if now.generation != old.generation:
                self.storage.drop(curs, generation)
                raise RebuildSuperseded(f"a later rebuild switched to generation {now.generation} first")
            more, also = fold_log(self.store, self.storage, generation, target, stop, None, curs=curs, unreadable=unreadable)
            refolded = sorted(self._erased() - erased)  # erased meanwhile: folded from texts read before
            for key in refolded:
                if refold(self.store, self.storage, curs, generation, target, key):
                    unreadable.pop(key, None)  # read to the end now its key is gone
                else:  # its rows stay dropped, as an erasure leaves them
                    unreadable[key] = "erased while the rebuild ran, and its log cannot be read back"
            self.storage.set_pointer(curs, Pointer(generation, target, now.next))
            dropped: list[str] = []
            for stale in sorted(self.storage.generations(curs) - {generation}):
                self.storage.drop(curs, stale)
                dropped.extend(
                    f"views_g{stale}_{t}"
                    for t in (*TABLES, *self.storage.listing_tables, *self.storage.usage_tables, *self.storage.overview_tables)
                )
        self._set_live(Pointer(generation, target, now.next))
        return RebuildReport(
            rules=target,
            conversations=len(seen | also | set(unreadable)),
            events=events + more,
            old_rules=old.rules,
            tables=tuple(
                f"views_g{generation}_{t}"
                for t in (*TABLES, *self.storage.listing_tables, *self.storage.usage_tables, *self.storage.overview_tables)
            ),
            generation=generation,
            dropped=tuple(dropped),
            unreadable=tuple(sorted(str(key) for key in unreadable)),
            reasons=tuple(unreadable[key] for key in sorted(unreadable, key=str)),
            workers=parts,
            refolded=tuple(str(key) for key in refolded),
        )

    def _erased(self) -> set[UUID]:
        """Returns the conversations whose data key is erased now (none for a store without data
        keys); this process forgets any key of them it kept (`DataKeys.erased`)."""
        keys = self.store.data_keys
        return keys.erased() if keys is not None else set()

    def _fold_in_parts(
        self, generation: int, rules: str, stop: int, parts: int, progress: Progress | None, unreadable: dict[UUID, str]
    ) -> tuple[int, set[UUID]]:
        """Folds the notifications up to `stop` into `generation` in `parts` processes. This one folds part
        0; `parts` - 1 forked workers (`_fold_part`) fold the others into the same tables. A
        conversation's events are all in one part, in order. Returns the events folded and the
        conversations; adds the workers' unreadable ones to `unreadable`. Raises RebuildWorkerFailed when
        a worker failed or ended without an answer; the others are stopped (SIGTERM)."""
        context = multiprocessing.get_context("fork")
        workers: list[tuple[Any, Any]] = []
        answered: set[str] = set()
        try:
            for part in range(1, parts):
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(
                    target=_fold_part,
                    name=f"chatrecord-rebuild-{part}-of-{parts}",
                    daemon=True,
                    args=(self.store, self.reopen, generation, rules, stop, (part, parts), sender, os.getpid()),
                )
                with warnings.catch_warnings():  # Python 3.12+ warns of fork in a process with threads: the
                    warnings.simplefilter("ignore", DeprecationWarning)  # worker touches none of their objects
                    process.start()
                sender.close()
                workers.append((process, receiver))
            folded, seen = fold_log(
                self.store, self.storage, generation, rules, 0, stop, progress, unreadable=unreadable, part=(0, parts)
            )
            for process, receiver in workers:
                try:
                    answer = receiver.recv()
                except EOFError:
                    process.join()
                    raise RebuildWorkerFailed(
                        f"rebuild worker {process.name} ended (exit code {process.exitcode}) "
                        f"before it folded its part of the log; {UNSWITCHED}"
                    ) from None
                if isinstance(answer, str):
                    raise RebuildWorkerFailed(f"rebuild worker {process.name} failed: {answer}; {UNSWITCHED}")
                answered.add(process.name)
                count, its_seen, its_unreadable = answer
                folded += count
                seen |= its_seen
                unreadable |= its_unreadable
            return folded, seen
        finally:
            for process, receiver in workers:
                receiver.close()
                process.join(WORKER_CLOSE_SECONDS if process.name in answered else 0)  # closing its store
                if process.is_alive():
                    process.terminate()
                process.join()


def _check_workers(workers: int | None) -> None:
    """Raises ValueError for a number of worker processes outside 1 to MOST_WORKERS."""
    if workers is not None and not 1 <= workers <= MOST_WORKERS:
        raise ValueError(f"a rebuild folds in 1 to {MOST_WORKERS} worker processes, not {workers}")


def part_of(conversation: UUID, parts: int) -> int:
    """Returns which of `parts` workers folds `conversation`: its UUID's last byte modulo `parts`. The
    server's `select_notifications_to_fold` chooses the same."""
    return conversation.bytes[15] % parts


def _fold_part(
    store: ConversationStore,
    reopen: Callable[[ConversationStore], ViewStorage],
    generation: int,
    rules: str,
    stop: int,
    part: tuple[int, int],
    answer: Any,
    parent: int,
) -> None:
    """A forked worker of `Rebuilds._fold_in_parts`. Opens the store anew, with its own pool and data keys.
    Folds its `part` of the log up to `stop` into `generation`. Sends (events, conversations, unreadable)
    through `answer`, or one line naming its error. Ends with its parent (`processes.end_with`). Ctrl-C
    does not reach it; SIGTERM ends it at once and quietly."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    end_with(parent)
    own: ConversationStore | None = None
    try:
        own = store.reopened()
        unreadable: dict[UUID, str] = {}
        folded, seen = fold_log(own, reopen(own), generation, rules, 0, stop, unreadable=unreadable, part=part)
        answer.send((folded, seen, unreadable))
    except BaseException as error:  # noqa: BLE001 - told to the parent, which raises it
        answer.send(f"{type(error).__name__}: {error}")
    finally:
        answer.close()
        if own is not None:
            own.close()
