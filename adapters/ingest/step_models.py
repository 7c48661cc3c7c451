"""The privacy filter: a step, a waiting call and the transcript parts of a line.

A step keeps only what nr-llm's privacy filter keeps: kind, round, durationMs, toolName,
toolIsError, toolOutcome, writeTargetTable/Uid, writeCompleteness, hookFailedAfterWrite. A step of a
kind outside `STEP_KINDS` is checked, then dropped whole (`Step.known`). toolArguments, toolResult,
content, thinking, messagesSent, raw and unknown keys are never declared. Pydantic drops them
unread, so they reach no event, digest or error.

An `llm` step's usage facts are declared and checked. Call ids and names of `requestedToolCalls` and
tool names of `toolSpecs` are picked after validation. Picking never fails a line: a value of
another shape is left out."""

from __future__ import annotations

import math
import re
from hashlib import sha256
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
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
    reduce_name,
)
from domain.limits import (
    COST_MAX,
    INT_MAX,
    LIST_MAX,
    SEGMENT_COST_MAX,
    SEGMENT_DURATION_MS_MAX,
    SEGMENT_TOKENS_MAX,
)
from domain.values import (
    STEP_KINDS,
    TOOL_OUTCOMES,
    LegacyCardOutcome,
    ModelCall,
    RecordRef,
    RequestedCall,
    StepFact,
    TranscriptLine,
    WaitingCall,
    trusted,
)

Cost = Annotated[float, Field(ge=0.0, le=COST_MAX, allow_inf_nan=False)]
"""An estimated cost: a finite number from 0 to COST_MAX, in nr-llm's currency unit."""

PICKED_SCHEMA: dict[str, Any] = {
    "requestedToolCalls": {
        "type": "array",
        "description": "The tool calls an llm step asked for. Only each call's id (kept as its digest) and name are "
        "read; its arguments are dropped unread, and an entry of another shape is left out, never an error.",
        "items": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}},
    },
    "toolSpecs": {
        "type": "array",
        "description": "The tools a request step offered the model: only their names are kept (a name, or an object's "
        "name); anything else is left out, never an error.",
        "items": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"name": {"type": "string"}}}]},
    },
}
"""How the JSON Schema describes the two fields whose names only are picked out (`_picked`)."""


_STORED_CALL_ID = re.compile(r"c[0-9a-f]{16}")


def call_id_digest(call_id: str) -> str:
    """Returns the stored form of a requested call's id: `c` and 16 hex of its SHA-256. An id that is a
    stored form already is kept, so exports round-trip."""
    if _STORED_CALL_ID.fullmatch(call_id):
        return call_id
    return "c" + sha256(call_id.encode("utf-8")).hexdigest()[:16]


def _name_or_none(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return reduce_name(value)
    except ValueError:
        return None


def _step_schema(schema: dict[str, Any]) -> None:
    drop_null(
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
            "A step of a kind outside " + ", ".join(STEP_KINDS) + " is dropped. An llm step's usage (tokens, "
            "estimatedCost, finishReason, requestedToolCalls) and a request step's toolSpecs are kept as counts and "
            "names only.",
        },
    )(schema)
    schema["properties"].update(PICKED_SCHEMA)


class Step(InputModel):
    """One nr-llm RunStep, of which only the privacy-kept facts are read, plus usage and offered tools."""

    __slots__ = ("_picked",)
    # what `_pick` reads of requestedToolCalls and toolSpecs: a plain slot, as Line's

    model_config = ConfigDict(json_schema_extra=_step_schema)

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
    promptTokens: Whole | None = Field(default=None, description="An llm step's prompt (input) tokens; absent: unknown.")
    completionTokens: Whole | None = Field(default=None, description="An llm step's completion (output) tokens; absent: unknown.")
    totalTokens: Whole | None = Field(
        default=None, description="An llm step's tokens in all, as nr-llm counts them; absent: unknown."
    )
    estimatedCost: Cost | None = Field(
        default=None, description="nr-llm's estimate of an llm step's cost, in its currency unit; absent: unknown."
    )
    finishReason: Text | None = Field(
        default=None,
        description="Why the model stopped (stop, tool_calls, length, ...), kept as a name: characters outside "
        "A-Za-z0-9_.:- are dropped.",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _pick(cls, data: Any, handler: ModelWrapValidatorHandler[Step]) -> Step:
        step = handler(data)
        picked: tuple[tuple[RequestedCall, ...], tuple[str, ...] | None] = ((), None)
        if isinstance(data, dict):
            picked = (_requested(data.get("requestedToolCalls")), _offered(data.get("toolSpecs")))
        object.__setattr__(step, "_picked", picked)  # its slot, past pydantic's __setattr__
        return step

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
        """Returns the step as a StepFact. An unknown toolOutcome becomes `unknown`; a write's missing
        completeness `unconfirmed`. Raises ValueError for a step of an unknown kind, which is never
        stored."""
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
            call=self._call() if kind == "llm" else None,
            offered_tools=self._picked_facts()[1] if kind == "request" else None,
        )

    def _picked_facts(self) -> tuple[tuple[RequestedCall, ...], tuple[str, ...] | None]:
        picked: tuple[tuple[RequestedCall, ...], tuple[str, ...] | None] = getattr(self, "_picked", ((), None))
        return picked

    def _call(self) -> ModelCall | None:
        """Returns the llm step's usage facts, None when it states none (unknown)."""
        requested = self._picked_facts()[0]
        finish = _name_or_none(self.finishReason) if self.finishReason is not None else None
        usage = (self.promptTokens, self.completionTokens, self.totalTokens, self.estimatedCost, finish)
        if not requested and all(value is None for value in usage):
            return None
        return trusted(
            ModelCall,
            prompt_tokens=self.promptTokens,
            completion_tokens=self.completionTokens,
            total_tokens=self.totalTokens,
            estimated_cost=self.estimatedCost,
            finish_reason=finish,
            requested=requested,
        )


def _amount(value: float) -> str:
    """Returns a sum for an error message: 12,000,000 or 2,000,000.5 (1e+22 beyond 1e21)."""
    shown = f"{value:,}"
    return shown[:-2] if shown.endswith(".0") else shown


def check_segment_sums(steps: list[Step]) -> list[Step]:
    """Returns `steps` if what a segment's usage row sums of them fits the store (README, "Input
    limits"): the kept steps' durations, and each of the model calls' token counts and estimated
    costs. Raises ValueError naming the sum, its field and the most a segment may state."""
    durations: list[float] = []
    costs: list[float] = []
    prompt = completion = total = 0
    for step in steps:  # one pass: a segment has up to 50,000 steps
        if step.kind not in STEP_KINDS:
            continue  # dropped, not stored
        durations.append(step.durationMs)
        if step.kind == "llm":
            prompt += step.promptTokens or 0
            completion += step.completionTokens or 0
            total += step.totalTokens or 0
            if step.estimatedCost:
                costs.append(step.estimatedCost)
    duration = math.fsum(durations)
    if duration > SEGMENT_DURATION_MS_MAX:
        raise ValueError(
            f"the steps' durationMs sum to {_amount(duration)}; the most a segment may state is "
            f'{_amount(SEGMENT_DURATION_MS_MAX)} (README, "Input limits")'
        )
    for name, tokens in (("promptTokens", prompt), ("completionTokens", completion), ("totalTokens", total)):
        if tokens > SEGMENT_TOKENS_MAX:
            raise ValueError(
                f"the llm steps' {name} sum to {tokens:,}; the most a segment may state is "
                f'{SEGMENT_TOKENS_MAX:,} (README, "Input limits")'
            )
    cost = math.fsum(costs)
    if cost > SEGMENT_COST_MAX:
        raise ValueError(
            f"the llm steps' estimatedCost sum to {_amount(cost)}; the most a segment may state is "
            f'{_amount(SEGMENT_COST_MAX)} (README, "Input limits")'
        )
    return steps


def _requested(value: Any) -> tuple[RequestedCall, ...]:
    """Returns the requested calls' id digests and tool names; malformed entries are left out."""
    if not isinstance(value, list):
        return ()
    calls = []
    for entry in value[:LIST_MAX]:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
            calls.append(RequestedCall(call_id=call_id_digest(entry["id"]), tool=_name_or_none(entry.get("name"))))
    return tuple(calls)


def _offered(value: Any) -> tuple[str, ...] | None:
    """Returns the offered tools' names, None when the step states no list; malformed entries are left out."""
    if not isinstance(value, list):
        return None
    names = (_name_or_none(entry.get("name") if isinstance(entry, dict) else entry) for entry in value[:LIST_MAX])
    return tuple(name for name in names if name is not None)


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
