"""The chat's JSON Lines, one pydantic model per line type (docs/spec-map.md, D7).

Every line has `type`, `conversation` (an id) and `at` (ISO-8601, made aware UTC). Unknown keys are
ignored. A known key of the wrong type fails (strict: no "42" for 42). Each model's `facts()` are
its command's arguments; nothing else is stored or hashed. Steps are filtered in `step_models`;
identifiers are reduced in `names`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator

from adapters.ingest.names import (
    At,
    InputModel,
    MessageNo,
    ModelName,
    Provider,
    ReducedId,
    Skill,
    Text,
    Whole,
    check_answer,
    drop_null,
    show,
)
from adapters.ingest.step_models import InputMessage, LegacyOutcome, Pending, Step, check_segment_sums
from domain.limits import LIST_MAX, STEPS_MAX
from domain.values import CARD_ANSWERS, OUTCOMES


class Line(InputModel):
    """Base of every line: `type`, `conversation` (an id) and `at` (aware, UTC). After parsing: `.line`
    (1-based), `.source_name` and `.digest` (32 hex of its facts' sha256)."""

    __slots__ = ("_line", "_source_name", "_digest", "_facts")
    # What `parse_line` adds to a validated line: plain slots, unset until set, not pydantic's
    # private attributes, which validation fills with their defaults for every line (docs/benchmarks.md).

    type: str  # each line type narrows it to its Literal name (the union's discriminator)
    conversation: ReducedId
    at: At
    follows: Whole | None = None

    @property
    def line(self) -> int:
        return getattr(self, "_line", 0)

    @property
    def source_name(self) -> str:
        return getattr(self, "_source_name", "")

    @property
    def digest(self) -> str:
        return getattr(self, "_digest", "")

    def facts(self) -> dict[str, Any]:
        """Returns the arguments of the line's domain command, less `at` and `source`."""
        return {}

    def unhashed(self, facts: dict[str, Any]) -> None:
        """Removes from `facts` what the digest leaves out: nothing, except a segment's usage facts."""

    def kept_facts(self) -> dict[str, Any]:
        """Returns `facts()`, made once per line, as a new dict of the same immutable values."""
        kept: dict[str, Any] | None = getattr(self, "_facts", None)
        if kept is None:
            kept = self.facts()
            object.__setattr__(self, "_facts", kept)  # its slot, past pydantic's __setattr__
        return dict(kept)


class ConversationStartedLine(Line):
    type: Literal["conversation_started"]
    kind: Literal["chat", "alt_text"]
    owner: Whole

    def facts(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "kind": self.kind, "owner": self.owner}


class UserMessageLine(Line):
    type: Literal["user_message"]
    message: MessageNo
    text: Text
    page: Whole
    skill: Skill | None = None

    def facts(self) -> dict[str, Any]:
        return {"message": self.message, "text": self.text, "page": self.page, "skill": self.skill}


class SegmentReturnedLine(Line):
    type: Literal["segment_returned"]
    segment: ReducedId
    run: ReducedId
    trigger: Literal["turn", "approval", "answer", "retry"]
    outcome: str
    answer: Text | None = None
    flag: Literal["nothingSaved"] | None = None
    steps: Annotated[list[Step], Field(max_length=STEPS_MAX), AfterValidator(check_segment_sums)] = []
    pending: Annotated[list[Pending], Field(max_length=LIST_MAX)] = []
    model: ModelName | None = Field(
        default=None, description="The model the segment ran with (e.g. gpt-4o-mini); absent: unknown."
    )
    provider: Provider | None = Field(
        default=None,
        description="The model's provider (e.g. openai, anthropic); absent: the store's CHATRECORD_GENAI_PROVIDER in traces, "
        "unknown in the usage audit.",
    )

    def unhashed(self, facts: dict[str, Any]) -> None:
        """Leaves the usage facts out of the digest, so a line sent before and after they were kept is
        one line."""
        facts.pop("model", None)
        facts.pop("provider", None)
        for step in facts.get("steps", ()):
            step.pop("call", None)
            step.pop("offered_tools", None)

    def facts(self) -> dict[str, Any]:
        steps = tuple(step.fact() for step in self.steps if step.known)  # a step of an unknown kind is dropped
        outcome = self.outcome if self.outcome in OUTCOMES else "unknown"
        if outcome == "failed" and not self.steps and self.trigger in ("turn", "retry"):
            outcome = "unknown"  # the turn failed before nr-llm returned its steps (docs/spec-map.md, S3)
        return {
            "segment": self.segment,
            "run": self.run,
            "trigger": self.trigger,
            "outcome": outcome,
            "answer": self.answer,
            "nothing_saved": self.flag == "nothingSaved",
            "steps": steps,
            "waiting": tuple(p.call() for p in self.pending),
            "model": self.model,
            "provider": self.provider,
        }


class CardDecidedLine(Line):
    model_config = ConfigDict(
        json_schema_extra=drop_null(
            "message",
            "text",
            schema={
                "allOf": [
                    {
                        "anyOf": [
                            {"properties": {"approved": {"const": True}, "answer": {"const": CARD_ANSWERS[0]}}},
                            {"properties": {"approved": {"const": False}, "answer": {"enum": list(CARD_ANSWERS[1:])}}},
                        ]
                    },
                    {"anyOf": [{"required": ["message", "text"]}, {"properties": {"message": {"not": {}}, "text": {"not": {}}}}]},
                ],
                "description": f"approved is true exactly for {CARD_ANSWERS[0]}; message and text go together.",
            },
        )
    )

    type: Literal["card_decided"]
    segment: ReducedId
    approved: bool
    answer: Annotated[str, AfterValidator(check_answer), WithJsonSchema({"type": "string", "enum": list(CARD_ANSWERS)})]
    message: MessageNo | None = None
    text: Text | None = Field(default=None, validate_default=True)

    @field_validator("answer")
    @classmethod
    def _agrees(cls, answer: str, info: ValidationInfo) -> str:
        approved = info.data.get("approved")
        if approved is not None and approved != (answer == "Übernehmen"):
            raise ValueError(
                f"{show(answer)} does not go with approved {str(approved).lower()}; approved is true exactly for Übernehmen"
            )
        return answer

    @field_validator("text")
    @classmethod
    def _with_message(cls, text: str | None, info: ValidationInfo) -> str | None:
        if "message" in info.data and (info.data["message"] is None) != (text is None):
            raise ValueError("message and text go together; give both or neither")
        return text

    def facts(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "approved": self.approved,
            "answer": self.answer,
            "message": self.message,
            "text": self.text,
        }


class QuestionAnsweredLine(Line):
    type: Literal["question_answered"]
    segment: ReducedId
    message: MessageNo
    text: Text

    def facts(self) -> dict[str, Any]:
        return {"segment": self.segment, "message": self.message, "text": self.text}


class TurnRetriedLine(Line):
    type: Literal["turn_retried"]
    message: MessageNo

    def facts(self) -> dict[str, Any]:
        return {"message": self.message}


class TourEndedLine(Line):
    type: Literal["tour_ended"]


class MessageEditedLine(Line):
    type: Literal["message_edited"]
    message: MessageNo
    text: Text

    def facts(self) -> dict[str, Any]:
        return {"message": self.message, "text": self.text}


class TranscriptReplacedLine(Line):
    type: Literal["transcript_replaced"]
    messages: Annotated[list[InputMessage], Field(max_length=LIST_MAX)]

    def facts(self) -> dict[str, Any]:
        return {"messages": tuple(m.transcript_line() for m in self.messages)}


class LegacyRowLine(Line):
    type: Literal["legacy_row"]
    messages: Annotated[list[InputMessage], Field(max_length=LIST_MAX)]
    card_outcomes: Annotated[list[LegacyOutcome], Field(max_length=LIST_MAX)] = []

    def facts(self) -> dict[str, Any]:
        return {
            "messages": tuple(m.transcript_line() for m in self.messages),
            "card_outcomes": tuple(o.card_outcome() for o in self.card_outcomes),
        }


ParsedLine = Annotated[
    ConversationStartedLine
    | UserMessageLine
    | SegmentReturnedLine
    | CardDecidedLine
    | QuestionAnsweredLine
    | TurnRetriedLine
    | TourEndedLine
    | MessageEditedLine
    | TranscriptReplacedLine
    | LegacyRowLine,
    Field(discriminator="type"),
]
"""One parsed input line; the union is discriminated on `type`."""

LINE_TYPES = (
    "conversation_started",
    "user_message",
    "segment_returned",
    "card_decided",
    "question_answered",
    "turn_retried",
    "tour_ended",
    "message_edited",
    "transcript_replaced",
    "legacy_row",
)
"""The line types, in the order an error lists them (`adapters.service.line_commands.COMMANDS`
decides each)."""
