"""The shapes of the HTTP service's bodies, for the OpenAPI document (`docs/openapi.json`)
the PHP side generates its client from. The handlers write the JSON themselves (orjson); these
models only describe it. The 200 bodies of the conversation's reads (`Response` and its
subclasses: `ConversationList`, `TurnNotes`, `AuditRow`, `SegmentActivity`, `Replay`) name
every field the handlers send and no other; tests/http/test_response_models.py validates real
answers strictly against them and checks they write them back byte for byte."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from adapters.api import CURSOR_PATTERN, STATUSES
from domain.events import Trigger, UndecidedReason
from domain.values import CARD_ANSWERS, OUTCOMES, Completeness
from projections.rules import RULE_SET_IDS
from projections.steps import Reading


class Full(StrEnum):
    full = "full"


class EventRef(BaseModel):
    type: str = Field(description="The event's class, e.g. SegmentReturned.")
    version: int = Field(description="The event's version in its conversation (1-based).")


class LineResult(BaseModel):
    line: int = Field(description="1-based number of the line in the request (blank lines are not listed).")
    appended: int = Field(description="Events the line appended; 0 for a line recorded before.")
    repeated: bool


class Recorded(BaseModel):
    """What `POST /v1/lines` stored."""

    conversation: str
    version: int = Field(
        description="The conversation's version afterwards (also the ETag): the number of events it holds, "
        "0 before its first line."
    )
    appended: int = Field(description="Events appended by the request.")
    repeated: bool = Field(description="True when every line was recorded before; nothing was appended.")
    events: list[EventRef] = Field(description="The events appended; for one repeated line, those that recorded it first.")
    lines: list[LineResult]


class Response(BaseModel):
    """Base of the 200 bodies of the conversation's reads: every field is always sent (null
    where it says so) and no other; `tests/http/test_response_models.py` validates real answers
    against these models, so the document cannot drift from what the handlers write."""

    model_config = ConfigDict(extra="forbid")


Role = Literal["system", "user", "assistant"]
SegmentOutcome = Literal[(*OUTCOMES, "unknown")]  # type: ignore[valid-type]
"""nr-llm's `AgentRunOutcome`, or `unknown` for any other value (docs/input-format.md)."""
CardAnswer = Literal[CARD_ANSWERS]  # type: ignore[valid-type]
"""The answers an editor gives on a card."""
CardOutcomeName = Literal["applied", "check", "not_applied", "skipped", "variant", "kept", "declined"]
"""A card outcome: `applied`, `check`, `not_applied` (an approval's), `kept`, `skipped`,
`variant` (a decline's), `declined` (a legacy row's)."""
RuleSetId = Literal[RULE_SET_IDS]  # type: ignore[valid-type]
ListStatus = Literal[STATUSES]  # type: ignore[valid-type]
"""A status of the list (`list --status`): failed, waiting, undecided, erased, and the chain's broken, verified, unchecked."""


class ModelMessage(Response):
    role: Role
    content: str


class PlacedNote(Response):
    text: str = Field(description="The labelled note, exactly as the model reads it.")
    index: int = Field(description="0-based index into the transcript the chat holds (no system message).")
    into: Literal["assistant", "user", "new"] = Field(
        description="Joins the assistant or user message at `index`, or `new`: an assistant message of its own "
        "inserted before the message at `index`."
    )
    at: int | None = Field(
        description="For `assistant`: the offset in that message's text where the note goes, after a blank line, "
        "in Unicode code points (a Python str index; PHP: mb_substr with UTF-8); null otherwise."
    )
    at_byte: int | None = Field(
        description="For `assistant`: the same offset in UTF-8 bytes of the text (PHP: substr); null otherwise."
    )


def _absent_unless_sent(schema: dict[str, Any]) -> None:
    """Drops the `default` of a field the server leaves out rather than sending null."""
    schema.pop("default", None)


class TurnNotes(Response):
    """The chat's read of the next turn."""

    conversation: str
    rules: str
    version: int
    page_line: str = Field(description="The system message's text.")
    notes: list[PlacedNote]
    messages: list[ModelMessage] = Field(
        None,  # type: ignore[arg-type]
        description="Only with ?messages=full (else absent): every message the model is sent, {role, content}.",
        json_schema_extra=_absent_unless_sent,
    )


# ---------------------------------------------------------------- GET /v1/conversations


class ConversationSummary(Response):
    """One conversation of the list (`chatrecord list --json`)."""

    conversation: str = Field(description="Its id as the store keeps it; every read accepts it.")
    kind: Literal["chat", "alt_text"]
    messages: int = Field(
        description="How many user messages it has (those no edit cut; 0 before the first), whatever their numbers."
    )
    segments: int = Field(description="Segments recorded and not cut by an edit.")
    events: int = Field(description="The events of its log: its version.")
    first_at: datetime = Field(description="The time (UTC) of its first event.")
    last_at: datetime = Field(description="The time (UTC) of its last event.")
    erased: bool = Field(description="Whether its texts were erased.")
    owner: int | None = Field(description="The user id of its owner; null where an earlier version's list row keeps none.")
    status: list[ListStatus] = Field(
        description="What it has: failed (a segment recorded failed), waiting (a card or question waits), undecided "
        "(one was left undecided), erased (its erasure recorded), broken (a break of its chain is stored)."
    )


class ConversationList(Response):
    """A page of the store's conversations, newest activity first."""

    conversations: list[ConversationSummary]
    next_cursor: Annotated[str, Field(pattern=CURSOR_PATTERN)] | None = Field(
        description="Pass it as `cursor` for the next page; null after the last one."
    )


# ---------------------------------------------------------------- GET …/audit (`audit_schema`)


class WaitingCall(Response):
    """A call left waiting for the editor's decision."""

    tool: str
    record: str | None = Field(description="The record it names, `table:uid`; null for a create.")
    fields: list[str] = Field(description="The field names it names.")


# ---------------------------------------------------------------- GET …/activity


class ActivityEntry(Response):
    """One line the editor reads."""

    kind: Literal["decision", "answer", "tool"]
    label: str = Field(description="The German label, e.g. `ausgeführt`, `Von dir freigegeben: Übernehmen`.")
    tool: str | None = Field(description="The call's tool; null for a decision or an answer.")
    reading: Reading | None = Field(description="How the call was read; null for a decision or an answer.")
    answer: CardAnswer | None = Field(description="The editor's answer, for a decision.")
    hint: str | None = Field(description="A hint shown with the label, e.g. to ask an administrator.")


class SegmentActivity(Response):
    """The activity of one segment: the decision or answer it continues, then one entry a call."""

    segment: str
    entries: list[ActivityEntry]


# ---------------------------------------------------------------- GET …/replay


class ViewContext(Response):
    pageId: int = Field(description="The page of the turn; 0 when none is selected.")
    lastPageId: int = Field(description="The page last selected in the conversation; 0 when none was yet.")


class ToolCount(Response):
    name: str
    calls: int
    failed: int


class Written(Response):
    record: str = Field(description="The record written, `table:uid`.")
    completeness: Completeness


class RunRecordEntry(Response):
    """One run segment's entry in the run record, as that turn saw it."""

    segment: str
    trigger: Trigger
    ending: SegmentOutcome
    tools: list[ToolCount]
    written: list[Written]
    waiting: list[WaitingCall] = Field(description="The calls still waiting for a decision.")
    decision: CardAnswer | None = Field(description="The editor's answer, where no card outcome says it.")
    undecided: UndecidedReason | None = Field(description="Why its card or question was left undecided.")
    card_outcomes_before: int


class CardOutcome(Response):
    outcome: CardOutcomeName
    tool: str
    record: str | None = Field(description="The record the call names, `table:uid`; null for a create.")
    fields: list[str]
    after: int = Field(description="The transcript position the outcome comes after.")


class ReplayTurn(Response):
    """One turn: the model input as it was then, and the read models it was made from."""

    message: int = Field(description="The user message that started it.")
    at: datetime
    view_context: ViewContext
    messages: list[ModelMessage] = Field(description="Every message the model was sent, the system message first.")
    notes: list[str] = Field(description="The notes, in order of appearance.")
    record: list[RunRecordEntry]
    card_outcomes: list[CardOutcome]


class Replay(Response):
    """Every turn of the conversation (`chatrecord replay --json`)."""

    conversation: str
    rules: RuleSetId
    turns: list[ReplayTurn]


class Health(BaseModel):
    status: Literal["ok"]
    position: int = Field(description="The position of the newest stored event.")
