"""Where the privacy filter drops: an error's path is cut where it enters a dropped field.

Dropped are tool arguments and results, model step texts, undeclared keys and unknown step kinds. So
an error, which reaches logs, never quotes a dropped value or key (README, "Privacy"). A path is a
pydantic location without the union's tag (`("steps", 3, "toolArguments", "k")`). A known dropped
key is named (`steps[3].toolArguments`); any other is not (`steps[3].(a dropped key)`)."""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from adapters.ingest.line_models import ParsedLine
from domain.values import STEP_KINDS

NR_LLM_DROPPED = frozenset(
    {
        "toolArguments",
        "toolResult",
        "content",
        "thinking",
        "messagesSent",
        "requestedToolCalls",
        "raw",
        "toolSpecs",
        "contextBudget",
    }
)
"""The keys nr-llm sends that the privacy filter drops, named in an error's path. Of
requestedToolCalls and toolSpecs the ids and names are picked out after validation
(`adapters.ingest.step_models`); for an error's path they are dropped keys all the same."""

UNNAMED = "(a dropped key)"
"""What an error's path shows for a dropped key that is not one of NR_LLM_DROPPED."""


def _line_models() -> dict[str, type[BaseModel]]:
    union = get_args(ParsedLine)[0]
    models: dict[str, type[BaseModel]] = {}
    for model in get_args(union):
        (name,) = get_args(model.model_fields["type"].annotation)
        models[name] = model
    return models


_LINES = _line_models()


def _inner(annotation: Any) -> Any:
    """Returns the model a field's annotation holds (`list[Step]`, `Step | None`); None for a plain value."""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if origin is Annotated:
        return _inner(get_args(annotation)[0])
    if origin in (list, tuple):
        return [_inner(get_args(annotation)[0])] if get_args(annotation) else None
    if origin in (Union, types.UnionType):
        held = [_inner(arg) for arg in get_args(annotation) if arg is not type(None)]
        return next((h for h in held if h is not None), None)
    return None


def _declared(kind: Any) -> dict[str, Any]:
    """Returns the fields line type `kind` declares, each with what it holds (every type's for an
    unknown kind)."""
    models = [_LINES[kind]] if isinstance(kind, str) and kind in _LINES else list(_LINES.values())
    fields: dict[str, Any] = {}
    for model in models:
        for name, info in model.model_fields.items():
            fields.setdefault(name, _inner(info.annotation))
    return fields


_ANY_LINE = frozenset(_declared(None))
"""The keys some line type declares: named where a line of another type has one."""


def kept_path(data: Any, loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], bool]:
    """Returns path `loc` into line `data` cut at the first dropped key, and whether it was cut. A cut
    path ends with the key's name when it is known, else with UNNAMED."""
    holds: Any = _declared(data.get("type") if isinstance(data, dict) else None)
    out: list[Any] = []
    for part in loc:
        if isinstance(holds, list):  # a list of models, or of plain values
            if not isinstance(part, int):
                return tuple(out), False
            holds = holds[0]
        else:
            fields = holds if isinstance(holds, dict) else _fields(holds)
            if fields is None:  # inside a plain value (a refused one): not a dropped field
                return tuple(out), False
            if not isinstance(part, str) or part not in fields:
                out.append(part if part in NR_LLM_DROPPED or part in _ANY_LINE else UNNAMED)
                return tuple(out), True
            holds = fields[part]
        out.append(part)
    return tuple(out), False


def quotable(data: Any, loc: tuple[Any, ...]) -> bool:
    """Returns True when an error at `loc` may quote the refused value: not inside an unknown step kind."""
    if len(loc) < 2 or loc[0] != "steps" or not isinstance(data, dict):
        return True
    steps = data.get("steps")
    index = loc[1]
    if not isinstance(steps, list) or not isinstance(index, int) or not 0 <= index < len(steps):
        return True
    step = steps[index]
    return not isinstance(step, dict) or step.get("kind") in STEP_KINDS


def _fields(model: Any) -> dict[str, Any] | None:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return {name: _inner(info.annotation) for name, info in model.model_fields.items()}
    return None
