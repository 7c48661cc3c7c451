"""Where a turn, a segment or an event is on the timeline page: the page that shows it (the
`before` of `adapters.service.timeline.timeline_page`: the newest page when its turn is among
the newest `PAGE_TURNS`, else the page whose newest turn it is) and its anchor there.

`locate` reads the stored events forward in chunks of `CHUNK`, each one's topic and its state's
plain keys only (`PydanticMapper.stored_state`: no text is opened, no event validated), and stops
once `PAGE_TURNS` turns started after what it looks for; only a user message's number reads the
log to its end (an edit may post the number again, and the last one is the one the page shows).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from eventsourcing.utils import get_topic

from adapters.service.timeline import PAGE_TURNS
from adapters.store.application import ConversationStore
from domain.errors import ChatrecordError
from domain.events import SegmentReturned, TurnRetried, UserMessagePosted, conversation_uuid

MESSAGE, RETRY, SEGMENT = get_topic(UserMessagePosted), get_topic(TurnRetried), get_topic(SegmentReturned)

CHUNK = 1000
"""Events read per step."""
_EVENT = re.compile(r"(?:e|event)\s*(\d+)", re.IGNORECASE)
_MESSAGE = re.compile(r"(?:m|message|user message)?\s*#?\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Location:
    """Where the jump goes: the page that ends before version `before` (None: the newest
    page) and the `anchor` there (`message-N` for a user message, `e-V` for a row)."""

    before: int | None
    anchor: str
    version: int


class NotOnTimeline(ChatrecordError):
    """Raised when no user message, segment or event answers what a jump asked for."""


def _target(topic: str, version: int, state: Callable[[], dict[str, Any]], to: str) -> str | None:
    """Returns the anchor of the event of `topic` at `version` when it is what `to` asks for,
    else None; `state()` reads its stored state (only where its topic can answer)."""
    if (found := _EVENT.fullmatch(to)) is not None:
        if int(found.group(1)) != version:
            return None
        return f"message-{state()['message']}" if topic == MESSAGE else f"e-{version}"
    if (found := _MESSAGE.fullmatch(to)) is not None:
        return f"message-{found.group(1)}" if topic == MESSAGE and state()["message"] == int(found.group(1)) else None
    if topic == SEGMENT and state()["segment"] == to:
        return f"e-{version}"
    return None


def locate(store: ConversationStore, key: str, to: str) -> Location:
    """Returns where `to` is on the timeline of conversation `key` (stored id): `to` is a
    user message's number (`3`, `message 3`), an event's version (`e12`, `event 12`) or a
    segment's id. Raises NotOnTimeline naming what was asked for."""
    to = to.strip()
    uuid = conversation_uuid(key)
    mapper = store.mapper
    whole = _EVENT.fullmatch(to) is None and _MESSAGE.fullmatch(to) is not None
    found: Location | None = None
    next_start, later, last = None, 0, 0  # the first turn start after it, and how many started since
    while True:
        chunk = store.recorder.select_events(uuid, gt=last, limit=CHUNK)
        for stored in chunk:
            version = stored.originator_version
            anchor = _target(stored.topic, version, partial(mapper.stored_state, stored), to)
            if anchor is not None:
                found, next_start, later = Location(None, anchor, version), None, 0
            elif found is not None and stored.topic in (MESSAGE, RETRY):
                next_start = next_start or version
                later += 1
                if later >= PAGE_TURNS and not whole:
                    return Location(next_start, found.anchor, found.version)
        if len(chunk) < CHUNK:
            break
        last = chunk[-1].originator_version
    if found is None:
        raise NotOnTimeline(f"no user message, segment or event {to[:80]!r} in this conversation")
    return Location(next_start if later >= PAGE_TURNS else None, found.anchor, found.version)
