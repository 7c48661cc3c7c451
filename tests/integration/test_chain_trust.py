"""What a writer of the database without the master key cannot get blessed, once per backend:
`verify --upgrade` (trust on first use, for conversations stored before the chain) refuses a
conversation the store shows was chained before (a stored break, a verified position, a keyed
chain), and a re-key (`keys wrap`) refuses a chain replaced by hand (a stored break, a verified
position whose hash is not the link at its version); both change nothing, and `verify` still
names the break after. What stays trust on first use (every trace deleted past the guard, in an
unkeyed store) is found by kept heads (docs/reliability.md)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from adapters.api import DEMO_FILE, Chatrecord, demo_lines
from adapters.service import master_key as keys_service
from adapters.store.application import ConversationStore
from adapters.store.chain import GENESIS, ChainBroken, ChainedRecorder, UpgradeRefused, link
from adapters.store.chain_key import UNKEYED
from adapters.store.heads_file import KeptHead
from adapters.store.verify import Verdict, verdicts, verify
from tests.integration.chain_tables import DEMO, ChainTables, PostgresChainTables, SQLiteChainTables

A = base64.b64encode(bytes(range(32))).decode()
NONE = ""  # overrides a CHATRECORD_MASTER_KEY of the test's own environment
LATER_LINE = {
    "type": "user_message",
    "conversation": "conv-demo-seo",
    "at": "2026-11-03T10:00:00Z",
    "message": 4,
    "text": "Und jetzt?",
    "page": 0,
}
TAMPER = "its chain rows were deleted in the database (a tamper): {}; verify --upgrade refuses it"
REFUSED = (
    'conversation "conv-demo-seo": refused to chain it (verify --upgrade): {}; its chain rows were deleted in the '
    "database (a tamper), it was not stored before the chain; nothing was changed; run: chatrecord verify"
)


def demo(store: ConversationStore) -> Verdict:
    """Returns the verdict of the demo conversation's chain."""
    return next(v for v in verdicts(store) if v.originator_id == DEMO)


class ChainTrustContract(ChainTables):
    """Tests; backends say how to open a store and change its rows directly, past the store's
    guard (`guard=False`, as one who can write the database can) or not."""

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    def broken(self) -> list[Any]:
        return self.run("SELECT version, problem FROM {broken}")

    def ingested_and_verified(self, key: str) -> ConversationStore:
        """The demo ingested and verified (`chatrecord verify`: its verified position kept)."""
        store = self.open_store(CHATRECORD_MASTER_KEY=key)
        Chatrecord(store).ingest(demo_lines(), DEMO_FILE)
        assert [v.ok for v in Chatrecord(store).verify(record="chatrecord verify")] == [True]
        assert self.run("SELECT version FROM {verified}") == [(20,)]
        return store

    def forge_event_8(self, guard: bool) -> None:
        """Changes the demo's event 8 (pages uid 42 -> 7) as a writer of the database would."""
        _, state = self.events()[8]
        assert b'"uid":42' in state
        self.run(
            "UPDATE {events} SET state = ? WHERE originator_id = ? AND originator_version = ?",
            (state.replace(b'"uid":42', b'"uid":7', 1), self.key(DEMO), 8),
            guard,
        )

    def unchain(self, guard: bool) -> None:
        self.run("DELETE FROM {chain} WHERE originator_id = ?", (self.key(DEMO),), guard)

    def plain_chain(self, guard: bool) -> None:
        """Replaces the demo's chain rows with a plain SHA-256 chain of its events as stored."""
        digest = GENESIS
        for version, (topic, state) in sorted(self.events().items()):
            digest = link(digest, DEMO, version, topic, state)
            self.run(
                "UPDATE {chain} SET hash = ? WHERE originator_id = ? AND originator_version = ?",
                (digest, self.key(DEMO), version),
                guard,
            )
        self.run("DELETE FROM {kind}", (), guard)

    def refused_upgrade(self, reason: str) -> None:
        """The upgrade refuses, naming `reason`, changes nothing, and verify still names the break."""
        store = self.open_store(CHATRECORD_MASTER_KEY=A)
        found = demo(store)
        assert (found.problem, found.version, found.detail) == ("unchained", 1, TAMPER.format(reason))
        with pytest.raises(UpgradeRefused) as refused:
            Chatrecord(store).upgrade_chains()
        assert str(refused.value) == REFUSED.format(reason)
        with pytest.raises(ChainBroken) as appended:  # an append says so too, not to run the upgrade
            Chatrecord(store).record(LATER_LINE)
        assert str(appended.value) == (
            'conversation "conv-demo-seo": the hash chain is broken at version 1 (deleted): '
            f"{reason}; its chain rows were deleted in the database; nothing "
            "was appended; run: chatrecord verify"
        )
        assert self.links() == {} and len(self.events()) == 20
        again = demo(self.open_store(CHATRECORD_MASTER_KEY=A))
        assert (again.ok, again.problem, again.detail) == (False, "unchained", TAMPER.format(reason))

    def test_the_upgrade_refuses_a_conversation_whose_break_the_guard_stored(self) -> None:
        self.ingested_and_verified(A)
        self.forge_event_8(guard=True)
        self.unchain(guard=True)
        assert self.broken() == [(8, "changed")]
        self.refused_upgrade("the store recorded a break of its chain at version 8 (changed)")

    def test_the_upgrade_refuses_a_conversation_with_a_verified_position(self) -> None:
        self.ingested_and_verified(A)
        self.forge_event_8(guard=False)
        self.unchain(guard=False)
        assert self.broken() == []
        self.refused_upgrade("its chain was verified up to version 20")

    def test_the_upgrade_refuses_any_unchained_conversation_of_a_keyed_store(self) -> None:
        self.ingested_and_verified(A)
        self.forge_event_8(guard=False)
        self.unchain(guard=False)
        self.run("DELETE FROM {verified}", (), False)
        self.refused_upgrade("the store's chain is keyed, and a keyed store chains every event it stores")

    def test_an_unkeyed_store_with_every_trace_deleted_is_upgraded_and_kept_heads_name_it(self) -> None:
        """What stays trust on first use (docs/reliability.md): caught by heads kept outside."""
        store = self.ingested_and_verified(NONE)
        head = demo(store)
        assert head.hash is not None
        self.forge_event_8(guard=False)
        self.unchain(guard=False)
        self.run("DELETE FROM {verified}", (), False)
        reopened = self.open_store(CHATRECORD_MASTER_KEY=NONE)
        assert "run: chatrecord verify --upgrade" in (demo(reopened).detail or "")
        assert [v.ok for v in Chatrecord(reopened).upgrade_chains()] == [True]
        recorder = reopened.recorder
        assert isinstance(recorder, ChainedRecorder)
        kept = {DEMO: KeptHead("conv-demo-seo", DEMO, head.version, head.hash)}
        against = next(verify(recorder, lambda _: "conv-demo-seo", DEMO, kept))
        assert (against.problem, against.version) == ("rewritten", 20)

    def test_the_upgrade_refuses_a_conversation_stored_after_a_chained_one_in_an_unkeyed_store(self) -> None:
        store = self.open_store(CHATRECORD_MASTER_KEY=NONE)
        started = {"type": "conversation_started", "at": "2026-10-27T09:00:00Z", "kind": "chat", "owner": 7}
        Chatrecord(store).ingest([json.dumps({**started, "conversation": "conv-first"}).encode() + b"\n"], "first")
        Chatrecord(store).ingest(demo_lines(), DEMO_FILE)  # stored after a chained event: by a chaining version
        self.forge_event_8(guard=False)
        self.unchain(guard=False)
        reason = "its events were stored after events the store chained, so by a version that chains every event"
        reopened = self.open_store(CHATRECORD_MASTER_KEY=NONE)
        assert demo(reopened).detail == TAMPER.format(reason)
        with pytest.raises(UpgradeRefused) as refused:
            Chatrecord(reopened).upgrade_chains()
        assert str(refused.value) == REFUSED.format(reason)
        assert self.links() == {}

    def test_keys_wrap_refuses_a_chain_replaced_past_the_guard_that_stored_its_break(self) -> None:
        self.ingested_and_verified(A)
        self.forge_event_8(guard=True)
        self.plain_chain(guard=True)
        before = self.links()
        found = demo(self.open_store(CHATRECORD_MASTER_KEY=A))
        assert (found.problem, found.version, found.detail) == ("unkeyed", 20, UNKEYED)
        assert "chatrecord verify --against FILE" in UNKEYED

        with pytest.raises(ChainBroken) as refused:
            keys_service.wrap(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"))

        assert str(refused.value) == (
            f"conversation {DEMO}: the store recorded a break of its chain at version 8 (changed); nothing was "
            "re-keyed; run: chatrecord verify"
        )
        assert (self.links(), self.run("SELECT mark FROM {kind}"), self.broken()) == (before, [], [(8, "changed")])
        assert demo(self.open_store(CHATRECORD_MASTER_KEY=A)).problem == "unkeyed"

    def test_keys_wrap_refuses_a_chain_whose_verified_position_disagrees(self) -> None:
        self.ingested_and_verified(A)
        self.forge_event_8(guard=False)
        self.plain_chain(guard=False)
        before = self.links()
        looked = list(Chatrecord(self.open_store(CHATRECORD_MASTER_KEY=A)).verify(record="chatrecord verify"))
        assert [(v.problem, v.version) for v in looked] == [("unkeyed", 20)]
        assert (self.broken(), self.run("SELECT version FROM {verified}")) == ([], [(20,)])  # the position is kept

        with pytest.raises(ChainBroken) as refused:
            keys_service.wrap(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"))

        assert str(refused.value) == (
            f"conversation {DEMO}: the hash chain is broken at version 20 (rewritten): its hash differs from the one "
            "verified earlier; nothing was re-keyed; run: chatrecord verify"
        )
        assert (self.links(), self.run("SELECT mark FROM {kind}")) == (before, [])
        assert demo(self.open_store(CHATRECORD_MASTER_KEY=A)).problem == "unkeyed"


class TestSQLiteChainTrust(SQLiteChainTables, ChainTrustContract):
    pass


class TestPostgresChainTrust(PostgresChainTables, ChainTrustContract):
    pass
