"""The Python API the chat uses: record what happened, ask what the next model call is sent.

    from adapters.api import Chatrecord

    record = Chatrecord()                          # the store the environment configures
    record.record({"type": "user_message", ...})   # one line of the chat's input (docs/spec-map.md, D7)
    turn = record.turn_input("conv-demo-seo", can_see_page=lambda page: page != 13)
    turn.model_messages()                          # [{"role": "system", "content": ...}, ...]

Thin, as the CLI is: `record` parses one line with the ingester and hands it to the store;
`turn_input` reads the materialised projections after they caught up with the conversation's
last event, so a turn never reads a record older than its own log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from adapters.application import ConversationStore, HandleResult
from adapters.chain_verify import Verdict, verdicts
from adapters.erasure import Erasure, erase
from adapters.ingest import line_text, parse_line
from adapters.ingest_names import lookup_key
from adapters.readmodels import ReadModels
from adapters.settings import open_store
from domain.errors import UnknownConversation
from projections import activity
from projections.activity import SegmentActivity
from projections.page_line import PageCheck, every_page
from projections.turn import TurnInput
from projections.turn_notes import TurnNotes


class Chatrecord:
    """A conversation store with its read models: what the chat records and asks.

    `store` defaults to `adapters.settings.open_store()` (SQLite `CHATRECORD_DB`, or PostgreSQL
    when `CHATRECORD_DATABASE_URL` is set).
    """

    def __init__(self, store: ConversationStore | None = None, source_name: str = "api") -> None:
        self.store = store if store is not None else open_store()
        self.read_models = ReadModels(self.store)
        self.source_name = source_name
        self._lines = 0

    def record(self, line: Mapping[str, Any] | str | bytes) -> HandleResult:
        """Stores one input line (a dict, or its JSON text) and returns what was appended; a line
        recorded before appends nothing and returns the first result (`HandleResult.repeated`).

        Raises InvalidInput (naming `source_name`, the call's number and the field) for a line
        of the wrong shape, or the domain's ChatrecordError when the conversation refuses it;
        nothing of a refused line is stored.
        """
        if not isinstance(line, (Mapping, str, bytes)):
            raise TypeError(f"record takes one line as a dict or its JSON text, not {type(line).__name__}")
        self._lines += 1
        text = line_text(line, self._lines, self.source_name) if isinstance(line, Mapping) else line
        return self.store.handle(parse_line(text, self._lines, self.source_name))

    def activity(self, conversation: str, rules: str | None = None) -> tuple[SegmentActivity, ...]:
        """Returns the activity list the chat shows the editor, segment by segment (German labels
        of the amendment's table: "noch nicht ausgeführt", "nicht ausgeführt: nicht mehr
        freigegeben", "fehlgeschlagen", "Von dir abgelehnt: Behalten", …), read from the log under
        `rules` (default: the live rule set) with the same step reading as the run record.

        Raises UnknownConversation for an id the store does not hold. An id is looked up as the
        ingester stored it (`chat 17` reduced the same way).
        """
        events = self.store.events(lookup_key(conversation))
        if not events:
            raise UnknownConversation(f'no conversation "{conversation}" in the store')
        rule_set = rules or self.read_models.active_rules()
        state = activity.initial()
        for event in events:
            state = activity.apply(state, event, rule_set)
        return state.segments

    def turn_notes(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnNotes:
        """Returns what the chat adds to the transcript it holds for the next model call: the
        system message's page line and each note with its place (`TurnNotes.to_json()`:
        `{"conversation", "rules", "version", "page_line", "notes": [{"text", "index", "into",
        "at"}]}`; `projections.turn_notes.apply_notes` shows how they go in). Reads a bounded few
        rows: its cost does not grow with the conversation's history.

        Raises UnknownConversation for an id the store does not hold.
        """
        return self.read_models.turn_notes(conversation, can_see_page)

    def turn_input(self, conversation: str, can_see_page: PageCheck = every_page) -> TurnInput:
        """Returns the input of the conversation's latest turn under the live rule set: the system
        message's page line, the transcript with the notes placed, the read models it saw.

        Raises UnknownConversation for an id the store does not hold, NoTurnYet when no
        user message has started a turn yet.
        """
        return self.read_models.turn_input(lookup_key(conversation), can_see_page)

    def verify(self, conversation: str | None = None) -> list[Verdict]:
        """Returns the verdict of each conversation's hash chain (only `conversation`'s if
        given), in the order of their ids: ok with the head, or the first broken link.

        Raises NoChain for a store that keeps no chain."""
        return list(verdicts(self.store, lookup_key(conversation) if conversation is not None else None))

    def erase(self, conversation: str) -> Erasure:
        """Erases the conversation's free texts (deletes its data key) and scrubs its read
        models; idempotent. Raises UnknownConversation for an id the store does not hold."""
        return erase(self.store, lookup_key(conversation), self.read_models)
