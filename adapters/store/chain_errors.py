"""The refusals of the hash chain: `ChainBroken`, `VersionRefused`, `UpgradeRefused`."""

from __future__ import annotations

from uuid import UUID

from domain.errors import ChatrecordError


class ChainBroken(ChatrecordError):
    """Raised when an append is refused because the chain is broken where it would continue.
    `inserted`: the previous event has no hash row. `unchained`: it predates the chain. `deleted`,
    `dangling`: the event at the append's version was deleted by hand. Nothing of the append is
    stored. `originator_id`, `version` and `problem` name the broken link as `verify` would."""

    def __init__(self, message: str, originator_id: UUID, version: int, problem: str) -> None:
        super().__init__(message)
        self.originator_id, self.version, self.problem = originator_id, version, problem

    def named(self, conversation: str) -> ChainBroken:
        """Returns the same refusal naming the conversation by its id (`conversation`), not its UUID."""
        text = str(self).replace(f"conversation {self.originator_id}", f'conversation "{conversation}"', 1)
        return type(self)(text, self.originator_id, self.version, self.problem)


class VersionRefused(ChainBroken):
    """Raised when an append holds an event below version 1, which the chain cannot place. Nothing of
    the append is stored. `problem` is `before_first`."""


class UpgradeRefused(ChainBroken):
    """Raised when `verify --upgrade` finds a conversation was chained before: its rows were deleted.
    Nothing is changed. `problem` is `unchained`."""
