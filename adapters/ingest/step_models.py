"""The privacy filter: a step, a waiting call and the transcript parts of a line.

A step keeps only what nr-llm's privacy filter keeps at every level (kind, round, durationMs,
toolName, toolIsError, toolOutcome, writeTargetTable/Uid, writeCompleteness,
hookFailedAfterWrite); a step of a kind outside `STEP_KINDS` is checked like any other and then
dropped whole (`Step.known`, docs/input-format.md, "Steps"): none of its fields is stored. toolArguments, toolResult, content, thinking, messagesSent,
requestedToolCalls, raw and every unknown key are never declared, so pydantic drops them unread
and they cannot reach an event, a digest or an error message.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from adapters.ingest.names import (
    TABLE_PATTERN,
    Duration,
    FieldName,
    InputModel,
    Table,
    Text,
    ToolName,
    Uid,
    Whole,
    check_table,
    check_uid,
    drop_null,
    pair,
)
from domain.limits import INT_MAX, LIST_MAX
from domain.values import (
    STEP_KINDS,
    TOOL_OUTCOMES,
    LegacyCardOutcome,
    RecordRef,
    StepFact,
    TranscriptLine,
    WaitingCall,
    trusted,
)


class Step(InputModel):
    """One nr-llm RunStep, of which only the privacy-kept facts are read."""

    model_config = ConfigDict(
        json_schema_extra=drop_null(
            "writeTargetTable",
            "writeTargetUid",
            schema={
                "anyOf": [
                    {"required": ["writeTargetTable", "writeTargetUid"]},
                    {
                        "properties": {
                            "kind": {"not": {"const": "tool_write"}},
                            "writeTargetTable": {"not": {}},
                            "writeTargetUid": {"not": {}},
                        }
                    },
                ],
                "description": "A step; writeTargetTable and writeTargetUid go together, and a tool_write step has them. "
                "A step of a kind outside " + ", ".join(STEP_KINDS) + " is dropped.",
            },
        )
    )

    kind: str
    round: Whole
    durationMs: Duration
    toolName: ToolName | None = None
    toolIsError: bool | None = None
    toolOutcome: str | None = None
    writeTargetTable: Table | None = None
    writeTargetUid: Uid | None = Field(default=None, validate_default=True)
    writeCompleteness: str | None = None
    hookFailedAfterWrite: bool | None = None

    @field_validator("writeTargetUid")
    @classmethod
    def _target(cls, uid: int | None, info: ValidationInfo) -> int | None:
        return pair(uid, info, "writeTargetTable", "writeTargetUid")

    @model_validator(mode="after")
    def _a_write_names_its_record(self) -> Step:
        if self.kind == "tool_write" and self.writeTargetTable is None:
            raise ValueError(
                "a tool_write step names the record it wrote (writeTargetTable and writeTargetUid); "
                "nr-llm adds one only when the tool result names a target"
            )
        return self

    @property
    def known(self) -> bool:
        """Whether the step's kind is one of STEP_KINDS; a step of another kind is dropped."""
        return self.kind in STEP_KINDS

    def fact(self) -> StepFact:
        """Returns the step (of a known kind) as a StepFact: an unknown toolOutcome ->
        `unknown`; a write step's absent or unknown completeness -> `unconfirmed`. Raises
        ValueError for a step of an unknown kind, which is dropped, never stored."""
        if not self.known:
            raise ValueError(f"a step of kind {self.kind!r} is dropped, not stored")
        kind = self.kind
        target = None
        if self.writeTargetTable is not None and self.writeTargetUid is not None:  # checked as RecordRef checks them
            target = trusted(RecordRef, table=self.writeTargetTable, uid=self.writeTargetUid)
        completeness = self.writeCompleteness
        if completeness is not None or kind == "tool_write" or target is not None:
            completeness = completeness if completeness in ("complete", "partial") else "unconfirmed"
        outcome = self.toolOutcome
        if outcome is not None and outcome not in TOOL_OUTCOMES:
            outcome = "unknown"
        # every value is of its field's type already (the step's own fields are strict, the
        # kind, outcome and completeness are checked above): made without validating again
        return trusted(
            StepFact,
            kind=kind,
            round=self.round,
            duration_ms=self.durationMs,
            tool_name=self.toolName,
            tool_is_error=self.toolIsError,
            tool_outcome=outcome,
            write_target=target,
            write_completeness=completeness,
            hook_failed_after_write=bool(self.hookFailedAfterWrite),
        )


class Pending(InputModel):
    """A call left waiting: `toolName`, an optional target (`table` with `uid`), `fields`."""

    model_config = ConfigDict(
        json_schema_extra=drop_null(
            "table",
            "uid",
            schema={"anyOf": [{"required": ["table", "uid"]}, {"properties": {"table": {"not": {}}, "uid": {"not": {}}}}]},
        )
    )

    toolName: ToolName
    table: Table | None = None
    uid: Uid | None = Field(default=None, validate_default=True)
    fields: Annotated[list[FieldName], Field(max_length=LIST_MAX)] = []

    @field_validator("uid")
    @classmethod
    def _target(cls, uid: int | None, info: ValidationInfo) -> int | None:
        return pair(uid, info, "table", "uid")

    def call(self) -> WaitingCall:
        """Returns the waiting call as the domain keeps it."""
        target = RecordRef(table=self.table, uid=self.uid) if self.table and self.uid else None
        return WaitingCall(tool_name=self.toolName, target=target, fields=tuple(self.fields))


class InputMessage(InputModel):
    """A transcript message of a replaced transcript or a legacy row."""

    role: Literal["user", "assistant"]
    text: Text

    def transcript_line(self) -> TranscriptLine:
        return TranscriptLine(role=self.role, text=self.text)


class LegacyOutcome(InputModel):
    """A card outcome as the chat stored it; a create has table '' and uid 0 (no target)."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"properties": {"table": {"const": ""}, "uid": {"const": 0}}},
                {"required": ["table", "uid"], "properties": {"table": {"pattern": TABLE_PATTERN}, "uid": {"minimum": 1}}},
            ]
        }
    )

    outcome: Literal["applied", "check", "not_applied", "skipped", "variant", "kept", "declined"]
    after: Whole
    tool: ToolName
    table: Annotated[
        str, AfterValidator(lambda v: v and check_table(v)), WithJsonSchema({"type": "string", "pattern": "^[A-Za-z0-9_]{0,64}$"})
    ] = ""
    uid: Annotated[int, WithJsonSchema({"type": "integer", "minimum": 0, "maximum": INT_MAX})] = Field(
        default=0, validate_default=True
    )
    fields: Annotated[list[FieldName], Field(max_length=LIST_MAX)] = []

    @field_validator("uid")
    @classmethod
    def _target(cls, uid: int, info: ValidationInfo) -> int:
        if "table" not in info.data:
            return uid
        if info.data["table"]:
            return check_uid(uid)
        if uid != 0:
            raise ValueError("needs a table beside it; a create has table '' and uid 0")
        return uid

    def card_outcome(self) -> LegacyCardOutcome:
        target = RecordRef(table=self.table, uid=self.uid) if self.table else None
        return LegacyCardOutcome(outcome=self.outcome, after=self.after, tool=self.tool, target=target, fields=tuple(self.fields))
