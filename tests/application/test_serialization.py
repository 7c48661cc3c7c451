"""The pydantic mapper and orjson transcoder: round trips, compression, cipher, upcasting."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from uuid import uuid4

import orjson
import pytest
from eventsourcing.compressor import ZlibCompressor
from eventsourcing.persistence import Cipher, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.service.line_commands import read_events
from adapters.store.serialization import OrjsonTranscoder, PydanticMapper
from domain.conversation import ConversationSnapshot, evolve, project_conversation
from domain.events import ConversationEvent, ConversationStarted, UserMessagePosted

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
T0 = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)


class XorCipher(Cipher):
    """A stand-in cipher (the real ones need pycryptodome or cryptography)."""

    def __init__(self, environment: Any = None) -> None:
        self.key = 0x5A

    def encrypt(self, plaintext: bytes) -> bytes:
        return b"X" + bytes(b ^ self.key for b in plaintext)

    def decrypt(self, ciphertext: bytes) -> bytes:
        assert ciphertext[:1] == b"X"
        return bytes(b ^ self.key for b in ciphertext[1:])


class Renamed(ConversationEvent):
    """An event at version 3: v2 added `kind`, v3 renamed `label` to `title`."""

    class_version: ClassVar[int] = 3
    title: str
    kind: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["kind"] = "chat"

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        state["title"] = state.pop("label")


def stored(cls: type, state: dict[str, Any], version: int = 1) -> StoredEvent:
    return StoredEvent(uuid4(), version, get_topic(cls), orjson.dumps(state))


@pytest.mark.parametrize(
    "mapper",
    [
        PydanticMapper(OrjsonTranscoder()),
        PydanticMapper(OrjsonTranscoder(), compressor=ZlibCompressor()),
        PydanticMapper(OrjsonTranscoder(), compressor=ZlibCompressor(), cipher=XorCipher()),
    ],
    ids=["plain", "compressed", "compressed-and-encrypted"],
)
def test_every_demo_event_and_a_snapshot_survive_the_round_trip(mapper: PydanticMapper) -> None:
    events = read_events(DEMO)
    snapshot = ConversationSnapshot.take(project_conversation(None, events))
    for event in [*events, snapshot]:
        record = mapper.to_stored_event(event)
        assert (record.originator_id, record.originator_version) == (event.originator_id, event.originator_version)
        assert mapper.to_domain_event(record) == event


def test_the_cipher_hides_the_state() -> None:
    event = read_events(DEMO)[1]
    record = PydanticMapper(OrjsonTranscoder(), cipher=XorCipher()).to_stored_event(event)
    assert b"SEO optimieren" not in record.state


def test_a_stored_state_holds_neither_id_nor_version_and_version_one_has_no_class_version() -> None:
    event = read_events(DEMO)[1]
    state = orjson.loads(PydanticMapper(OrjsonTranscoder()).to_stored_event(event).state)
    assert "originator_id" not in state and "originator_version" not in state
    assert "class_version" not in state


def test_a_version_one_state_is_upcast_step_by_step() -> None:
    record = stored(Renamed, {"timestamp": T0.isoformat(), "label": "alt"})
    event = PydanticMapper(OrjsonTranscoder()).to_domain_event(record)
    assert (event.title, event.kind) == ("alt", "chat")


def test_a_version_two_state_is_upcast_once() -> None:
    record = stored(Renamed, {"timestamp": T0.isoformat(), "label": "alt", "kind": "alt_text", "class_version": 2})
    event = PydanticMapper(OrjsonTranscoder()).to_domain_event(record)
    assert (event.title, event.kind) == ("alt", "alt_text")


def test_a_current_event_stores_its_class_version_and_loads_unchanged() -> None:
    mapper = PydanticMapper(OrjsonTranscoder())
    event = Renamed(originator_id=uuid4(), originator_version=1, timestamp=T0, title="t", kind="alt_text")
    record = mapper.to_stored_event(event)
    assert orjson.loads(record.state)["class_version"] == 3
    assert mapper.to_domain_event(record) == event


def test_a_v1_conversation_started_becomes_a_chat() -> None:
    record = stored(ConversationStarted, {"timestamp": T0.isoformat(), "conversation": "old", "owner": 3})
    event = PydanticMapper(OrjsonTranscoder()).to_domain_event(record)
    assert event.kind == "chat" and event.conversation == "old"


def test_a_state_from_a_newer_class_version_is_refused() -> None:
    record = stored(Renamed, {"timestamp": T0.isoformat(), "title": "t", "kind": "chat", "class_version": 4})
    with pytest.raises(MapperDeserialisationError, match="class_version 4 is newer"):
        PydanticMapper(OrjsonTranscoder()).to_domain_event(record)


def test_bytes_that_do_not_decode_name_the_stored_event() -> None:
    record = StoredEvent(uuid4(), 7, get_topic(ConversationStarted), b"not json")
    with pytest.raises(MapperDeserialisationError, match="version 7"):
        PydanticMapper(OrjsonTranscoder()).to_domain_event(record)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(st.characters(blacklist_categories=("Cs",))),
    message=st.integers(min_value=1, max_value=2**53),
    page=st.integers(min_value=0, max_value=2**31),
    skill=st.none() | st.text(min_size=1, max_size=40),
    at=st.datetimes(timezones=st.just(UTC)),
)
def test_any_user_message_survives_the_round_trip(text, message, page, skill, at) -> None:
    event = UserMessagePosted(
        originator_id=uuid4(), originator_version=message, timestamp=at, text=text, message=message, page=page, skill=skill
    )
    mapper = PydanticMapper(OrjsonTranscoder(), compressor=ZlibCompressor())
    assert mapper.to_domain_event(mapper.to_stored_event(event)) == event


def test_a_version_two_snapshot_loads_with_the_past_moved_to_the_history_index() -> None:
    cid = uuid4()
    v2 = {
        "id": str(cid),
        "version": 9,
        "created_on": T0.isoformat(),
        "modified_on": T0.isoformat(),
        "conversation": "old",
        "kind": "chat",
        "owner": 7,
        "skill": "3:seo",
        "messages": [1, 2],
        "segments": {
            "a/1": {"version": 3, "run": "a", "message": 1, "guided": True, "waits": "card", "calls": 2},
            "b/1": {"version": 8, "run": "b", "message": 2, "guided": True, "waits": "card", "calls": 1},
        },
        "waiting": "b/1",
        "settled": ["a/1"],
        "card_outcomes": 0,
        "outcomes_of": {},
        "approval": ["a/1", 2],
        "legacy_outcomes": [],
        "legacy_users": {},
        "cut_segments": [],
        "cut_runs": [],
        "sources": ["d1", "d2"],
        "undecided": {},
    }
    record = StoredEvent(
        cid,
        9,
        get_topic(ConversationSnapshot),
        orjson.dumps({"timestamp": T0.isoformat(), "source": None, "state": v2, "class_version": 2}),
    )

    state = evolve(PydanticMapper(OrjsonTranscoder()).to_domain_event(record), None)

    assert (state.last_message, state.waiting, state.approval) == (2, "b/1", ("a/1", 2, "a"))
    assert state.waiting_info is not None and (state.waiting_info.run, state.waiting_info.calls) == ("b", 1)
    assert "sources" not in state.model_dump() and "segments" not in state.model_dump()
