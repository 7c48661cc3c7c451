"""How events are turned into stored bytes and back: pydantic models as orjson.

Modelled on eventsourcing's `examples/aggregate7/orjsonpydantic.py`, plus upcasting. A state stores
`class_version` when above 1; on load it is upcast step by step, then validated. `originator_id` and
`originator_version` stay in their columns. The state bytes pass the optional compressor and cipher
(`COMPRESSOR_TOPIC`, `CIPHER_TOPIC`, `CIPHER_KEY`). With data keys (`keys`), free texts are
encrypted per conversation (`adapters.store.crypto`)."""

from __future__ import annotations

from typing import Any, cast
from uuid import UUID

import orjson
from cryptography.exceptions import InvalidTag
from eventsourcing.persistence import (
    Cipher,
    Compressor,
    Mapper,
    MapperDeserialisationError,
    StoredEvent,
    Transcoder,
)
from eventsourcing.utils import get_topic, resolve_topic
from pydantic import BaseModel, ValidationError

from adapters.store.crypto import KeySource, open_texts, seal_texts
from domain.errors import ChatrecordError


class UnreadableEvent(ChatrecordError, MapperDeserialisationError):
    """Raised when a stored event cannot be read back. Its bytes or a text were changed, events were
    swapped, or a newer chatrecord wrote it. The message names the topic, conversation UUID and
    version, never a stored value."""

    def __init__(self, message: str, originator_id: Any = None, version: int | None = None) -> None:
        super().__init__(message)
        self.originator_id = originator_id
        self.version = version


def unreadable(stored_event: StoredEvent | None, problem: str) -> UnreadableEvent:
    """Returns the UnreadableEvent of `stored_event` for `problem`."""
    if stored_event is None:
        return UnreadableEvent(_describe(stored_event, problem))
    return UnreadableEvent(
        _describe(stored_event, problem) + "; run: chatrecord verify", stored_event.originator_id, stored_event.originator_version
    )


class PydanticMapper(Mapper[UUID]):
    """Maps pydantic domain events to stored events and back, upcasting old states. With `keys`, free
    texts are stored encrypted."""

    def __init__(
        self,
        transcoder: Transcoder,
        compressor: Compressor | None = None,
        cipher: Cipher | None = None,
        *,
        keys: KeySource | None = None,
    ) -> None:
        super().__init__(transcoder, compressor, cipher)
        self.keys = keys
        """The data keys that seal the free texts (`adapters.store.keys.DataKeys`); None: stored as they are."""

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        """Returns the stored event for `domain_event`, a pydantic model."""
        event = cast(BaseModel, domain_event)
        state = event.model_dump(mode="json")
        state.pop("originator_id", None)
        state.pop("originator_version", None)
        class_version = getattr(type(event), "class_version", 1)
        if class_version > 1:
            state["class_version"] = class_version
        if self.keys is not None:
            seal_texts(type(event), state, domain_event.originator_id, domain_event.originator_version, self.keys)
        stored_state = self.transcoder.encode(state)
        if self.compressor:
            stored_state = self.compressor.compress(stored_state)
        if self.cipher:
            stored_state = self.cipher.encrypt(stored_state)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=get_topic(type(event)),
            state=stored_state,
        )

    def stored_state(self, stored_event: StoredEvent) -> dict[str, Any]:
        """Returns the state of `stored_event` as stored, decoded but neither opened (its free
        texts stay sealed), upcast nor validated: for a scan that reads only a few plain keys.
        Raises MapperDeserialisationError when the bytes cannot be decoded."""
        stored_state = stored_event.state
        try:
            if self.cipher:
                stored_state = self.cipher.decrypt(stored_state)
            if self.compressor:
                stored_state = self.compressor.decompress(stored_state)
            state: dict[str, Any] = self.transcoder.decode(stored_state)
        except Exception as e:
            raise unreadable(stored_event, str(e)) from e
        return state

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        """Returns the domain event of `stored_event`, upcast to its class's current version. Raises
        MapperDeserialisationError when the bytes cannot be decoded or the state is newer than this
        code."""
        try:
            cls = resolve_topic(stored_event.topic)
        except Exception as e:  # the library's TopicError, or an import's
            raise unreadable(stored_event, "no event class of this name") from e
        state = self.stored_state(stored_event)
        try:
            open_texts(cls, state, originator_uuid(stored_event.originator_id), stored_event.originator_version, self.keys)
        except (InvalidTag, ValueError) as e:
            raise unreadable(stored_event, f"an encrypted text was changed ({e!r})") from e
        upcast(cls, state, stored_event)
        state["originator_id"] = stored_event.originator_id
        state["originator_version"] = stored_event.originator_version
        try:
            return cls.model_validate(state)
        except ValidationError as e:  # the fields' places and kinds of error, never their values
            problems = "; ".join(
                f"{'.'.join(map(str, error['loc'])) or '(event)'}: {error['type']}"
                for error in e.errors(include_input=False, include_url=False)[:3]
            )
            raise unreadable(stored_event, f"its fields are not those of {cls.__name__} ({problems})") from None


def upcast(cls: type, state: dict[str, Any], stored_event: StoredEvent | None = None) -> None:
    """Upcasts `state` in place from its `class_version` (1 when absent) to `cls`'s, and removes
    `class_version`. Raises MapperDeserialisationError when the state is newer than `cls` or a step
    is missing."""
    current = getattr(cls, "class_version", 1)
    version = state.pop("class_version", 1)
    if version > current:
        raise unreadable(
            stored_event,
            f"stored class_version {version} is newer than {cls.__name__} ({current}): a newer version of chatrecord wrote it",
        )
    while version < current:
        step = getattr(cls, f"upcast_v{version}_v{version + 1}", None)
        if step is None:
            raise unreadable(stored_event, f"{cls.__name__} has no upcast_v{version}_v{version + 1}")
        step(state)
        version += 1


def originator_uuid(originator_id: Any) -> UUID:
    """Returns a stored event's originator id as a UUID (the recorders give UUID or str)."""
    return originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))


def _describe(stored_event: StoredEvent | None, problem: str) -> str:
    if stored_event is None:
        return problem
    return (
        f"cannot load stored event {stored_event.topic!r} of {stored_event.originator_id} "
        f"version {stored_event.originator_version}: {problem}"
    )


class OrjsonTranscoder(Transcoder):
    """Encodes JSON-ready values as compact UTF-8 JSON bytes with orjson."""

    def encode(self, obj: Any) -> bytes:
        """Returns `obj` as JSON bytes."""
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        """Returns the value the JSON bytes `data` hold."""
        return orjson.loads(data)


SERIALIZATION_ENV: dict[str, str] = {
    "TRANSCODER_TOPIC": get_topic(OrjsonTranscoder),
    "MAPPER_TOPIC": get_topic(PydanticMapper),
}
"""The env keys that switch an Application to this module's transcoder and mapper."""
