"""Event factories for the projection tests.

`Chat` runs the domain's own commands (decide, then evolve), so the events carry what the
aggregate derives (message, skill, card_outcomes_before, undecided notes, truncation lists).
Steps are written as nr-llm serialises a RunStep (camelCase dicts) and reduced to StepFacts
by `fact`, which keeps only what the privacy filter keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.ingest.step_models import Step
from domain import conversation as c
from domain.values import (
    LegacyCardOutcome,
    RecordRef,
    StepFact,
    TranscriptLine,
    WaitingCall,
)

T0 = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)
SKILL = "3:seo-optimieren"

# ---------------------------------------------------------------- nr-llm-shaped steps


def model_round(r: int, ms: float = 2100.0) -> list[dict[str, Any]]:
    """Returns the context, request and llm steps of model round `r`."""
    return [
        {"kind": "context", "round": r, "durationMs": 0.0, "contextBudget": 128000},
        {"kind": "request", "round": r, "durationMs": 0.0, "messagesSent": [{"role": "user", "content": "x"}]},
        {"kind": "llm", "round": r, "durationMs": ms, "content": "model text", "finishReason": "tool_calls"},
    ]


def tool(name: str, r: int, ms: float = 31.7, error: bool = False) -> dict[str, Any]:
    """Returns a tool step that ran (timed); `error` marks a failed result."""
    return {
        "kind": "tool",
        "round": r,
        "durationMs": ms,
        "toolName": name,
        "toolArguments": {"secret": "argument"},
        "toolResult": "result text",
        "toolIsError": error,
        "toolOutcome": "failed" if error else "ok",
    }


def refusal(name: str, r: int) -> dict[str, Any]:
    """Returns a tool step nr-llm records for a refused waiting call: error, exactly 0.0 ms."""
    return {
        "kind": "tool",
        "round": r,
        "durationMs": 0.0,
        "toolName": name,
        "toolResult": "Error: approval_denied",
        "toolIsError": True,
        "toolOutcome": "failed",
    }


def write(
    name: str, table: str, uid: int, r: int, completeness: str | None = "complete", hook_failed: bool = False
) -> dict[str, Any]:
    """Returns a tool_write step; `completeness` None is an unstated (unconfirmed) write."""
    step = {
        "kind": "tool_write",
        "round": r,
        "durationMs": 0.0,
        "toolName": name,
        "writeTargetTable": table,
        "writeTargetUid": uid,
        "hookFailedAfterWrite": hook_failed,
    }
    if completeness is not None:
        step["writeCompleteness"] = completeness
    return step


def fact(step: dict[str, Any]) -> StepFact:
    """Returns the StepFact of an nr-llm-shaped step through the ingester's own privacy filter
    (`adapters.ingest.step_models.Step`): arguments, results and text dropped."""
    return Step.model_validate(step).fact()


def facts(steps: Iterable[dict[str, Any]]) -> tuple[StepFact, ...]:
    """Returns the StepFacts of nr-llm-shaped steps."""
    return tuple(fact(s) for s in steps)


def call(
    tool_name: str = "update_page_metadata", table: str | None = "pages", uid: int = 42, fields: Sequence[str] = ("title",)
) -> WaitingCall:
    """Returns a waiting call (nr-llm PendingCallView)."""
    target = RecordRef(table=table, uid=uid) if table else None
    return WaitingCall(tool_name=tool_name, target=target, fields=tuple(fields))


# ---------------------------------------------------------------- conversations


class Chat:
    """A conversation told through the domain's commands; `events` is its log."""

    def __init__(self, kind: str = "chat", conversation: str = "conv-test") -> None:
        self.tick = 0
        self.state: c.Conversation | None = None
        self.history = c.MemoryHistory()
        self.events: list = []
        self.segments = 0
        self.rounds = 0
        self.run("start", c.start_conversation, conversation, kind, 7)

    def run(self, _what: str, command, *args, **kwargs) -> list:
        self.tick += 1
        kwargs.setdefault("at", T0 + timedelta(seconds=10 * self.tick))
        events = command(self.state, *args, history=self.history, **kwargs)
        self.history.record(self.state, events)
        self.state = c.project_conversation(self.state, events)
        self.events.extend(events)
        return events

    @property
    def next_message(self) -> int:
        return self.state.last_message + 1

    def user(self, text: str, page: int = 0, skill: str | None = None) -> int:
        number = self.next_message
        self.run("user", c.post_user_message, number, text, page, skill)
        return number

    def segment(
        self,
        trigger: str = "turn",
        outcome: str = "completed",
        answer: str | None = None,
        steps: Iterable[dict[str, Any]] = (),
        waiting: Sequence[WaitingCall] = (),
        nothing_saved: bool = False,
        run: str = "run",
        model: str | None = None,
        provider: str | None = None,
    ) -> str:
        self.segments += 1
        segment = f"{run}/{self.segments}"
        self.run(
            "segment",
            c.return_segment,
            segment,
            run,
            trigger,
            outcome,
            answer,
            nothing_saved,
            facts(steps),
            list(waiting),
            model=model,
            provider=provider,
        )
        return segment

    def decide(self, approved: bool = True, answer: str = "Übernehmen", append: bool = False) -> None:
        message, text = (self.next_message, answer) if append else (None, None)
        self.run("decide", c.decide_card, self.state.waiting, approved, answer, message, text)

    def answer(self, text: str) -> None:
        self.run("answer", c.answer_question, self.state.waiting, self.next_message, text)

    def end_tour(self) -> None:
        self.run("end", c.end_tour)

    def retry(self, message: int) -> None:
        self.run("retry", c.retry_turn, message)

    def edit(self, message: int, text: str) -> None:
        self.run("edit", c.edit_message, message, text)

    def legacy(self, lines: Sequence[tuple[str, str]], outcomes: Sequence[LegacyCardOutcome]) -> None:
        self.run("legacy", c.import_legacy_row, [TranscriptLine(role=r, text=t) for r, t in lines], list(outcomes))

    def replace(self, lines: Sequence[tuple[str, str]]) -> None:
        self.run("replace", c.replace_transcript, [TranscriptLine(role=r, text=t) for r, t in lines])


SEO_FIELDS = ("title", "og_image", "og_title", "og_description", "twitter_title", "twitter_description")


def proposal(field: str) -> WaitingCall:
    """Returns the waiting call of the SEO tour's card for `field` (og_image: a FAL reference)."""
    return call("set_page_social_image" if field == "og_image" else "update_page_metadata", fields=(field,))


def seo_tour(chat: Chat, answers: Sequence[str], fields: Sequence[str] | None = None) -> None:
    """Tells an SEO tour on page 42: one card per field, each answered with `answers[i]`
    (Übernehmen approves and writes; any other answer declines, appended to the transcript),
    then the tour ends. nr-llm refuses a declined card's call with an error step of 0.0 ms."""
    fields = list(fields or SEO_FIELDS[: len(answers)])
    chat.user("SEO optimieren", page=42, skill=SKILL)
    r = 1
    steps = [*model_round(r), tool("get_page", r), tool("chat_set_progress", r, ms=2.0)]
    chat.segment("turn", "awaiting_approval", f"Ich schlage {fields[0]} vor.", steps, [proposal(fields[0])])
    for index, answer in enumerate(answers):
        approved = answer == "Übernehmen"
        chat.decide(approved, answer, append=not approved)
        waiting_tool = proposal(fields[index]).tool_name
        if approved:
            target = ("sys_file_reference", 913) if fields[index] == "og_image" else ("pages", 42)
            opening = [tool(waiting_tool, r, ms=40.0), write(waiting_tool, *target, r)]
        else:
            opening = [refusal(waiting_tool, r)]
        r += 1
        steps = [*opening, *model_round(r), tool("chat_set_progress", r, ms=2.0)]
        if index + 1 < len(answers):
            nxt = fields[index + 1]
            chat.segment("approval", "awaiting_approval", f"Ich schlage {nxt} vor.", steps, [proposal(nxt)])
        else:
            chat.segment("approval", "completed", "Fertig.", steps)
    chat.end_tour()
