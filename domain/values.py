"""Value objects: the filtered facts of a segment's steps, waiting calls, records. Each is an immutable
pydantic model compared by value (docs/spec-map.md, S20). They hold only what nr-llm's privacy
filter keeps. Tool arguments, tool results and model text have no field, so they cannot be stored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticUndefined

STEP_KINDS = ("context", "request", "llm", "tool", "tool_write", "assembled", "dropped")
"""nr-llm `RunStep::kinds()`; any other kind is kept as `unknown`."""

TOOL_OUTCOMES = ("ok", "failed", "cancelled")
"""nr-llm ADR-191 `ToolOutcome`; any other value is kept as `unknown`."""

OUTCOMES = (
    "completed",
    "awaiting_approval",
    "awaiting_input",
    "failed",
    "cancelled",
    "suspend_failed",
    "guardrail_blocked",
    "guardrail_approval_required",
    "requeued",
    "lease_lost",
)
"""nr-llm `AgentRunOutcome`; anything else is kept as `unknown` (docs/spec-map.md, D8)."""

CARD_ANSWERS = ("Übernehmen", "Behalten", "Überspringen", "Andere Variante", "abgelehnt")
"""The editor's answers on a card (docs/spec-map.md, D9)."""

PLAIN_DENIAL = "abgelehnt"
"""The answer of a plain denial. It records no card outcome (docs/spec-map.md, S10): the run record
carries it, also on a card of a guided process."""

IDENTIFIER_MAX = 128
"""How many characters an identifier (tool, table, field, skill, card answer key) keeps."""

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_.:-]")


def reduce_identifier(value: str | None) -> str:
    """Returns `value` reduced to `[A-Za-z0-9_.:-]` and cut to IDENTIFIER_MAX (spec S23). Returns ''
    when nothing is left."""
    return _NOT_IDENTIFIER.sub("", value or "")[:IDENTIFIER_MAX]


Completeness = Literal["complete", "partial", "unconfirmed"]
StepKind = Literal["context", "request", "llm", "tool", "tool_write", "assembled", "dropped", "unknown"]
ToolOutcome = Literal["ok", "failed", "cancelled", "unknown"]


class Immutable(BaseModel):
    """Base of every value object and event: frozen, no unknown fields. A docstring under a field is
    its description."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Returns a shallow copy with the fields in `update` changed, not validated. Otherwise as
        `BaseModel.model_copy`; `deep` copies as pydantic does."""
        if deep:
            return super().model_copy(update=update, deep=True)
        fields = self.__dict__.copy()
        fields_set = set(self.__pydantic_fields_set__)
        if update:
            fields.update(update)
            fields_set.update(update)
        made = assembled(type(self), fields, fields_set)
        private = self.__pydantic_private__
        if private is not None:
            _set(made, "__pydantic_private__", dict(private))
        return made


M = TypeVar("M", bound=Immutable)
_set = object.__setattr__
_DEFAULTS: dict[type, dict[str, Any]] = {}


def trusted(cls: type[M], **values: Any) -> M:
    """Returns `cls(**values)` without validating, as `model_construct` does. Use it only for values
    from validated models. Every required field must be given. Defaults must be immutable: they are
    shared. A wrong value is not noticed. Raises TypeError for a class with a default_factory."""
    defaults = _DEFAULTS.get(cls)
    if defaults is None:  # every field in order, so the model's __dict__ is as validation makes it
        if any(field.default_factory is not None for field in cls.model_fields.values()):
            raise TypeError(f"{cls.__name__} has a default_factory: build it by validation")
        defaults = _DEFAULTS[cls] = {
            name: None if field.default is PydanticUndefined else field.default for name, field in cls.model_fields.items()
        }
    fields = defaults.copy()
    fields.update(values)
    return assembled(cls, fields, set(values))


def assembled(cls: type[M], fields: dict[str, Any], fields_set: set[str]) -> M:
    """Returns a `cls` whose `__dict__` is `fields` and whose set fields are `fields_set`. Nothing is
    validated; no extra fields or private attributes."""
    new = cls.__new__(cls)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_fields_set__", fields_set)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


class RecordRef(Immutable):
    """A TYPO3 record named by table and uid (nr-llm `RecordReference`). `table` matches
    `[A-Za-z0-9_]{1,64}`; `uid` is >= 1. `str()` gives `table:uid`."""

    table: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$")
    uid: int = Field(ge=1)

    def __str__(self) -> str:
        return f"{self.table}:{self.uid}"


class RequestedCall(Immutable):
    """A tool call a model step asked for, less its arguments. `call_id` is `c` and 16 hex of the
    chat's call id's SHA-256. `tool` is the name, or None."""

    call_id: str
    tool: str | None = None


class ModelCall(Immutable):
    """The usage facts of one `llm` step: counts, a cost and names, never a text. Each is None where
    the line did not state it: unknown, never zero. `estimated_cost` is nr-llm's estimate in its
    currency unit. `finish_reason` is the provider's reason as a name (`stop`, `length`, ...)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    estimated_cost: float | None = None
    finish_reason: str | None = None
    requested: tuple[RequestedCall, ...] = ()


class StepFact(Immutable):
    """One nr-llm `RunStep`, less everything the privacy filter drops. `duration_ms` is in
    milliseconds; refusals of waiting calls are exactly 0.0. `write_completeness` is `unconfirmed`
    where nr-llm stated none. `call` (on `llm` steps) and `offered_tools` (on `request` steps) are
    None elsewhere. They feed the usage audit and the traces, not the notes."""

    kind: StepKind
    round: int
    duration_ms: float
    tool_name: str | None = None
    tool_is_error: bool | None = None
    tool_outcome: ToolOutcome | None = None
    write_target: RecordRef | None = None
    write_completeness: Completeness | None = None
    hook_failed_after_write: bool = False
    call: ModelCall | None = None
    offered_tools: tuple[str, ...] | None = None


class WaitingCall(Immutable):
    """A call left waiting for the editor's decision (nr-llm `PendingCallView`)."""

    tool_name: str
    target: RecordRef | None = None
    fields: tuple[str, ...] = ()


class TranscriptLine(Immutable):
    """One message of a replaced transcript or a legacy row."""

    role: Literal["user", "assistant"]
    text: str


class LegacyCardOutcome(Immutable):
    """A card outcome as the chat stored it before the run record (ADR-023). `after` is the transcript
    length then; a create has no target."""

    outcome: Literal["applied", "check", "not_applied", "skipped", "variant", "kept", "declined"]
    after: int = Field(ge=0)
    tool: str
    target: RecordRef | None = None
    fields: tuple[str, ...] = ()
