"""The explicit upgrade of conversations stored before the chain (`chatrecord verify --upgrade`)."""

from __future__ import annotations

import logging

from adapters.store.application import ConversationStore
from adapters.store.chain import ChainedRecorder, Stored, UpgradeRefused
from adapters.store.chain_checks import upgrade_refused
from adapters.store.verify import NoChain, Verdict, verdicts, verify

log = logging.getLogger("chatrecord")


def upgrade(store: ConversationStore, conversation: str | None = None) -> list[Verdict]:
    """Chains every `unchained` conversation (only `conversation` if given), each in one transaction.
    Logs one line per conversation chained and returns their verdicts after it. A conversation with
    any hash row is never touched. Raises UpgradeRefused, changing nothing, where one was chained
    before. Raises NoChain for a store without a chain."""
    recorder = store.recorder
    if not isinstance(recorder, ChainedRecorder):
        raise NoChain("this store keeps no hash chain; open it with adapters.backends.settings")
    upgraded: list[Verdict] = []
    found = [verdict for verdict in verdicts(store, conversation) if verdict.problem == "unchained"]
    for verdict in found:  # every refusal before any change
        reason = recorder.upgrade_refusal(verdict.originator_id)
        if reason is not None:
            raise UpgradeRefused(upgrade_refused(f'"{verdict.conversation}"', reason), verdict.originator_id, 1, "unchained")
    for verdict in found:
        count = recorder.upgrade_chain(verdict.originator_id)
        if count:
            log.warning(
                "chatrecord: chained %d events of conversation %s (%s), stored before the chain (verify --upgrade)",
                count,
                verdict.conversation,
                verdict.originator_id,
            )

        def named(stored: Stored, name: str = verdict.conversation) -> str:
            return name

        upgraded.extend(verify(recorder, named, verdict.originator_id))
    return upgraded
