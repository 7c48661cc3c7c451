"""The hash chain's contract, once per backend: every stored event is chained in the same
transaction, and `verify` names the first broken link after the stored bytes are tampered with
directly in the database (SQLite, PostgreSQL; in memory through the recorder's own dicts)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from eventsourcing.persistence import StoredEvent
from fastapi.testclient import TestClient
from psycopg import sql

from adapters.api import DEMO_FILE, Chatrecord, demo_lines
from adapters.backends.settings import memory_env
from adapters.bootstrap import build_store
from adapters.http.app import HttpSettings, create_app
from adapters.store.application import ConversationStore
from adapters.store.chain import GENESIS, ChainBroken, VersionRefused, link
from adapters.store.chain_checks import GUARD, BrokenChain
from adapters.store.heads_file import KeptHead
from adapters.store.verify import Verdict, verdicts
from domain.events import conversation_uuid
from tests.integration.backends import PostgresStores, SQLiteStores

ROOT = Path(__file__).resolve().parents[2]
DEMO = conversation_uuid("conv-demo-seo")


LATER_LINE = {
    "type": "user_message",
    "conversation": "conv-demo-seo",
    "at": "2026-11-03T10:00:00Z",
    "message": 4,
    "text": "Und jetzt?",
    "page": 0,
}


def by_name(found: Iterator[Verdict]) -> dict[str, Verdict]:
    return {v.conversation: v for v in found}


class ChainContract:
    """Tests; backends say how to open a store and how to change its rows directly."""

    guarded = True
    """Whether an event or chain row changed by hand stores a break and deletes the conversation's
    verified position (`adapters.store.chain_checks.GUARD`: the SQL backends' triggers; the in-memory
    store has none)."""
    bypass = False
    """Whether this test's changes go past the guard, as a writer who disables it first: what a
    look from a kept head or stored position finds without it."""

    def open_store(self) -> ConversationStore:
        raise NotImplementedError

    def events(self, store: ConversationStore) -> dict[int, tuple[str, bytes]]:
        """Returns the demo conversation's stored events by version: (topic, state)."""
        raise NotImplementedError

    def set_event(self, store: ConversationStore, version: int, topic: str, state: bytes) -> None:
        raise NotImplementedError

    def delete_event(self, store: ConversationStore, version: int) -> None:
        raise NotImplementedError

    def set_hash(self, store: ConversationStore, version: int, digest: bytes) -> None:
        raise NotImplementedError

    def delete_hash(self, store: ConversationStore, version: int) -> None:
        raise NotImplementedError

    def insert_event(self, store: ConversationStore, stored: StoredEvent) -> None:
        """Inserts a stored event beside the store: no hash row, no read model row."""
        raise NotImplementedError

    @pytest.fixture
    def store(self) -> ConversationStore:
        store = self.open_store()
        Chatrecord(store).ingest(demo_lines(), DEMO_FILE)
        Chatrecord(store).ingest((ROOT / "tests/data/behalten_tour.jsonl").read_bytes().splitlines(), "behalten")
        return store

    def test_every_event_is_chained_and_the_untouched_log_verifies(self, store: ConversationStore) -> None:
        found = by_name(verdicts(store))
        assert {name: (v.ok, v.version, v.events) for name, v in found.items()} == {
            "conv-demo-seo": (True, 20, 20),
            "conv-behalten": (True, 12, 12),
        }
        digest = GENESIS
        for version, (topic, state) in sorted(self.events(store).items()):
            digest = link(digest, DEMO, version, topic, state)
        assert found["conv-demo-seo"].hash == digest

    def test_a_changed_write_target_names_its_event(self, store: ConversationStore) -> None:
        version, (topic, state) = next(
            (v, e) for v, e in sorted(self.events(store).items()) if b'"write_target":{"table":"pages","uid":42}' in e[1]
        )
        self.set_event(store, version, topic, state.replace(b'"uid":42}', b'"uid":43}', 1))
        found = by_name(verdicts(store))
        assert (found["conv-demo-seo"].problem, found["conv-demo-seo"].version) == ("changed", version)
        assert found["conv-behalten"].ok

    def test_an_export_of_a_changed_event_names_the_break_over_http_too(self, store: ConversationStore) -> None:
        version, (topic, state) = next(
            (v, e) for v, e in sorted(self.events(store).items()) if b'"write_target":{"table":"pages","uid":42}' in e[1]
        )
        self.set_event(store, version, topic, state.replace(b'"uid":42}', b'"uid":43}', 1))
        chat = Chatrecord(store)
        done, untouched = chat.export("conv-demo-seo"), chat.export("conv-behalten")
        assert done.broken == f"version {version} (changed): the event's stored bytes were changed after it was appended"
        assert untouched.broken is None
        with TestClient(create_app(lambda: chat, HttpSettings(token=None)), base_url="http://127.0.0.1") as client:
            broken, ok = (client.get(f"/v1/conversations/{c}/export") for c in ("conv-demo-seo", "conv-behalten"))
        assert (broken.status_code, broken.headers.get("chatrecord-chain")) == (200, "broken")
        assert (ok.status_code, ok.headers.get("chatrecord-chain")) == (200, None)
        assert len(broken.text.splitlines()) == len(done.lines) == 19

    def test_a_later_look_recomputes_only_what_follows_the_head_it_verified(self, store: ConversationStore) -> None:
        chat = Chatrecord(store)
        first = chat.chain("conv-demo-seo")
        chat.record(LATER_LINE)
        later = chat.chain("conv-demo-seo")
        full = chat.chain("conv-demo-seo", full=True)

        assert (first.ok, first.version, first.kept) == (True, 20, None)
        assert (later.ok, later.version, later.events, later.kept) == (True, 21, 21, 20)
        assert later.hash == full.hash == by_name(verdicts(store))["conv-demo-seo"].hash
        assert later.kept_at is not None and full.kept is None
        again = chat.chain("conv-demo-seo")
        assert (again.version, again.kept, again.kept_at) == (21, 21, full.kept_at or again.kept_at)

    def test_a_later_look_finds_the_kept_head_rewritten(self, store: ConversationStore) -> None:
        self.bypass = True  # past the guard: what the look itself finds
        chat = Chatrecord(store)
        assert chat.chain("conv-demo-seo").ok
        self.set_hash(store, 20, b"\x00" * 32)  # the chain rewritten up to the head this process verified
        rewritten = chat.chain("conv-demo-seo")
        assert (rewritten.ok, rewritten.problem, rewritten.version) == (False, "rewritten", 20)
        assert chat.chain("conv-demo-seo").kept is None  # after a broken verdict: every hash again

    def test_a_later_look_finds_an_event_after_the_kept_head_changed(self, store: ConversationStore) -> None:
        self.bypass = True  # past the guard: what the look itself finds
        chat = Chatrecord(store)
        assert chat.chain("conv-demo-seo").ok
        chat.record(LATER_LINE)
        topic, state = self.events(store)[21]
        self.set_event(store, 21, topic, state[:-1] + bytes([state[-1] ^ 1]))
        changed = chat.chain("conv-demo-seo")
        assert (changed.ok, changed.problem, changed.version, changed.kept) == (False, "changed", 21, 20)

    def test_a_later_look_does_not_recompute_an_event_it_verified_which_a_full_look_does(self, store: ConversationStore) -> None:
        """What a kept verdict claims, exactly: an event at or before the head it verified whose
        bytes were changed without its hash is found by a full look, not by a later one; where
        the store's guard saw the change (SQL backends), the later look recomputes every hash."""
        chat = Chatrecord(store)
        assert chat.chain("conv-demo-seo").ok
        version, (topic, state) = next(
            (v, e) for v, e in sorted(self.events(store).items()) if b'"write_target":{"table":"pages","uid":42}' in e[1]
        )
        self.set_event(store, version, topic, state.replace(b'"uid":42}', b'"uid":43}', 1))
        kept = chat.chain("conv-demo-seo")
        full = chat.chain("conv-demo-seo", full=True)
        if self.guarded:
            assert (kept.ok, kept.problem, kept.version, kept.kept) == (False, "changed", version, None)
        else:
            assert (kept.ok, kept.kept) == (True, 20)
        assert (full.ok, full.problem, full.version) == (False, "changed", version)

    def test_a_later_look_finds_the_newest_events_cut_off(self, store: ConversationStore) -> None:
        self.bypass = True  # past the guard: what the look itself finds
        chat = Chatrecord(store)
        assert chat.chain("conv-demo-seo").ok
        for version in (20, 19):
            self.delete_event(store, version)
            self.delete_hash(store, version)
        cut = chat.chain("conv-demo-seo")
        assert (cut.ok, cut.problem, cut.version) == (False, "cut_off", 20)

    # ------------------------------------------------------------ the stored verified position

    def verified(self, store: ConversationStore) -> None:
        """Runs `chatrecord verify`'s use case to its end: every chain recomputed, positions stored."""
        assert all(v.ok for v in Chatrecord(store).verify(record="chatrecord verify"))

    def test_the_first_look_after_a_start_recomputes_only_what_follows_the_stored_position(
        self, store: ConversationStore
    ) -> None:
        self.verified(store)
        Chatrecord(store).record(LATER_LINE)
        chat = Chatrecord(self.reopened(store))  # a server started anew: nothing kept in this process

        first = chat.chain("conv-demo-seo")
        full = chat.chain("conv-demo-seo", full=True)

        assert (first.ok, first.version, first.events, first.kept, first.kept_by) == (True, 21, 21, 20, "chatrecord verify")
        assert first.hash == full.hash and full.kept is None
        assert first.kept_at is not None and first.kept_at.tzinfo is not None

    def test_a_full_look_stores_its_position_for_the_next_process(self, store: ConversationStore) -> None:
        assert Chatrecord(store).chain("conv-demo-seo").kept is None  # no position stored: every hash
        later = Chatrecord(self.reopened(store)).chain("conv-demo-seo")
        assert (later.ok, later.kept, later.kept_by) == (True, 20, "the server")

    def test_an_event_changed_after_the_stored_position_is_found_on_the_first_look_after_a_start(
        self, store: ConversationStore
    ) -> None:
        self.bypass = True  # past the guard: what the look itself finds
        self.verified(store)
        Chatrecord(store).record(LATER_LINE)
        topic, state = self.events(store)[21]
        self.set_event(store, 21, topic, state[:-1] + bytes([state[-1] ^ 1]))

        changed = Chatrecord(self.reopened(store)).chain("conv-demo-seo")

        assert (changed.ok, changed.problem, changed.version, changed.kept) == (False, "changed", 21, 20)

    def test_the_stored_positions_hash_rewritten_is_found_on_the_first_look_after_a_start(self, store: ConversationStore) -> None:
        self.bypass = True  # past the guard: what the look itself finds
        self.verified(store)
        self.set_hash(store, 20, b"\x00" * 32)
        chat = Chatrecord(self.reopened(store))
        rewritten = chat.chain("conv-demo-seo")
        assert (rewritten.ok, rewritten.problem, rewritten.version) == (False, "rewritten", 20)
        assert chat.chain("conv-demo-seo").kept is None  # after a broken verdict: every hash again

    def test_an_event_at_or_before_the_stored_position_changed_without_its_hash_is_found_by_a_full_look_only(
        self, store: ConversationStore
    ) -> None:
        """What a verdict from a stored position claims, exactly (as the kept head's in one process)."""
        self.verified(store)
        version, (topic, state) = next(
            (v, e) for v, e in sorted(self.events(store).items()) if b'"write_target":{"table":"pages","uid":42}' in e[1]
        )
        self.set_event(store, version, topic, state.replace(b'"uid":42}', b'"uid":43}', 1))
        chat = Chatrecord(self.reopened(store))
        kept = chat.chain("conv-demo-seo")
        full = chat.chain("conv-demo-seo", full=True)
        if self.guarded:  # the guard deleted the position: the first look recomputed every hash
            assert (kept.ok, kept.problem, kept.version, kept.kept) == (False, "changed", version, None)
        else:
            assert (kept.ok, kept.kept, kept.kept_by) == (True, 20, "chatrecord verify")
        assert (full.ok, full.problem, full.version) == (False, "changed", version)

    # ------------------------------------------------------------ a stored break (issue 35, item 1)

    def changed_write_target(self, store: ConversationStore) -> tuple[int, str, bytes]:
        """Changes the demo's first write target `pages:42` to `pages:7` in the database, as by
        hand; returns the event's version, topic and state as they were."""
        version, (topic, state) = next(
            (v, e) for v, e in sorted(self.events(store).items()) if b'"write_target":{"table":"pages","uid":42}' in e[1]
        )
        self.set_event(store, version, topic, state.replace(b'"uid":42}', b'"uid":7}', 1))
        return version, topic, state

    def test_a_failed_verify_is_stored_and_every_later_look_shows_it_until_a_full_verify_passes(
        self, store: ConversationStore
    ) -> None:
        """The issue's log: verify ok, event 8 changed by hand, verify broken; the position the
        first verify stored was trusted by the next look (ok, from event 20) before."""
        self.verified(store)
        version, topic, state = self.changed_write_target(store)
        assert [(v.ok, v.version) for v in Chatrecord(store).verify("conv-demo-seo", record="chatrecord verify")] == [
            (False, version)
        ]

        look = Chatrecord(self.reopened(store)).chain("conv-demo-seo")
        self.set_event(store, version, topic, state)  # put back: the break stays shown until a full look passes
        still = Chatrecord(self.reopened(store)).chain("conv-demo-seo")
        recorder = self.reopened(store).recorder
        assert recorder.verified_position(DEMO) is None  # type: ignore[attr-defined]  # never trusted after the break
        self.verified(store)
        passed = Chatrecord(self.reopened(store)).chain("conv-demo-seo")

        assert (look.ok, look.version, look.problem, look.found_by) == (False, version, "changed", "chatrecord verify")
        assert look.found_at is not None and look.kept is None
        assert (still.ok, still.version, still.found_by) == (False, version, "chatrecord verify")
        assert (passed.ok, passed.version, passed.kept, passed.kept_by, passed.found_at) == (
            True,
            20,
            20,
            "chatrecord verify",
            None,
        )

    def test_a_server_that_kept_an_ok_verdict_shows_the_break_another_process_stored(self, store: ConversationStore) -> None:
        chat = Chatrecord(store)
        assert chat.chain("conv-demo-seo").ok  # kept by this process, as a running server keeps it
        version, _, _ = self.changed_write_target(store)
        assert not all(v.ok for v in Chatrecord(self.reopened(store)).verify(record="chatrecord verify"))

        shown = chat.chain("conv-demo-seo")

        assert (shown.ok, shown.version, shown.problem, shown.found_by) == (False, version, "changed", "chatrecord verify")

    def test_a_break_a_look_from_the_position_finds_is_stored_for_the_next_process(self, store: ConversationStore) -> None:
        self.bypass = True  # past the guard: what the look itself finds
        self.verified(store)
        Chatrecord(store).record(LATER_LINE)
        topic, state = self.events(store)[21]
        self.set_event(store, 21, topic, state[:-1] + bytes([state[-1] ^ 1]))
        assert not Chatrecord(self.reopened(store)).chain("conv-demo-seo").ok  # from the position: found after it
        self.set_event(store, 21, topic, state)  # put back

        later = Chatrecord(self.reopened(store)).chain("conv-demo-seo")
        full = Chatrecord(self.reopened(store)).chain("conv-demo-seo", full=True)
        after = Chatrecord(self.reopened(store)).chain("conv-demo-seo")

        assert (later.ok, later.problem, later.version, later.found_by) == (False, "changed", 21, "the server")
        assert (full.ok, full.kept, full.found_at) == (True, None, None)  # every hash recomputed: ok again
        assert (after.ok, after.version, after.kept, after.kept_by) == (True, 21, 21, "the server")

    def test_an_audit_or_export_that_finds_a_break_stores_it_for_the_page(self, store: ConversationStore) -> None:
        """Any check that recomputes every hash keeps what it found, as `verify` does."""
        self.verified(store)
        version, _, _ = self.changed_write_target(store)
        audit = Chatrecord(self.reopened(store)).audit("conv-demo-seo", chain=True)
        from_audit = Chatrecord(self.reopened(store)).chain("conv-demo-seo")
        assert audit.chain is not None and (audit.chain.ok, audit.chain.version) == (False, version)
        assert (from_audit.ok, from_audit.version, from_audit.found_by) == (False, version, "an audit")

    def test_the_page_and_the_export_header_never_say_verified_of_a_changed_event(self, store: ConversationStore) -> None:
        """Wherever the page or the API says the chain verified: after one stored event is
        changed since the last verify and a check found it, the word appears nowhere."""
        self.verified(store)
        chat = Chatrecord(self.reopened(store))
        with TestClient(create_app(lambda: chat, HttpSettings(token=None)), base_url="http://127.0.0.1") as client:
            before = client.get("/ui/conversations/conv-demo-seo")
            version, _, _ = self.changed_write_target(store)
            exported = client.get("/v1/conversations/conv-demo-seo/export")  # a check: every hash recomputed
            page = client.get("/ui/conversations/conv-demo-seo")
            alone = client.get("/ui/conversations/conv-demo-seo/chain")

        assert "✔ Chain verified up to event 20 by chatrecord verify at " in before.text
        assert re.search(r"\bverified\b", page.text) is None and re.search(r"\bverified\b", alone.text) is None
        assert f"✘ Chain broken at event {version} (changed)" in page.text and "Found by an export at " in page.text
        assert "<iframe" not in page.text
        assert exported.headers.get("chatrecord-chain") == "broken"
        assert not any("verified" in f"{k}: {v}".lower() for k, v in [*exported.headers.items(), *page.headers.items()])

    def events_hash(self, store: ConversationStore, version: int) -> bytes:
        """Returns the demo's recorded hash at `version`."""
        return dict((v, h) for _, v, h in store.recorder.chain_links(None, DEMO))[version]  # type: ignore[attr-defined]

    def test_the_page_finds_an_event_changed_after_the_stored_position_on_its_first_load(self, store: ConversationStore) -> None:
        self.bypass = True  # past the guard: what the look itself finds
        self.verified(store)
        Chatrecord(store).record(LATER_LINE)
        topic, state = self.events(store)[21]
        assert b'"page":0' in state
        self.set_event(store, 21, topic, state.replace(b'"page":0', b'"page":5'))  # still an event the page reads
        chat = Chatrecord(self.reopened(store))
        with TestClient(create_app(lambda: chat, HttpSettings(token=None)), base_url="http://127.0.0.1") as client:
            page = client.get("/ui/conversations/conv-demo-seo")

        assert re.search(r"\bverified\b", page.text) is None
        assert "✘ Chain broken at event 21 (changed)" in page.text
        assert (
            "Found now, recomputing the events after event 20 (every hash up to it was recomputed and found ok by " in page.text
        )

    def test_a_dropped_event_is_named(self, store: ConversationStore) -> None:
        self.delete_event(store, 5)
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("deleted", 5)

    def test_a_dropped_event_and_its_hash_leave_a_gap(self, store: ConversationStore) -> None:
        self.delete_event(store, 5)
        self.delete_hash(store, 5)
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("deleted", 5)

    def test_two_swapped_events_are_named(self, store: ConversationStore) -> None:
        events = self.events(store)
        self.set_event(store, 6, *events[7])
        self.set_event(store, 7, *events[6])
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("reordered", 6)
        assert "version 7 belongs here" in (verdict.detail or "")

    def test_reading_two_swapped_events_is_one_error_naming_the_event(self, store: ConversationStore) -> None:
        from adapters.store.serialization import UnreadableEvent
        from domain.errors import ChatrecordError

        events, chat = self.swapped(store)

        with pytest.raises(UnreadableEvent) as refused:
            chat.audit("conv-demo-seo")

        assert isinstance(refused.value, ChatrecordError)  # the CLI's one line, HTTP's problem
        assert refused.value.version == 7  # event 6's sealed texts do not open as version 7's
        assert str(refused.value) == (
            f"cannot load stored event {events[6][0]!r} of {DEMO} version 7: an encrypted "
            "text was changed (InvalidTag()); run: chatrecord verify"
        )

    def test_a_conversation_whose_log_cannot_be_read_stops_no_other_conversations_read_models(
        self, store: ConversationStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        from adapters.store.serialization import UnreadableEvent

        events, chat = self.swapped(store)

        behalten = chat.audit("conv-behalten")  # the read models are made and folded from the log here
        report = chat.rebuild("2026-11-01")

        assert behalten.rows[-1].version == 12 and chat.turn_input("conv-behalten").message == 5
        assert (report.unreadable, report.conversations) == ((str(DEMO),), 2)  # the unreadable one counted too
        assert chat.conversation_id(str(DEMO)) == "conv-demo-seo"  # its first event reads: as verify names it
        assert [r.getMessage() for r in caplog.records if "stop before" in r.getMessage()][-1] == (
            f"chatrecord: the read models of conversation {DEMO} stop before version 7: cannot load stored event "
            f"{events[6][0]!r} of {DEMO} version 7: an encrypted text was changed (InvalidTag()); run: chatrecord verify"
        )
        with pytest.raises(UnreadableEvent):
            chat.turn_input("conv-demo-seo")

    def test_a_conversation_whose_sealed_texts_were_swapped_is_erased_and_its_erasure_recorded(
        self, store: ConversationStore
    ) -> None:
        _, chat = self.swapped(store)

        done = chat.erase("conv-demo-seo")  # with its key gone every text reads as erased, and the log reads

        assert (done.recorded, done.version, done.unreadable) == (True, 21, None)
        assert all("[erased]" in m.text for m in chat.turn_input("conv-demo-seo").messages if m.role == "user")

    def test_a_conversation_whose_log_cannot_be_read_is_erased_as_far_as_it_can_be(self, store: ConversationStore) -> None:
        from adapters.store.serialization import UnreadableEvent

        topic, _ = self.events(store)[5]
        self.set_event(store, 5, topic, b"{not json")
        chat = Chatrecord(self.reopened(store))

        done = chat.erase("conv-demo-seo")

        assert (done.recorded, done.version, done.rewrote_view) == (False, 20, True)
        assert done.unreadable is not None and done.unreadable.startswith(f"cannot load stored event {topic!r} of ")
        assert chat.store.mapper.keys.erased_at(DEMO) is not None  # type: ignore[union-attr]
        with pytest.raises(UnreadableEvent):
            chat.turn_input("conv-demo-seo")  # its rows are dropped; the read says why they cannot be made again
        assert chat.erase("conv-demo-seo").unreadable == done.unreadable  # again: the same, nothing more to do

    def swapped(self, store: ConversationStore) -> tuple[dict[int, tuple[str, bytes]], Chatrecord]:
        """Swaps the demo's stored events 6 and 7; returns them as they were, and a Chatrecord
        on the store as a new process opens it."""
        events = self.events(store)
        self.set_event(store, 6, *events[7])
        self.set_event(store, 7, *events[6])
        return events, Chatrecord(self.reopened(store))

    def reopened(self, store: ConversationStore) -> ConversationStore:
        """The store as a new process opens it (nothing of it cached)."""
        return self.open_store()

    def test_a_changed_hash_is_named(self, store: ConversationStore) -> None:
        self.set_hash(store, 8, bytes(range(32)))
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("hash_changed", 8)

    def test_an_event_without_a_hash_was_inserted(self, store: ConversationStore) -> None:
        self.delete_hash(store, 20)
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("inserted", 20)

    def test_a_conversation_stored_before_the_chain_is_chained_by_the_explicit_upgrade_only(
        self, store: ConversationStore
    ) -> None:
        self.bypass = True  # as an earlier version left it: no hash, and no break the guard stored
        for version in range(1, 21):
            self.delete_hash(store, version)
        store = self.reopened(store)  # as a process opening the old store: no hash kept
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("unchained", 1)
        chat = Chatrecord(store)

        with pytest.raises(ChainBroken) as refused:  # an append never hashes events it has not hashed before
            chat.record(LATER_LINE)
        upgraded = chat.upgrade_chains()

        assert (refused.value.problem, refused.value.version) == ("unchained", 1)
        assert "run: chatrecord verify --upgrade" in str(refused.value)
        assert len(store.events("conv-demo-seo")) == 20  # nothing of the refused line stored
        assert [(v.conversation, v.ok, v.events) for v in upgraded] == [("conv-demo-seo", True, 20)]
        assert chat.upgrade_chains() == []  # done once
        assert chat.ingest([json.dumps(LATER_LINE)], "later").stopped is None
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.ok, verdict.version, verdict.events) == (True, 21, 21)

    def test_an_append_after_an_event_written_beside_the_store_is_refused_with_the_verdict(
        self, store: ConversationStore
    ) -> None:
        events = store.events("conv-demo-seo")
        segment = next(e for e in reversed(events) if type(e).__name__ == "SegmentReturned")
        forged = segment.model_copy(update={"originator_version": 21, "segment": segment.segment[:-1] + "9"})
        stored = store.mapper.to_stored_event(forged)
        self.insert_event(store, stored)  # decodable, no hash row
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("inserted", 21)
        for chat in (Chatrecord(store), Chatrecord(self.reopened(store))):  # hash kept, or read
            with pytest.raises(ChainBroken) as refused:
                chat.record(LATER_LINE)
            assert (refused.value.problem, refused.value.version) == ("inserted", 21)
            assert str(refused.value) == (
                'conversation "conv-demo-seo": the hash chain is broken at version 21 (inserted): the event has no recorded '
                "hash, it was written beside the store; nothing was appended; run: chatrecord verify"
            )
            assert chat.upgrade_chains() == []  # a chained conversation is never upgraded

        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version, verdict.events) == ("inserted", 21, 20)
        assert len(self.events(store)) == 21  # the forged event, nothing after it

    def test_an_append_after_the_newest_event_was_deleted_names_the_broken_chain_at_once(self, store: ConversationStore) -> None:
        """The newest event deleted by hand, its hash left: the append's chain row conflicts with
        that hash on every try, so the write is refused at once naming the break (no retry can
        get past it), not after every try as a conflict with other writers to send again."""
        self.delete_event(store, 20)
        writer = self.reopened(store)  # a process that reads the log anew: at version 19
        writer.max_attempts = 3
        with pytest.raises(ChainBroken) as refused:
            Chatrecord(writer).record(LATER_LINE)
        assert (refused.value.problem, refused.value.version) == ("deleted", 20)
        assert str(refused.value) == (
            'conversation "conv-demo-seo": the hash chain is broken at version 20 (deleted): its hash is recorded, '
            "its event is not; nothing was appended; run: chatrecord verify"
        )
        assert sorted(self.events(store)) == list(range(1, 20))
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("deleted", 20)

    def test_an_append_after_the_newest_event_was_deleted_with_its_hash_names_the_cut_at_once(
        self, store: ConversationStore
    ) -> None:
        """The newest event deleted by hand with its hash: the chain alone is a valid shorter one,
        but the history index, written in the events' transactions, saw version 20; the next
        append is refused naming the cut, not stored as a new version 20 that hides it."""
        self.delete_event(store, 20)
        self.delete_hash(store, 20)
        with pytest.raises(ChainBroken) as refused:
            Chatrecord(self.reopened(store)).record(LATER_LINE)
        assert (refused.value.problem, refused.value.version) == ("cut_off", 20)
        assert str(refused.value) == (
            'conversation "conv-demo-seo": the log ends at version 19, but its history index was written at version 20: '
            "the newest events were removed from the log; nothing was appended; run: chatrecord verify --against heads "
            "kept earlier"
        )
        assert sorted(self.events(store)) == list(range(1, 20))

    def test_an_append_is_refused_while_a_stored_break_names_the_newest_events_cut_off(self, store: ConversationStore) -> None:
        """Found by a fresh user: a break `verify --against` stored (the newest events cut off with
        their hashes, and the history index with them, as a backup restored) was wiped by the next
        append, whose new events stood where the removed ones stood. The append is refused while
        the break is stored, nothing of it is stored, and every look still shows the break."""
        cut = BrokenChain(DEMO, 21, "cut_off", "version 21 was kept in heads", datetime.now(UTC), "chatrecord verify --against")
        store.recorder.keep_verdicts([], [cut])  # type: ignore[attr-defined]
        writer = self.reopened(store)
        with pytest.raises(ChainBroken) as refused:
            Chatrecord(writer).record(LATER_LINE)
        assert (refused.value.problem, refused.value.version) == ("cut_off", 21)
        assert str(refused.value).startswith(
            'conversation "conv-demo-seo": the store recorded a break of its chain at version 21 (cut_off): events it '
            "held were removed; nothing was appended"
        )
        assert sorted(self.events(store)) == list(range(1, 21))
        verdict = by_name(verdicts(store))["conv-demo-seo"]
        assert verdict.ok  # the chain alone cannot see the cut; the stored break is what keeps it
        assert store.recorder.broken_chain(DEMO) is not None  # type: ignore[attr-defined]

    def test_an_event_at_version_0_is_refused_as_what_it_is(self, store: ConversationStore) -> None:
        """An append of an event at version 0 (built by hand: no command decides one) is refused
        saying so, not as a break of the chain at version -1 by an event written beside the store;
        one written beside the store at version 0 is named by `verify` at version 0."""
        first = store.events("conv-demo-seo")[0]
        stored = store.mapper.to_stored_event(first.model_copy(update={"originator_version": 0}))
        with pytest.raises(VersionRefused) as refused:
            store.recorder.insert_events([stored])
        assert (refused.value.problem, refused.value.version) == ("before_first", 0)
        assert str(refused.value) == (
            f"conversation {DEMO}: refused an event at version 0: its first event is version 1, each next one the "
            "version after it; nothing was appended"
        )
        assert sorted(self.events(store)) == list(range(1, 21))
        self.insert_event(store, stored)
        verdict = by_name(verdicts(store))[str(DEMO)]  # its first event names it: this one is no start
        assert (verdict.problem, verdict.version) == ("inserted", 0)
        assert verdict.detail == "an event at version 0, before the first (1): written beside the store"

    def test_kept_heads_find_the_newest_events_cut_off(self, store: ConversationStore) -> None:
        head = by_name(verdicts(store))["conv-demo-seo"]
        assert head.hash is not None
        kept = {DEMO: KeptHead("conv-demo-seo", DEMO, head.version, head.hash)}
        for version in (20, 19):
            self.delete_event(store, version)
            self.delete_hash(store, version)
        assert by_name(verdicts(store))["conv-demo-seo"].ok  # a clean cut: the chain alone cannot tell
        verdict = by_name(_verify_against(store, kept))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("cut_off", 19)
        assert "store ends at version 18" in (verdict.detail or "")

    def test_kept_heads_find_a_rewritten_log(self, store: ConversationStore) -> None:
        head = by_name(verdicts(store))["conv-demo-seo"]
        assert head.hash is not None
        kept = {DEMO: KeptHead("conv-demo-seo", DEMO, head.version, head.hash)}
        events = self.events(store)
        topic, state = events[3]
        events[3] = (topic, state.replace(b'"uid":42', b'"uid":43', 1) if b'"uid":42' in state else state + b" ")
        self.set_event(store, 3, *events[3])
        digest = GENESIS
        for version, (topic, state) in sorted(events.items()):  # the forger recomputes every hash
            digest = link(digest, DEMO, version, topic, state)
            self.set_hash(store, version, digest)
        assert by_name(verdicts(store))["conv-demo-seo"].ok
        verdict = by_name(_verify_against(store, kept))["conv-demo-seo"]
        assert (verdict.problem, verdict.version) == ("rewritten", 20)


def _verify_against(store: ConversationStore, heads: dict[UUID, KeptHead]) -> Iterator[Verdict]:
    from adapters.store.verify import verify

    def name_of(stored: Any) -> str:
        return "conv-demo-seo" if stored[0] == DEMO else "conv-behalten"

    return verify(store.recorder, name_of, None, heads)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- backends


class TestInMemoryChain(ChainContract):
    guarded = False

    def open_store(self) -> ConversationStore:
        return build_store(memory_env())

    def reopened(self, store: ConversationStore) -> ConversationStore:
        return store  # another process has none of it

    # the in-memory store decides on the state it keeps, which never reads the changed event again
    test_an_append_after_the_newest_event_was_deleted_names_the_broken_chain_at_once = None  # type: ignore[assignment]
    test_an_append_after_the_newest_event_was_deleted_with_its_hash_names_the_cut_at_once = None  # type: ignore[assignment]
    test_a_conversation_whose_log_cannot_be_read_is_erased_as_far_as_it_can_be = None  # type: ignore[assignment]

    def _index(self, store: ConversationStore) -> dict[int, int]:
        return store.recorder._stored_events_index[str(DEMO)]  # type: ignore[attr-defined]

    def events(self, store: ConversationStore) -> dict[int, tuple[str, bytes]]:
        stored = store.recorder._stored_events  # type: ignore[attr-defined]
        return {v: (stored[p].topic, stored[p].state) for v, p in self._index(store).items()}

    def set_event(self, store: ConversationStore, version: int, topic: str, state: bytes) -> None:
        stored = store.recorder._stored_events  # type: ignore[attr-defined]
        position = self._index(store)[version]
        stored[position] = StoredEvent(originator_id=DEMO, originator_version=version, topic=topic, state=state)

    def delete_event(self, store: ConversationStore, version: int) -> None:
        del self._index(store)[version]

    def set_hash(self, store: ConversationStore, version: int, digest: bytes) -> None:
        store.recorder.chain[(DEMO, version)] = digest  # type: ignore[attr-defined]

    def delete_hash(self, store: ConversationStore, version: int) -> None:
        del store.recorder.chain[(DEMO, version)]  # type: ignore[attr-defined]

    def insert_event(self, store: ConversationStore, stored: StoredEvent) -> None:
        from eventsourcing.popo import POPOApplicationRecorder

        POPOApplicationRecorder._insert_events(store.recorder, [stored])  # type: ignore[arg-type]


class GuardContract(ChainContract):
    """Tests of the store's guard (`adapters.store.chain_checks.GUARD`), which the SQL backends
    have and the in-memory store, in which nothing is changed by hand, has not."""

    def test_the_page_never_says_verified_after_an_event_is_changed_by_hand_since_the_last_verify(
        self, store: ConversationStore
    ) -> None:
        """No check ran since the change: the store's guard deleted the position the last verify
        stored (the page started from it, and said verified), so the first load recomputes every
        hash, even in a server that had verified the chain before."""
        self.verified(store)
        running = Chatrecord(self.reopened(store))
        assert running.chain("conv-demo-seo").ok
        version, _, _ = self.changed_write_target(store)
        started = Chatrecord(self.reopened(store))
        pages = []
        for chat in (running, started):
            with TestClient(create_app(lambda c=chat: c, HttpSettings(token=None)), base_url="http://127.0.0.1") as client:
                pages.append(client.get("/ui/conversations/conv-demo-seo").text)

        for page in pages:
            assert re.search(r"\bverified\b", page) is None
            assert f"✘ Chain broken at event {version} (changed)" in page

    def test_the_guard_stores_a_break_for_a_conversation_changed_by_hand_only(self, store: ConversationStore) -> None:
        self.verified(store)
        self.set_hash(store, 20, self.events_hash(store, 20))  # an UPDATE that leaves the row as it was counts too
        recorder = self.reopened(store).recorder
        behalten = conversation_uuid("conv-behalten")

        assert recorder.verified_position(DEMO) is None  # type: ignore[attr-defined]
        assert recorder.verified_position(behalten) is not None  # type: ignore[attr-defined]
        broken = recorder.broken_chain(DEMO)  # type: ignore[attr-defined]
        assert broken is not None and (broken.version, broken.problem, broken.by) == (20, "changed", "the store's guard")
        assert broken.detail.startswith("its event or hash was changed in the database, outside chatrecord")
        assert recorder.broken_chain(behalten) is None  # type: ignore[attr-defined]


class TestSQLiteChain(SQLiteStores, GuardContract):
    def _run(self, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
        import sqlite3

        with sqlite3.connect(self.path) as conn:
            guards = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE ?", (f"{GUARD}%",))
            dropped = guards.fetchall() if self.bypass else []
            for name, _ in dropped:
                conn.execute(f"DROP TRIGGER {name}")
            try:
                return conn.execute(statement, params).fetchall()
            finally:
                for _, made in dropped:
                    conn.execute(made)

    def events(self, store: ConversationStore) -> dict[int, tuple[str, bytes]]:
        rows = self._run("SELECT originator_version, topic, state FROM stored_events WHERE originator_id = ?", (DEMO.hex,))
        return {v: (t, bytes(s)) for v, t, s in rows}

    def set_event(self, store: ConversationStore, version: int, topic: str, state: bytes) -> None:
        self._run(
            "UPDATE stored_events SET topic = ?, state = ? WHERE originator_id = ? AND originator_version = ?",
            (topic, state, DEMO.hex, version),
        )

    def delete_event(self, store: ConversationStore, version: int) -> None:
        self._run("DELETE FROM stored_events WHERE originator_id = ? AND originator_version = ?", (DEMO.hex, version))

    def set_hash(self, store: ConversationStore, version: int, digest: bytes) -> None:
        self._run(
            "UPDATE chatrecord_chain SET hash = ? WHERE originator_id = ? AND originator_version = ?", (digest, DEMO.hex, version)
        )

    def delete_hash(self, store: ConversationStore, version: int) -> None:
        self._run("DELETE FROM chatrecord_chain WHERE originator_id = ? AND originator_version = ?", (DEMO.hex, version))

    def insert_event(self, store: ConversationStore, stored: StoredEvent) -> None:
        self._run(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)",
            (DEMO.hex, stored.originator_version, stored.topic, stored.state),
        )


class TestPostgresChain(PostgresStores, GuardContract):
    def _run(self, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
        query = sql.SQL(statement).format(
            events=sql.Identifier(self.schema, "conversationstore_events"), chain=sql.Identifier(self.schema, "chatrecord_chain")
        )
        with psycopg.connect(self.url) as conn:
            tables = [sql.Identifier(self.schema, t) for t in ("conversationstore_events", "chatrecord_chain")]
            for table in tables if self.bypass else []:  # put back by the same transaction
                conn.execute(sql.SQL("ALTER TABLE {} DISABLE TRIGGER {}").format(table, sql.Identifier(GUARD)))
            cursor = conn.execute(query, params)
            found = cursor.fetchall() if cursor.description else []
            for table in tables if self.bypass else []:
                conn.execute(sql.SQL("ALTER TABLE {} ENABLE TRIGGER {}").format(table, sql.Identifier(GUARD)))
            return found

    def events(self, store: ConversationStore) -> dict[int, tuple[str, bytes]]:
        rows = self._run("SELECT originator_version, topic, state FROM {events} WHERE originator_id = %s", (DEMO,))
        return {v: (t, bytes(s)) for v, t, s in rows}

    def set_event(self, store: ConversationStore, version: int, topic: str, state: bytes) -> None:
        self._run(
            "UPDATE {events} SET topic = %s, state = %s WHERE originator_id = %s AND originator_version = %s",
            (topic, state, DEMO, version),
        )

    def delete_event(self, store: ConversationStore, version: int) -> None:
        self._run("DELETE FROM {events} WHERE originator_id = %s AND originator_version = %s", (DEMO, version))

    def set_hash(self, store: ConversationStore, version: int, digest: bytes) -> None:
        self._run("UPDATE {chain} SET hash = %s WHERE originator_id = %s AND originator_version = %s", (digest, DEMO, version))

    def delete_hash(self, store: ConversationStore, version: int) -> None:
        self._run("DELETE FROM {chain} WHERE originator_id = %s AND originator_version = %s", (DEMO, version))

    def insert_event(self, store: ConversationStore, stored: StoredEvent) -> None:
        self._run(
            "INSERT INTO {events} (originator_id, originator_version, topic, state) VALUES (%s, %s, %s, %s)",
            (DEMO, stored.originator_version, stored.topic, stored.state),
        )

    def index_rows(self) -> dict[str, list[Any]]:
        """Returns the demo conversation's history index rows, by table."""
        found = {}
        for table in ("chatrecord_index", "chatrecord_segments", "chatrecord_messages", "chatrecord_sources"):
            query = sql.SQL("SELECT * FROM {} WHERE cid = %s ORDER BY 1, 2").format(sql.Identifier(self.schema, table))
            with psycopg.connect(self.url) as conn:
                found[table] = conn.execute(query, (str(DEMO),)).fetchall()
        return found

    def test_a_refused_append_sent_as_statements_stores_nothing(self, store: ConversationStore) -> None:
        """Where the append goes as the library's pipelined statements (`_append_synced`: no
        append function to be had, as for a role without CREATE on the schema), the chain's
        refusal, raised after the INSERT was sent, rolls the events back with the index rows
        written before them: the line may be sent again, and is not taken for a repeat."""
        segment = next(e for e in reversed(store.events("conv-demo-seo")) if type(e).__name__ == "SegmentReturned")
        forged = segment.model_copy(update={"originator_version": 21, "segment": segment.segment[:-1] + "9"})
        self.insert_event(store, store.mapper.to_stored_event(forged))  # no hash row
        with pytest.raises(ChainBroken):  # in one call: refused; the index has caught up with the forged event
            Chatrecord(store).record(LATER_LINE)
        before = self.index_rows()
        for writer in (store, self.reopened(store)):
            writer.recorder._function = ""  # type: ignore[attr-defined]  # appends go as statements
            with pytest.raises(ChainBroken) as refused:
                Chatrecord(writer).record(LATER_LINE)
            assert (refused.value.problem, refused.value.version) == ("inserted", 21)
            assert sorted(self.events(store)) == list(range(1, 22))  # the forged event, nothing after it
            assert self.index_rows() == before
