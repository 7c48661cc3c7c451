"""Conversations for the trace tests: the demo tour, and the same tour with a failed call, a
held call and planted secrets in every tool argument, tool result and model round (which the
store never keeps), and a marker in the user's and the model's message texts (which it keeps)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
BEHALTEN_TOUR = DEMO.parent / "behalten_tour.jsonl"
BEHALTEN = "conv-behalten"
PLANTED = "PLANTED-SECRET-7f3a"
TEXT_MARK = "TEXT-MARK-42b1"
PLANTED_CONVERSATION = "conv-planted"


def demo_lines() -> list[str]:
    return DEMO.read_text(encoding="utf-8").splitlines()


def behalten_lines() -> list[str]:
    """Returns the Behalten tour: three cards declined with `Behalten`, their calls refused."""
    return BEHALTEN_TOUR.read_text(encoding="utf-8").splitlines()


def _plant(step: dict[str, Any]) -> dict[str, Any]:
    if "toolArguments" in step:
        step["toolArguments"] = {"secret": PLANTED}
    if "toolResult" in step:
        step["toolResult"] = f"result {PLANTED}"
    if step.get("kind") == "llm":
        step["content"] = f"model round {PLANTED}"
        for call in step.get("requestedToolCalls", []):
            call["arguments"] = {"secret": PLANTED}
    if step.get("kind") == "request":
        step["messagesSent"] = [{"role": "user", "content": PLANTED}]
    return step


def planted_lines() -> list[str]:
    """Returns the demo tour as conversation `conv-planted`: its first segment's get_page call
    failed (an error timed like a call that ran), its second segment holds a second write beside
    its proposal (an error of 0.0 ms: held); secrets planted as the module docstring says."""
    out = []
    segments = 0
    for raw in demo_lines():
        line = json.loads(raw)
        line["conversation"] = PLANTED_CONVERSATION
        if line["type"] == "user_message":
            line["text"] = f"{line['text']} {TEXT_MARK}"
        if line["type"] == "segment_returned":
            segments += 1
            line["steps"] = [_plant(step) for step in line["steps"]]
            if line.get("answer"):
                line["answer"] = f"{line['answer']} {TEXT_MARK}"
            if segments == 1:
                for step in line["steps"]:
                    if step.get("toolName") == "get_page":
                        step["toolIsError"], step["toolOutcome"] = True, "failed"
            if segments == 2:
                line["steps"].append(
                    {
                        "kind": "tool",
                        "round": 3,
                        "durationMs": 0.0,
                        "toolName": "update_page_metadata",
                        "toolResult": f"Error: {PLANTED}",
                        "toolIsError": True,
                        "toolOutcome": "failed",
                    }
                )
        out.append(json.dumps(line, ensure_ascii=False))
    return out
