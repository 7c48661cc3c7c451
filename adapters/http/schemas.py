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

from adapters.api import CURSOR_PATTERN, REPLAY_CURSOR_PATTERN, STATUSES, USAGE_CURSOR_PATTERN
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


# ---------------------------------------------------------------- GET /v1/usage


class Usage(Response):
    """What some segments used: a group of the usage audit, or the range's total (`key` null). A
    token or cost sum no model call stated is null (unknown, never 0); `calls_without_usage` and
    `calls_without_cost` say how many of the sum's model calls stated none."""

    key: str | int | None = Field(
        description="The group: the conversation's stored id (by conversation), the owner's user id or null for "
        "an unknown owner (by owner), the UTC day YYYY-MM-DD (by day); null for the total."
    )
    segments: int = Field(description="Segments summed (an edit's cut ones too: they ran).")
    duration_ms: float = Field(description="Their time: the sum of their steps' durations, in milliseconds.")
    model_calls: int = Field(description="Model calls (`llm` steps).")
    calls_without_usage: int = Field(description="Model calls that stated no token count.")
    calls_without_cost: int = Field(description="Model calls that stated no estimated cost.")
    input_tokens: int | None = Field(description="Prompt tokens; null where no call stated any.")
    output_tokens: int | None = Field(description="Completion tokens; null where no call stated any.")
    total_tokens: int | None = Field(description="Total tokens as the calls stated them; null where none did.")
    cost: float | None = Field(description="Estimated cost in nr-llm's currency unit; null where no call stated any.")
    tool_calls: int = Field(description="Tool calls, as read under the live rule set.")
    failed_calls: int = Field(description="Tool calls read as failed.")
    refused_calls: int = Field(description="Tool calls held, declined or no longer permitted.")
    first_at: datetime | None = Field(description="The chat's time (UTC) of the first segment summed; null for none.")
    last_at: datetime | None = Field(description="The chat's time (UTC) of the last segment summed; null for none.")


class UsageReport(Response):
    """A page of the usage audit (`chatrecord usage --json`): the range's total and a page of its groups."""

    by: Literal["conversation", "owner", "day"] = Field(
        description="The grouping: conversations ascending by id, owners ascending (unknown first), days newest first."
    )
    since: datetime | None = Field(description="Only segments at or after this time (the chat's); null: from the start.")
    until: datetime | None = Field(description="Only segments before this time; null: to the end.")
    total: Usage = Field(
        description="The sums over every segment of the range (every group, not only this page's); its key is null."
    )
    groups: list[Usage]
    next_cursor: Annotated[str, Field(pattern=USAGE_CURSOR_PATTERN)] | None = Field(
        description="Pass it as `cursor` (with the same `since` and `until`; it carries `by`) for the next page; null after the last one."
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


ReplayCursor = Annotated[str, Field(pattern=REPLAY_CURSOR_PATTERN)] | None


class Replay(Response):
    """A page of the conversation's turns, each whole (`chatrecord replay --json`)."""

    conversation: str
    rules: RuleSetId
    turns: list[ReplayTurn]
    next_cursor: ReplayCursor = Field(
        None,
        description="Pass it as `cursor` for the next page; null after the last one. Absent with `at=N` (one turn, no page).",
        json_schema_extra=_absent_unless_sent,
    )


NOTE_POSITION = "Its position among the turn's notes, in order of appearance (0-based)."


class AddedNote(Response):
    """A note the turn before did not send (its place as a `PlacedNote`'s)."""

    text: str
    index: int
    into: Literal["assistant", "user", "new"]
    at: int | None
    at_byte: int | None
    n: int = Field(description=NOTE_POSITION)


class MovedNote(Response):
    """A note the turn before sent at another place (its place now as a `PlacedNote`'s)."""

    text: str
    index: int
    into: Literal["assistant", "user", "new"]
    at: int | None
    at_byte: int | None
    n: int = Field(description=NOTE_POSITION)
    was: int = Field(description="Its position among the turn before's notes (0-based).")


class DroppedNote(Response):
    """A note of the turn before that this turn does not send."""

    n: int = Field(description="Its position among the turn before's notes (0-based).")
    text: str


class NotesChanges(Response):
    """The notes that changed since the turn before; its other notes keep their order and fill
    the positions left."""

    added: list[AddedNote]
    moved: list[MovedNote]
    dropped: list[DroppedNote]


class RecordChanges(Response):
    """The run record's entries that changed since the turn before."""

    dropped: list[str] = Field(description="The segments whose entries left the record.")
    changed: list[RunRecordEntry] = Field(description="The entries new or different, each whole (a new one goes at the end).")


class CardOutcomeChanges(Response):
    kept: int = Field(description="The turn before's first `kept` card outcomes are this turn's first.")
    appended: list[CardOutcome]


class TurnChanges(Response):
    """One turn as what changed since the turn before (`chatrecord replay --changes`); the
    first turn's are counted from nothing."""

    message: int = Field(description="The user message that started it.")
    at: datetime
    view_context: ViewContext
    page_line: str | None = Field(description="The system message's text; null when it is the turn before's.")
    kept: int = Field(description="The transcript (no system message, no notes) keeps the turn before's first `kept` messages.")
    appended: list[ModelMessage] = Field(description="Then these messages follow.")
    notes: NotesChanges
    record: RecordChanges
    card_outcomes: CardOutcomeChanges


class ReplayChanges(Response):
    """A page of the conversation's turns, each as what changed since the turn before."""

    conversation: str
    rules: RuleSetId
    turns: list[TurnChanges]
    next_cursor: ReplayCursor = Field(description="Pass it as `cursor` for the next page; null after the last one.")


class Health(BaseModel):
    status: Literal["ok"]
    position: int = Field(description="The position of the newest stored event.")


class ReproductionRequest(BaseModel):
    """What `POST /v1/conversations/{id}/reproductions` sends to the model (`chatrecord reproduce`)."""

    model_config = ConfigDict(extra="forbid")

    turn: int | None = Field(default=None, ge=1, description="The turn of user message N (default: the latest).")
    rules: list[RuleSetId] | None = Field(
        default=None,
        min_length=1,
        max_length=3,
        description="The rule sets the input is built under (default: transcript-only and the store's).",
    )
    n: int = Field(default=5, ge=1, le=100, description="Answers asked for under each rule set.")
    judge_model: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="A model on the same endpoint that judges each answer (default: the rules only).",
    )


class JudgeVerdict(Response):
    denies: bool = Field(description="The answer denies a save the run record shows.")
    names_writes: bool = Field(description="The answer names a written record or field.")
    rubric: str = Field(description="The version of the rubric the verdict was read under.")
    judge: str = Field(description='"rules", or the judging model.')
    reason: str = Field(description="The rule that matched and the record or field named; never the answer's words.")


class ReproducedAnswer(Response):
    seq: int = Field(description="The answer's place in its reproduction's stream (from 1).")
    at: str = Field(description="When it came back (ISO-8601, UTC).")
    text: str = Field(description="The answer's text; [erased] once the conversation was erased.")
    latency_ms: int
    usage: dict[str, Any] = Field(description="The token counts the endpoint reported.")
    finish_reason: str | None
    verdict: JudgeVerdict = Field(description="The rule-based judge's verdict.")
    judged: JudgeVerdict | None = Field(description="The judging model's verdict, where one was asked; it is the one counted.")


class WrittenFacts(Response):
    records: list[str] = Field(description="The records the run record shows written (table:uid).")
    fields: list[str] = Field(description="The fields of the applied card outcomes.")


class Reproduction(Response):
    """One reproduction: a turn sent to a model again under one rule set, with its answers."""

    id: str
    conversation: str
    rules: RuleSetId
    message: int = Field(description="The user message whose turn was sent.")
    log_version: int = Field(description="The conversation's version the input was built from.")
    model: str
    url: str = Field(description="The endpoint the answers came from.")
    parameters: dict[str, Any]
    input_sha256: str = Field(description="The sha256 of the messages sent, as replay's JSON writes them.")
    started_at: str
    writes: WrittenFacts
    answers: list[ReproducedAnswer]
    denials: int
    naming_writes: int
    cut_off: int = Field(
        description='Answers the endpoint stopped at its token limit (finish_reason "length"), counted as they came.'
    )
    chain_ok: bool = Field(description="Whether the reproduction's hash chain holds.")


class ReproductionRow(Response):
    rules: RuleSetId
    message: int
    answers: int
    denials: int = Field(description="Answers that deny the saves.")
    naming_writes: int = Field(description="Answers that name the writes.")
    cut_off: int = Field(
        description='Answers the endpoint stopped at its token limit (finish_reason "length"), counted as they came.'
    )


class ReproductionReport(Response):
    """What a run of `chatrecord reproduce --json` prints: the table per rule set, the count in
    the spec's form, and the reproductions it recorded."""

    conversation: str
    rubric: str
    table: list[ReproductionRow]
    summary: str = Field(description='E.g. "2 of 5 answers deny the saves under transcript-only; 0 of 5 under 2026-11-02".')
    reproductions: list[Reproduction]
