"""Run record entries and card outcomes decoded once per stored body, and their notes rendered
once per page check, kept per process.

A turn read after an append reads the same kept entries and card outcomes as the read before
it, plus the one or two the append wrote. Decoding each body (pydantic) and rendering each
note made that read cost grow with the number of notes (10 at 10 segments, the budget's ~31
at 10,000). `RenderedNotes` keeps the decoded item per body, so an unchanged body decodes to
the very object decoded before, and keeps each item's note per page check
(`projections.page_line.check_key`), so only the new items are decoded and rendered. A note is
a function of its item and the page check alone (`projections.notes.note_of`), so a kept note
is the one that would be rendered again. Bodies are the rows' own JSON; notes hold labels,
never a text.

`KeptMessages` does the same for the transcript messages a turn read places its notes beside
(`adapters.views.rows.SQLRows.placement_reads`): about two per note, of which an append changes
one or two, so a read decodes (and opens, where texts are sealed) only those. A kept message
holds its text: it is handed out only while the conversation's data key still opens its sealed
body (`adapters.store.crypto.ViewTexts.readable`), and an erasure in this process drops them all.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from eventsourcing.application import LRUCache

from projections.card_outcomes import CardOutcome
from projections.notes import Note, NoteOf, note_of
from projections.page_line import PageCheck
from projections.run_record import Entry
from projections.transcript import Message

BODIES = 16384
"""Decoded bodies kept (entries and card outcomes together; about 1 KB each)."""
MESSAGES = 2048
"""Decoded transcript messages kept (a 40-note read places its notes beside about 60)."""
MESSAGE_BODY = 4096
"""Characters of the longest row body whose message is kept (a longer one is decoded each time),
so the kept messages take at most about MESSAGES * 3 * MESSAGE_BODY bytes."""


class RenderedNotes:
    """Decoded entries and card outcomes by body, and their notes by (item, page check)."""

    def __init__(self, size: int = BODIES) -> None:
        self._decoded: LRUCache[tuple[str, str], Any] = LRUCache(maxsize=size)
        self._notes: LRUCache[tuple[int, Hashable], tuple[Any, Note]] = LRUCache(maxsize=size)

    def entry(self, body: str) -> Entry:
        """Returns the run record entry stored as `body` (JSON); the same object for the same body."""
        return self._decode("entry", body, Entry.model_validate_json)

    def outcome(self, body: str) -> CardOutcome:
        """Returns the card outcome stored as `body` (JSON); the same object for the same body."""
        return self._decode("outcome", body, CardOutcome.model_validate_json)

    def _decode(self, kind: str, body: str, decode: Any) -> Any:
        try:
            return self._decoded.get((kind, body))
        except KeyError:
            item = decode(body)
            self._decoded.put((kind, body), item)
            return item

    def note(self, check: Hashable) -> NoteOf:
        """Returns a `NoteOf` for page check key `check` that renders each item once: an item
        decoded here gets the note rendered for it before under the same check."""

        def rendered(item: Entry | CardOutcome, can_see_page: PageCheck) -> Note:
            key = (id(item), check)
            try:
                kept, note = self._notes.get(key)
                if kept is item:  # not another object that took a dropped one's id
                    return note
            except KeyError:
                pass
            note = note_of(item, can_see_page)
            self._notes.put(key, (item, note))
            return note

        return rendered


class KeptMessages:
    """Transcript messages decoded from their row bodies, by (conversation, body): a sealed body
    holds a fresh nonce, so one body is one text. The library's `LRUCache` keeps at most `size`."""

    def __init__(self, size: int = MESSAGES) -> None:
        self.size = size
        self._kept: LRUCache[tuple[str, str], Message] = LRUCache(maxsize=size)

    def get(self, conversation: str, body: str) -> Message | None:
        """Returns the message decoded from `body` of `conversation`'s rows, None if not kept."""
        try:
            return self._kept.get((conversation, body))
        except KeyError:
            return None

    def put(self, conversation: str, body: str, message: Message) -> None:
        """Keeps `message`, decoded from `body`, unless the body is longer than MESSAGE_BODY."""
        if len(body) <= MESSAGE_BODY:
            self._kept.put((conversation, body), message)

    def clear(self) -> None:
        """Forgets every kept message (after an erasure in this process)."""
        self._kept = LRUCache(maxsize=self.size)  # the library's clear() only resets its links
