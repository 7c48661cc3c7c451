"""The keyed hash chain (`adapters.store.chain_key`), once per backend: under a master key every
link is HMAC-SHA256 under the chain key derived from it, so a writer of the database who changes
an event and recomputes every later link (with plain SHA-256, or with another key) is named by
`verify`; a keyed chain rewritten as an unkeyed one does not verify for a process with the key;
the store records which kind its chain is and refuses another key at open; the key commands key,
re-key and un-key the chain with the data keys, and never bless a chain that does not verify."""

from __future__ import annotations

import base64

import pytest

from adapters.api import DEMO_FILE, Chatrecord, demo_lines
from adapters.service import master_key as keys_service
from adapters.store.application import ConversationStore
from adapters.store.chain import GENESIS, ChainBroken, ChainedRecorder, link
from adapters.store.chain_key import UNKEYED, derive_chain_key, key_mark
from adapters.store.crypto import BadMasterKey
from adapters.store.heads_file import KeptHead
from adapters.store.verify import Verdict, verdicts, verify
from tests.integration.chain_tables import DEMO, ChainTables, PostgresChainTables, SQLiteChainTables

A_BYTES, B_BYTES = bytes(range(32)), bytes(range(100, 132))
A, B = base64.b64encode(A_BYTES).decode(), base64.b64encode(B_BYTES).decode()
NONE = ""  # overrides a CHATRECORD_MASTER_KEY of the test's own environment


def demo(store: ConversationStore) -> Verdict:
    """Returns the verdict of the demo conversation's chain."""
    return next(v for v in verdicts(store) if v.originator_id == DEMO)


class ChainKeyContract(ChainTables):
    """Tests; backends say how to open a store and change its rows directly."""

    past_the_guard = True  # a forger who can write the database turns the store's guard off first

    def open_store(self, views: bool = True, **overrides: str) -> ConversationStore:
        raise NotImplementedError

    def set_event(self, version: int, state: bytes) -> None:
        self.run(
            "UPDATE {events} SET state = ? WHERE originator_id = ? AND originator_version = ?", (state, self.key(DEMO), version)
        )

    def set_hash(self, version: int, digest: bytes) -> None:
        self.run(
            "UPDATE {chain} SET hash = ? WHERE originator_id = ? AND originator_version = ?", (digest, self.key(DEMO), version)
        )

    def delete_last(self, version: int) -> None:
        self.run("DELETE FROM {events} WHERE originator_id = ? AND originator_version = ?", (self.key(DEMO), version))
        self.run("DELETE FROM {chain} WHERE originator_id = ? AND originator_version = ?", (self.key(DEMO), version))

    def ingested(self, key: str) -> ConversationStore:
        store = self.open_store(CHATRECORD_MASTER_KEY=key)
        Chatrecord(store).ingest(demo_lines(), DEMO_FILE)
        return store

    def forge(self, version: int, chain_key: bytes | None, upto: int = 20) -> None:
        """Changes the demo's event `version` as a forger who can write the database would, and
        recomputes its link and every later one under `chain_key` (None: plain SHA-256)."""
        events, links = self.events(), self.links()
        topic, state = events[version]
        events[version] = (topic, state.replace(b'"uid":42', b'"uid":7', 1) if b'"uid":42' in state else state + b" ")
        self.set_event(version, events[version][1])
        digest = links[version - 1] if version > 1 else GENESIS
        for at in range(version, upto + 1):
            digest = link(digest, DEMO, at, *events[at], chain_key)
            self.set_hash(at, digest)

    def test_a_fresh_store_with_a_master_key_keys_its_chain_with_hmac(self) -> None:
        store = self.ingested(A)
        chain_key = derive_chain_key(A_BYTES)
        digest = GENESIS
        for version, (topic, state) in sorted(self.events().items()):
            digest = link(digest, DEMO, version, topic, state, chain_key)
        assert self.links()[20] == digest != link(self.links()[19], DEMO, 20, *self.events()[20])
        assert self.run("SELECT kind, mark FROM {kind}") == [("hmac-sha256", key_mark(chain_key))]
        assert key_mark(chain_key) != chain_key.hex()[:16]  # the mark does not give the key
        found = demo(self.open_store(CHATRECORD_MASTER_KEY=A))
        assert (found.ok, found.hash) == (True, digest)
        assert demo(store).ok

    def test_a_forger_who_recomputes_every_later_link_with_sha256_is_named(self) -> None:
        self.ingested(A)
        self.forge(3, None)
        found = demo(self.open_store(CHATRECORD_MASTER_KEY=A))
        assert (found.problem, found.version) == ("changed", 3)

    def test_a_forger_who_recomputes_every_later_link_with_another_key_is_named(self) -> None:
        self.ingested(A)
        self.forge(8, derive_chain_key(B_BYTES))
        found = demo(self.open_store(CHATRECORD_MASTER_KEY=A))
        assert (found.problem, found.version) == ("changed", 8)

    def test_a_keyed_chain_rewritten_as_an_unkeyed_one_does_not_verify(self) -> None:
        head = demo(self.ingested(A))
        assert head.hash is not None
        self.forge(1, None)  # every link plain SHA-256, from GENESIS: an unkeyed chain that holds
        self.run("DELETE FROM {kind}")
        store = self.open_store(CHATRECORD_MASTER_KEY=A)
        found = demo(store)
        assert (found.ok, found.problem, found.version, found.detail) == (False, "unkeyed", 20, UNKEYED)
        assert Chatrecord(store).chain("conv-demo-seo").problem == "unkeyed"  # the page's look, too
        assert isinstance(store.recorder, ChainedRecorder)
        kept = {DEMO: KeptHead("conv-demo-seo", DEMO, head.version, head.hash)}  # and kept heads name the rewrite
        against = next(verify(store.recorder, lambda _: "conv-demo-seo", DEMO, kept))
        assert (against.problem, against.version) == ("rewritten", 20)

    def test_no_key_command_blesses_a_chain_that_does_not_verify(self) -> None:
        self.ingested(NONE)
        before = self.links()
        self.set_event(5, self.events()[5][1] + b" ")
        with pytest.raises(ChainBroken, match="does not verify at version 5; nothing was re-keyed"):
            keys_service.wrap(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"))
        assert self.links() == before
        state = keys_service.state(self.open_store(CHATRECORD_MASTER_KEY=NONE))
        assert (state.protected, state.unwrapped) == (False, 1)  # the data keys' rewrap rolled back with it

    def test_a_store_whose_chain_is_keyed_with_another_key_is_refused_at_open(self) -> None:
        self.ingested(A)
        self.run("UPDATE {kind} SET mark = '0123456789abcdef'")
        with pytest.raises(BadMasterKey) as refused:
            self.open_store(CHATRECORD_MASTER_KEY=A)
        assert str(refused.value) == (
            "CHATRECORD_MASTER_KEY is not the key this store's hash chain is keyed with (key mark 0123456789abcdef, this "
            f"key's {key_mark(derive_chain_key(A_BYTES))}); set the master key the store was written with"
        )

    def test_the_last_event_deleted_with_its_link_is_found_by_kept_heads_only(self) -> None:
        """What a keyed chain does not find alone: a clean cut of the newest events (README,
        docs/reliability.md): heads kept outside the database (`verify --heads`, `--against`) do."""
        store = self.ingested(A)
        head = demo(store)
        assert head.hash is not None
        self.delete_last(20)
        reopened = self.open_store(CHATRECORD_MASTER_KEY=A)
        assert demo(reopened).ok
        kept = {DEMO: KeptHead("conv-demo-seo", DEMO, head.version, head.hash)}
        recorder = reopened.recorder
        assert isinstance(recorder, ChainedRecorder)
        against = next(verify(recorder, lambda _: "conv-demo-seo", DEMO, kept))
        assert (against.problem, against.version) == ("cut_off", 20)

    def test_the_key_commands_key_rekey_and_unkey_the_chain(self) -> None:
        store = self.ingested(NONE)
        plain = self.links()
        assert isinstance(store.recorder, ChainedRecorder) and store.recorder.chain_mark() is None
        assert demo(store).ok

        wrapped = keys_service.wrap(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"))
        keyed = self.links()
        assert (wrapped.rewrapped, wrapped.rekeyed) == (1, 20)
        assert keyed[20] != plain[20] and demo(self.open_store(CHATRECORD_MASTER_KEY=A)).ok
        assert self.run("SELECT mark FROM {kind}") == [(key_mark(derive_chain_key(A_BYTES)),)]

        rotated = keys_service.rotate(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"), B)
        assert rotated.rekeyed == 20 and self.links()[20] not in (plain[20], keyed[20])
        assert demo(self.open_store(CHATRECORD_MASTER_KEY=B)).ok

        unwrapped = keys_service.unwrap(self.open_store(CHATRECORD_MASTER_KEY=B, MASTER_KEY_UNBOUND="allow"))
        assert unwrapped.rekeyed == 20 and self.links() == plain
        assert demo(self.open_store(CHATRECORD_MASTER_KEY=NONE)).ok

    def test_a_re_key_forgets_the_verified_positions_so_the_next_look_is_ok(self) -> None:
        self.ingested(NONE)
        looked = Chatrecord(self.open_store(CHATRECORD_MASTER_KEY=NONE)).chain("conv-demo-seo", full=True, by="test")
        assert looked is not None and looked.ok
        assert self.run("SELECT version FROM {verified}") == [(20,)]  # the position a full look keeps

        keys_service.wrap(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"))

        assert self.run("SELECT version FROM {verified}") == []  # its hash was of a replaced link
        assert self.run("SELECT version FROM {broken}") == []  # the store's guard saw no change by hand
        after = Chatrecord(self.open_store(CHATRECORD_MASTER_KEY=A)).chain("conv-demo-seo", by="test")
        assert after is not None and (after.ok, after.version, after.kept) == (True, 20, None)

    def test_a_store_of_an_earlier_version_with_a_master_key_is_keyed_by_keys_wrap(self) -> None:
        self.ingested(A)
        self.run("DELETE FROM {kind}")  # as an earlier version wrote it: protected texts, plain links
        digest = GENESIS
        for version, (topic, state) in sorted(self.events().items()):
            digest = link(digest, DEMO, version, topic, state)
            self.set_hash(version, digest)
        assert demo(self.open_store(CHATRECORD_MASTER_KEY=A)).problem == "unkeyed"

        done = keys_service.wrap(self.open_store(CHATRECORD_MASTER_KEY=A, MASTER_KEY_UNBOUND="allow"))

        assert (done.changed, done.rewrapped, done.rekeyed) == (True, 0, 20)
        assert demo(self.open_store(CHATRECORD_MASTER_KEY=A)).ok


class TestSQLiteChainKey(SQLiteChainTables, ChainKeyContract):
    pass


class TestPostgresChainKey(PostgresChainTables, ChainKeyContract):
    pass
