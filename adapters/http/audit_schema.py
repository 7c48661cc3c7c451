"""The 200 body of `GET /v1/conversations/{id}/audit` (`adapters.http.reads`): the rows of
`chatrecord audit --json`, one model per `kind`, `verified` among them (`schemas.Response`'s
rules: every field always sent, and no other)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from adapters.http.schemas import CardAnswer, CardOutcomeName, Response, SegmentOutcome, WaitingCall
from domain.events import Trigger, UndecidedReason
from domain.values import Completeness
from projections.steps import DecisionKind, Reading

Verified = Annotated[bool, Field(description="Whether the event lies before any broken link of the hash chain.")]


class AuditCall(Response):
    tool: str
    reading: Reading = Field(
        description="How the calls were read: `ran`, `failed`, `not_permitted` (no longer "
        "offered), `held` (not run yet), `declined` (a declined card's)."
    )
    count: int = Field(description="Calls of this tool with this reading in the segment.")


class AuditWritten(Response):
    record: str = Field(description="The record written, `table:uid`.")
    completeness: Completeness
    hook_failed: bool = Field(description="Whether a hook failed after the write.")


class AuditUsage(Response):
    duration_ms: float = Field(description="The sum of its steps' durations, in ms.")
    model: str | None = Field(description="The model its line named; null: unknown.")
    provider: str | None = Field(description="The provider its line named; null: unknown.")
    model_calls: int = Field(description="Its llm steps.")
    calls_without_usage: int = Field(description="Of its model calls, those that stated no token count.")
    input_tokens: int | None = Field(description="Prompt tokens summed over the calls that stated them; null: none did.")
    output_tokens: int | None = Field(description="Completion tokens summed over the calls that stated them; null: none did.")
    total_tokens: int | None = Field(description="Total tokens summed over the calls that stated them; null: none did.")
    cost: float | None = Field(description="nr-llm's estimated cost summed over the calls that stated it; null: none did.")
    tool_calls: int = Field(description="Its tool calls.")
    failed_calls: int = Field(description="Its tool calls read failed.")
    refused_calls: int = Field(description="Its tool calls held, declined or no longer permitted.")


class AuditRowBase(Response):
    version: int = Field(description="The version of the event the row comes from (1-based).")
    at: datetime = Field(description="The event's time (UTC).")


class StartedRow(AuditRowBase):
    kind: Literal["started"]
    conversation: str
    conversation_kind: Literal["chat", "alt_text"]
    owner: int = Field(description="The user's id.")
    cut: bool
    verified: Verified


class MessageRow(AuditRowBase):
    kind: Literal["message"]
    message: int = Field(description="The user message's number.")
    page: int = Field(description="The page selected with it; 0 for none.")
    skill: str | None
    cut: bool
    verified: Verified


class SkillRow(AuditRowBase):
    kind: Literal["skill"]
    skill: str
    cut: bool
    verified: Verified


class SegmentRow(AuditRowBase):
    kind: Literal["segment"]
    segment: str
    run: str
    trigger: Trigger
    follows: DecisionKind | None = Field(description="The decision or answer the continuation follows; null for a turn.")
    outcome: SegmentOutcome
    message: int = Field(description="The newest user message when it returned.")
    calls: list[AuditCall] = Field(description="Its tool calls, by tool and reading.")
    written: list[AuditWritten] = Field(description="The records it wrote.")
    waiting: list[WaitingCall] = Field(description="The calls its card or question named.")
    flagged: bool = Field(description="Whether its answer was flagged nothingSaved.")
    usage: AuditUsage = Field(description="Its time, model calls, tokens and cost (docs/input-format.md, Steps).")
    cut: bool
    verified: Verified


class DecisionRow(AuditRowBase):
    kind: Literal["decision"]
    segment: str = Field(description="The segment whose card was decided.")
    approved: bool
    answer: CardAnswer
    cut: bool
    verified: Verified


class CardOutcomeRow(AuditRowBase):
    kind: Literal["card_outcome"]
    card: str | None = Field(description="The decided card's segment; null for a legacy row's outcome.")
    outcome: CardOutcomeName
    tool: str
    record: str | None = Field(description="The record the call names, `table:uid`; null for a create.")
    fields: list[str]
    answer: CardAnswer | None = Field(description="The editor's answer; null for a legacy row's outcome.")
    cut: bool
    verified: Verified


class AnswerRow(AuditRowBase):
    kind: Literal["answer"]
    segment: str = Field(description="The segment whose question was answered.")
    message: int = Field(description="The user message the answer became.")
    cut: bool
    verified: Verified


class UndecidedRow(AuditRowBase):
    kind: Literal["undecided"]
    segment: str
    waiting: Literal["card", "question"]
    reason: UndecidedReason
    decidable_elsewhere: bool = Field(description="Whether the run may still be decided in AI Tasks.")
    cut: bool
    verified: Verified


class RetryRow(AuditRowBase):
    kind: Literal["retry"]
    message: int
    cut: bool
    verified: Verified


class TourEndedRow(AuditRowBase):
    kind: Literal["tour_ended"]
    cut: bool
    verified: Verified


class EditRow(AuditRowBase):
    kind: Literal["edit"]
    message: int = Field(description="The user message edited.")
    cut: bool
    verified: Verified


class CutRow(AuditRowBase):
    kind: Literal["cut"]
    after_message: int = Field(description="The turns after this user message were cut away.")
    messages: list[int]
    segments: list[str]
    cards: list[str]
    cut: bool
    verified: Verified


class TranscriptReplacedRow(AuditRowBase):
    kind: Literal["transcript_replaced"]
    messages: int = Field(description="The messages of the new transcript.")
    cut: bool
    verified: Verified


class ErasedRow(AuditRowBase):
    kind: Literal["erased"]
    cut: bool
    verified: Verified


class LegacyRowRow(AuditRowBase):
    kind: Literal["legacy_row"]
    messages: int = Field(description="The messages the row brought.")
    card_outcomes: int = Field(description="The card outcomes the row brought.")
    cut: bool
    verified: Verified


AuditRow = Annotated[
    StartedRow
    | MessageRow
    | SkillRow
    | SegmentRow
    | DecisionRow
    | CardOutcomeRow
    | AnswerRow
    | UndecidedRow
    | RetryRow
    | TourEndedRow
    | EditRow
    | CutRow
    | TranscriptReplacedRow
    | ErasedRow
    | LegacyRowRow,
    Field(discriminator="kind"),
]
"""One row of the audit (`chatrecord audit --json`), by its `kind`: `version`, `at`, `kind`, the
kind's facts, `cut`, `verified`, in this order."""
