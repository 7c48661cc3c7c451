"""The refusals of the hash chain (`adapters.store.chain`): an append to a broken chain
(`ChainBroken`), an event at a version before the first (`VersionRefused`), and the upgrade of a
conversation the store shows was chained before (`UpgradeRefused`)."""

from __future__ import annotations

from uuid import UUID

from domain.errors import ChatrecordError


class ChainBroken(ChatrecordError):
    """Raised when an append is refused because the conversation's hash chain is broken
    where the append would continue it: the previous event has no hash row (an event written
    beside the store, `inserted`), the conversation was stored before the chain
    (`unchained`: `chatrecord verify --upgrade` chains it), or the event at the append's version
    was deleted by hand while its hash is recorded (`deleted`, `dangling`). Nothing of the
    append is stored.
    `originator_id`, `version` and `problem` name the broken link as `verify` would."""

    def __init__(self, message: str, originator_id: UUID, version: int, problem: str) -> None:
        super().__init__(message)
        self.originator_id, self.version, self.problem = originator_id, version, problem

    def named(self, conversation: str) -> ChainBroken:
        """Returns the same refusal naming the conversation by its id (`conversation`), not its UUID."""
        text = str(self).replace(f"conversation {self.originator_id}", f'conversation "{conversation}"', 1)
        return type(self)(text, self.originator_id, self.version, self.problem)


class VersionRefused(ChainBroken):
    """Raised when an append holds an event at a version before a conversation's first, 1
    (version 0 or less: no command decides one; an event built by hand): the chain has no
    place for it, and nothing of the append is stored. `problem` is `before_first`."""


class UpgradeRefused(ChainBroken):
    """Raised when `verify --upgrade` refuses a conversation without chain rows that the store
    shows was chained before (`chained_before`): its rows were deleted, not missing since before
    the chain. Nothing is changed. `problem` is `unchained`."""
