"""Rule sets: the versioned reading of stored facts (docs/spec-map.md, D11).

| id                | notes | refused calls (amendment of 2026-11-02) | lastPageId kept |
|-------------------|-------|------------------------------------------|-----------------|
| `transcript-only` | none  | no: every error step is a failed call   | no              |
| `2026-11-01`      | yes   | no: every error step is a failed call   | yes             |
| `2026-11-02`      | yes   | yes (RefusedCalls)                       | yes             |

Every projection and the turn input take a rule set; `get_rule_set` resolves an id.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from domain.errors import ChatrecordError

RULE_SET_IDS = ("transcript-only", "2026-11-01", "2026-11-02")
Rules = StrEnum("Rules", {rule_set: rule_set for rule_set in RULE_SET_IDS})  # type: ignore[misc]  # mypy reads only literal member names
"""The rule set ids as the choices of the entrypoints' parameters (`--rules`, `?rules=`). A
StrEnum, whose `str()` is its value: typer 0.27 converts an enum option through `str()`, which
for a plain str-mixed Enum is `Rules.<name>` and turned every `--rules` into None."""
DEFAULT_RULE_SET = "2026-11-02"


class UnknownRuleSet(ChatrecordError):
    """Raised when a rule set id is not one of RULE_SET_IDS."""


class RuleSet(BaseModel):
    """One version of the reading. Frozen; the tool sets are configurable.

    - `notes`: whether a turn gets notes.
    - `refused_calls`: whether the step reading applies the amendment's table. Without it every tool
      step in error is a failed call.
    - `keeps_last_page`: whether lastPageId is kept for a turn sent with page 0.
    - `question_tools`: tools that ask the editor (nr-llm: `ask_choice`).
    - `display_tools`: tools that only drive the display. Both sets stay out of the run record.
    - `max_notes`, `max_note_chars`: the notes' budget per turn, in notes and labelled characters.
    - `record_entries`: entries the run record keeps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    notes: bool
    refused_calls: bool
    keeps_last_page: bool
    question_tools: frozenset[str] = frozenset({"ask_choice"})
    display_tools: frozenset[str] = frozenset({"chat_set_progress", "chat_highlight_element"})
    max_notes: int = 40
    max_note_chars: int = 6000
    record_entries: int = 200


TRANSCRIPT_ONLY = RuleSet(id="transcript-only", notes=False, refused_calls=False, keeps_last_page=False)
SPEC_2026_11_01 = RuleSet(id="2026-11-01", notes=True, refused_calls=False, keeps_last_page=True)
SPEC_2026_11_02 = RuleSet(id="2026-11-02", notes=True, refused_calls=True, keeps_last_page=True)

_RULE_SETS = {rules.id: rules for rules in (TRANSCRIPT_ONLY, SPEC_2026_11_01, SPEC_2026_11_02)}


def get_rule_set(rule_set_id: str) -> RuleSet:
    """Returns the rule set named `rule_set_id`. Raises UnknownRuleSet for any other id."""
    try:
        return _RULE_SETS[rule_set_id]
    except (KeyError, TypeError):
        raise UnknownRuleSet(f"unknown rule set {rule_set_id!r}; use one of {', '.join(RULE_SET_IDS)}") from None


def resolve(rules: RuleSet | str) -> RuleSet:
    """Returns `rules` itself, or the rule set it names. Raises UnknownRuleSet as get_rule_set."""
    return rules if isinstance(rules, RuleSet) else get_rule_set(rules)
