"""The use cases that keep the store (`adapters.api.Chatrecord` has them from `StoreUpkeep`): verify
the hash chains and the read-model rows, upgrade chains, erase, rebuild and diff the read
models, and the master key's changes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from adapters.backends.settings import describe_backend
from adapters.service import master_key as master_keys
from adapters.service.erase import Erasure, erase
from adapters.service.master_key import KeyChange
from adapters.service.replay import (
    unknown_conversation,
)
from adapters.service.use_case_base import UseCaseBase, conversation_argument, in_store_terms, reads
from adapters.store.chain import ChainedRecorder
from adapters.store.chain_key import chain_kind
from adapters.store.chain_upgrade import upgrade
from adapters.store.keys import KeyState
from adapters.store.verify import Verdict, verdicts
from adapters.views.rebuild import RebuildReport
from adapters.views.rule_diff import ConversationDiff
from adapters.views.verify_rows import RowsVerdict, check_rows, rows_verdicts
from domain.errors import UnknownConversation, shown_id

Progress = Callable[[int, int], None]
"""A rebuild's progress: `progress(done, total)`, events folded of the log's."""


class StoreUpkeep(UseCaseBase):
    """The upkeep of the store, each a method of Chatrecord (see there for the store and standbys)."""

    @reads
    @in_store_terms
    def chain(self, conversation: str, full: bool = False, *, after: str | None = None, by: str = "the server") -> Verdict | None:
        """Returns the verdict of the conversation's hash chain, None on a store that keeps no
        chain. A break a check stored (`chatrecord verify`, or any look: `BrokenChain`) is the
        verdict, as it was found (`Verdict.found_at`, `found_by`), until a look that recomputes
        every hash finds the chain ok again (one whose last look here found a break, which the
        store could not keep, is recomputed in full). Else a look starts from the
        conversation's verified position stored by the last look that recomputed every hash
        (`chatrecord verify`, or this page: `VerifiedPosition`; trusted only while the store's
        guard keeps it, which deletes it when an event or chain row is changed by hand), so also
        the first look after a start: `adapters.store.verify.verify_after` finds that head's
        event and hash unchanged and recomputes every hash after it, so it costs what was
        appended since, and says so (`Verdict.kept`, `kept_at`, `kept_by`). Where the store
        keeps no position (a read-only file, a standby), it starts from the head this process
        verified. With `full`, and without either, it recomputes every hash. What it finds is
        kept for every process (`ChainLooks.keep`, by `by`): the position it reached when it
        recomputed every hash and found it ok, or the break. Raises UnknownConversation."""
        name = conversation_argument("chain", conversation)
        verdict = self._chain_looks.look(self._stored_id(name), name, full, by)
        if verdict is None and isinstance(self.store.recorder, ChainedRecorder):
            self.events(name)  # raises UnknownConversation
        return verdict

    @reads
    def verify(
        self,
        conversation: str | None = None,
        against: Path | None = None,
        record: str | None = None,
        *,
        after: str | None = None,
    ) -> Iterator[Verdict]:
        """Yields the verdict of each conversation's hash chain (only `conversation`'s if
        given), in the order of their ids: ok with the head, or the first broken link; checked
        against the heads kept in the file `against` too, if given. Reads in pages: memory
        stays flat.

        Raises NoChain for a store that keeps no chain, BadHeadsFile for a heads file it cannot
        read, UnknownConversation (after the last verdict) when `conversation` has none. With
        `record` (what verifies: `chatrecord verify`), once every verdict was yielded (or the
        caller stopped), each ok
        verdict's head is stored as its conversation's verified position (`VerifiedPosition`,
        by `record`) and each break as its stored break (`BrokenChain`), which every later look
        shows until a look that recomputes every hash finds the chain ok (`ChainLooks.keep`: a
        SQLite file opened read-only keeps none, nor does a store that refuses the write)."""
        key = self._stored_id(conversation_argument("verify", conversation)) if conversation is not None else None
        return self._verdicts(conversation, key, against, record)

    @in_store_terms
    def _verdicts(self, conversation: str | None, key: str | None, against: Path | None, record: str | None) -> Iterator[Verdict]:
        found: list[Verdict] = []
        try:
            for each in verdicts(self.store, key, against):
                verdict = self._chain_looks.held(each)  # a cut below a version the store once held: no hash sees it
                assert verdict is not None
                found.append(verdict)
                yield verdict
        finally:  # also what a caller that stopped early was given
            if record is not None:
                self._chain_looks.keep(found, record)
        if conversation is not None and not found:
            raise UnknownConversation("no conversation " + shown_id(conversation, "'") + f" in {describe_backend(self.store)}")

    @reads
    @in_store_terms
    def verify_rows(self, conversation: str | None = None, *, after: str | None = None) -> Iterator[RowsVerdict]:
        """Yields, per conversation (only `conversation` if given; else every one, in the order
        of their ids, as `verify`), whether its read-model rows (head, transcript, run record entries, card
        outcomes) are the fold of its log (`adapters.views.verify_rows`): a row rewritten in the
        database is found here, not by a turn read. Reads each whole log. Raises
        UnknownConversation for an id the store does not hold."""
        if conversation is not None:
            key = self._stored_id(conversation_argument("verify_rows", conversation))
            return iter([check_rows(self.read_models, key)])
        return rows_verdicts(self.read_models, sorted(self.store.conversation_ids()))  # as `verify` lists them

    @in_store_terms
    def upgrade_chains(self, conversation: str | None = None) -> list[Verdict]:
        """The explicit upgrade of a store an earlier version wrote: chains each conversation
        stored before the hash chain existed (verdict `unchained`; only `conversation`'s if
        given), logging each, and returns their verdicts after it (`adapters.store.chain_upgrade.upgrade`).
        An append to such a conversation is refused until then (`ChainBroken`). A conversation
        with any hash row is never touched. Raises NoChain for a store without a chain."""
        key = self._stored_id(conversation_argument("upgrade_chains", conversation)) if conversation is not None else None
        return upgrade(self.store, key)

    @in_store_terms
    def erase(self, conversation: str) -> Erasure:
        """Erases the conversation's free texts (deletes its data key) and scrubs its read
        models; idempotent. Raises UnknownConversation for an id the store does not hold (worded
        as `audit` and `replay` word it)."""
        try:
            return erase(self.store, self._stored_id(conversation_argument("erase", conversation)), self.read_models)
        except UnknownConversation:
            raise unknown_conversation(self.store, conversation, describe_backend(self.store)) from None

    @in_store_terms
    def rebuild(
        self,
        rules: str,
        progress: Progress | None = None,
        workers: int | None = None,
        guard: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> RebuildReport:
        """Rebuilds the read models under `rules`, folding the log in `workers` processes
        (None: `ReadModels.rebuild_workers` chooses); see ReadModels.rebuild (an interrupt drops
        the half-built tables and raises RebuildInterrupted)."""
        return self.read_models.rebuild(rules, progress, workers, guard)

    @in_store_terms
    def conversation_id(self, originator_id: str) -> str:
        """Returns the stored id of the conversation of UUID `originator_id` (as a rebuild's
        `unreadable` names it), as `verify` prints it; see ConversationStore.conversation_id."""
        return self.store.conversation_id(originator_id)

    @in_store_terms
    def diff(self, rules: str) -> list[ConversationDiff]:
        """Returns the conversations whose record or notes would change under `rules` (nothing
        is switched); see ReadModels.diff."""
        return [d for d in self.read_models.diff(rules) if d.changed]

    def description(self) -> str:
        """Returns what the store is, as the commands name it: `SQLite file …`, `PostgreSQL …`."""
        return describe_backend(self.store)

    def chain_kind(self) -> str | None:
        """Returns what `verify` says of a keyed hash chain (keyed, with its key's mark), None
        for an unkeyed chain or a store without one."""
        recorder = self.store.recorder
        if isinstance(recorder, ChainedRecorder) and recorder.chain_key is not None:
            return chain_kind(recorder)
        return None

    @in_store_terms
    def key_state(self) -> KeyState:
        """Returns whether a master key protects the store and how many data keys it keeps
        wrapped, unwrapped and erased."""
        return master_keys.state(self.store)

    @in_store_terms
    def wrap_keys(self) -> KeyChange:
        """Binds the store to CHATRECORD_MASTER_KEY: wraps every unwrapped data key with it and
        writes its check row, in one transaction (see `adapters.service.master_key.wrap`)."""
        return master_keys.wrap(self.store)

    @in_store_terms
    def rotate_keys(self, new_master_key: str) -> KeyChange:
        """Rewraps every data key with `new_master_key` (base64 of 32 bytes) in one transaction;
        the store then needs the new key (see `adapters.service.master_key.rotate`)."""
        return master_keys.rotate(self.store, new_master_key)

    @in_store_terms
    def unwrap_keys(self) -> KeyChange:
        """Removes the store's master key: every data key stored unwrapped, the check row
        deleted, in one transaction (see `adapters.service.master_key.unwrap`)."""
        return master_keys.unwrap(self.store)
