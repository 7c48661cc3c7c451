"""The use cases that keep the store (`StoreUpkeep`): verify chains and rows, upgrade chains, erase, rebuild
and diff the read models, and change the master key."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from adapters.backends.settings import describe_backend
from adapters.service import master_key as master_keys
from adapters.service.chain_looks import ChainLooks
from adapters.service.common import OpenedStore, conversation_argument, in_store_terms
from adapters.service.erase import Erasure, erase
from adapters.service.master_key import KeyChange
from adapters.service.replay import (
    unknown_conversation,
)
from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder
from adapters.store.chain_key import chain_kind
from adapters.store.chain_upgrade import upgrade
from adapters.store.heads_file import read_heads
from adapters.store.keys import KeyState
from adapters.store.verify import NOT_IN_STORE, Verdict, verdicts
from adapters.views.rebuild import RebuildReport
from adapters.views.rule_diff import ConversationDiff
from adapters.views.verify_rows import RowsVerdict, check_rows, rows_verdicts
from domain.errors import UnknownConversation

Progress = Callable[[int, int], None]
"""A rebuild's progress: `progress(done, total)`, events folded of the log's."""


class StoreUpkeep:
    """The upkeep of a store (`opened`), each a Chatrecord method, with the chain looks (`looks`)."""

    def __init__(self, opened: OpenedStore, looks: ChainLooks) -> None:
        self.opened = opened
        self.looks = looks

    @property
    def store(self) -> ConversationStore:
        """The store kept."""
        return self.opened.store

    def verify(
        self,
        conversation: str | None = None,
        against: Path | None = None,
        record: str | None = None,
    ) -> Iterator[Verdict]:
        """Yields the verdict of each conversation's hash chain in id order (only `conversation`'s if
        given).

        A verdict is ok with the head, or the first broken link; also checked against the heads file
        `against` if given. Reads in pages; memory stays flat. Raises NoChain for a store without a
        chain. Raises BadHeadsFile for an unreadable heads file. Raises UnknownConversation, after the
        last verdict, when `conversation` has none. With `record`, once all are yielded or the caller
        stopped, verdicts are stored by `record` (`ChainLooks.keep`): ok heads as verified positions,
        breaks as stored breaks."""
        key = self.opened.stored_id(conversation_argument("verify", conversation)) if conversation is not None else None
        return self._verdicts(conversation, key, against, record)

    @in_store_terms
    def _verdicts(self, conversation: str | None, key: str | None, against: Path | None, record: str | None) -> Iterator[Verdict]:
        found: list[Verdict] = []
        heads = read_heads(against) if against is not None else {}
        by = f"{record} --against" if record is not None and against is not None else record
        try:
            for each in verdicts(self.store, key, against):
                head = heads.get(each.originator_id)
                # a cut below a version the store once held: no hash sees it (unless a heads file's
                # line that this chain matched clears a cut a heads file claimed)
                verdict = self.looks.held(each, head.version if head is not None else None, by)
                assert verdict is not None
                found.append(verdict)
                yield verdict
        finally:  # also what a caller that stopped early was given; no break of a conversation the store lacks
            if by is not None:
                self.looks.keep([v for v in found if not (v.detail or "").startswith(NOT_IN_STORE)], by)
        if conversation is not None and not found:
            raise unknown_conversation(self.store, conversation, describe_backend(self.store))  # as audit says it

    @in_store_terms
    def verify_rows(self, conversation: str | None = None) -> Iterator[RowsVerdict]:
        """Yields, per conversation in id order (or only `conversation`), whether its read-model rows are
        the fold of its log (`views.verify_rows`). Reads each whole log. Raises UnknownConversation for
        an id the store does not hold."""
        if conversation is not None:
            key = self.opened.stored_id(conversation_argument("verify_rows", conversation))
            return iter([check_rows(self.opened.read_models, key)])
        return rows_verdicts(self.opened.read_models, sorted(self.store.conversation_ids()))  # as `verify` lists them

    @in_store_terms
    def upgrade_chains(self, conversation: str | None = None) -> list[Verdict]:
        """Chains each conversation stored before the hash chain existed (verdict `unchained`; only
        `conversation`'s if given). Logs each; returns their verdicts after (`chain_upgrade.upgrade`).
        Appends to such a conversation are refused until then (`ChainBroken`). A conversation with any
        hash row is untouched. Raises NoChain for a store without a chain."""
        key = self.opened.stored_id(conversation_argument("upgrade_chains", conversation)) if conversation is not None else None
        return upgrade(self.store, key)

    @in_store_terms
    def erase(self, conversation: str) -> Erasure:
        """Erases the conversation's texts (deletes its data key) and scrubs its read models; idempotent.
        Raises UnknownConversation for an id the store does not hold."""
        try:
            return erase(self.store, self.opened.stored_id(conversation_argument("erase", conversation)), self.opened.read_models)
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
        """Rebuilds the read models under `rules` in `workers` processes (None: `rebuild_workers` chooses).
        Raises as `ReadModels.rebuild`; an interrupt raises RebuildInterrupted."""
        return self.opened.read_models.rebuild(rules, progress, workers, guard)

    @in_store_terms
    def conversation_id(self, originator_id: str) -> str:
        """Returns the stored id of the conversation of UUID `originator_id`, as `verify` prints it."""
        return self.store.conversation_id(originator_id)

    @in_store_terms
    def diff(self, rules: str) -> list[ConversationDiff]:
        """Returns the conversations whose record or notes would change under `rules` (nothing
        is switched); see ReadModels.diff."""
        return [d for d in self.opened.read_models.diff(rules) if d.changed]

    def description(self) -> str:
        """Returns what the store is, as the commands name it: `SQLite file …`, `PostgreSQL …`."""
        return describe_backend(self.store)

    def chain_kind(self) -> str | None:
        """Returns what `verify` says of a keyed chain (keyed, with its key's mark). None for an unkeyed
        chain or none."""
        recorder = self.store.recorder
        if isinstance(recorder, ChainedRecorder) and recorder.chain_key is not None:
            return chain_kind(recorder)
        return None

    @in_store_terms
    def key_state(self) -> KeyState:
        """Returns whether a master key protects the store, and its data keys' counts: wrapped, unwrapped,
        erased."""
        return master_keys.state(self.store)

    @in_store_terms
    def wrap_keys(self) -> KeyChange:
        """Binds the store to CHATRECORD_MASTER_KEY in one transaction (`master_key.wrap`)."""
        return master_keys.wrap(self.store)

    @in_store_terms
    def rotate_keys(self, new_master_key: str) -> KeyChange:
        """Rewraps every data key with `new_master_key` (base64 of 32 bytes) in one transaction
        (`master_key.rotate`)."""
        return master_keys.rotate(self.store, new_master_key)

    @in_store_terms
    def unwrap_keys(self) -> KeyChange:
        """Removes the store's master key in one transaction (`master_key.unwrap`)."""
        return master_keys.unwrap(self.store)
