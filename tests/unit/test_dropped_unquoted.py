"""No error quotes what the privacy filter drops (issue 35, item 9): a secret planted in every
dropped field (tool arguments and results, the text of model steps, raw, an unknown key, a step
of an unknown kind), as a value or as a key inside it, with a bad type or shape beside it or in
it, appears in no error: not from `parse_line`, `Chatrecord.record` (a line given as a dict),
`chatrecord ingest`, `chatrecord replay FILE --json` or `POST /v1/lines`' problem."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.ingest import parse_line
from domain.errors import InvalidInput
from domain.limits import DEPTH_MAX

SECRET = "sk_live_Pl4nted9Secret"
AT = "2026-10-28T09:00:00Z"
DROPPED = ("toolArguments", "toolResult", "content", "thinking", "messagesSent", "requestedToolCalls", "raw", "future")


def segment(*steps: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "type": "segment_returned",
        "conversation": "c",
        "at": AT,
        "segment": "r/1",
        "run": "r",
        "trigger": "turn",
        "outcome": "completed",
        "steps": list(steps),
        **more,
    }


def step(**more: Any) -> dict[str, Any]:
    return {"kind": "tool", "round": 1, "durationMs": 1.0, "toolName": "get_page", **more}


def nested(levels: int) -> Any:
    value: Any = SECRET
    for _ in range(levels):
        value = {SECRET: value}
    return value


def planted() -> dict[str, str]:
    """Returns each refused line as JSON text, by what is wrong with it."""
    texts: dict[str, str] = {}
    for field in DROPPED:
        for name, value in {"value": SECRET, "key": {SECRET: [SECRET]}}.items():
            texts[f"{field} {name}, a round of text"] = json.dumps(segment(step(round="x", **{field: value})))
            texts[f"{field} {name}, a bad table"] = json.dumps(
                segment(step(writeTargetTable="a b", writeTargetUid=1, **{field: value}))
            )
            texts[f"{field} {name} on the line, a bad trigger"] = json.dumps(segment(trigger="later", **{field: value}))
        texts[f"{field} nested too deep in a step"] = json.dumps(segment(step(**{field: nested(DEPTH_MAX + 2)})))
        texts[f"{field} nested too deep on the line"] = json.dumps(segment(**{field: nested(DEPTH_MAX + 2)}))
        twice = json.dumps(segment(step(**{field: {"k": 1}}))).replace('{"k": 1}', f'{{"{SECRET}": 1, "{SECRET}": 2}}')
        texts[f"{field} holding a key twice"] = twice
    texts["an unknown key named by the secret, nested too deep"] = json.dumps(segment(**{SECRET: nested(DEPTH_MAX + 2)}))
    beyond = f'{{"{SECRET}": ' * 2000 + '"x"' + "}" * 2000  # deeper than orjson reads (1,024 levels)
    texts["an unknown key named by the secret, nested past the JSON reader's depth"] = json.dumps(
        segment(**{SECRET: "@"})
    ).replace('"@"', beyond)
    for field in DROPPED:
        texts[f"{field} nested past the JSON reader's depth in a step"] = json.dumps(segment(step(**{field: "@"}))).replace(
            '"@"', beyond
        )
    texts["a step of an unknown kind with the secret as its table"] = json.dumps(
        segment(step(kind="secret_step", writeTargetTable=f"{SECRET} x", writeTargetUid=1))
    )
    texts["a step of an unknown kind with a long secret as its table"] = json.dumps(
        segment(step(kind="secret_step", writeTargetTable=SECRET * 20 + " x", writeTargetUid=1))
    )
    texts["a step of an unknown kind with the secret as its uid's type"] = json.dumps(
        segment(step(kind="secret_step", writeTargetTable="pages", writeTargetUid=SECRET))
    )
    return texts


PLANTED = planted()


@pytest.mark.parametrize("text", PLANTED.values(), ids=PLANTED.keys())
def test_a_line_with_a_dropped_secret_is_refused_without_quoting_it(text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_line(text, 1, "secrets.jsonl")
    assert SECRET not in str(refused.value) and "Pl4nted" not in str(refused.value)
    assert str(refused.value).startswith("secrets.jsonl: line 1, ")


def test_a_dropped_key_nr_llm_sends_is_named_and_any_other_is_not() -> None:
    with pytest.raises(InvalidInput) as deep:
        parse_line(PLANTED["toolArguments nested too deep in a step"], 1, "f")
    with pytest.raises(InvalidInput) as twice:
        parse_line(PLANTED["raw holding a key twice"], 1, "f")
    with pytest.raises(InvalidInput) as unknown:
        parse_line(PLANTED["an unknown key named by the secret, nested too deep"], 1, "f")
    with pytest.raises(InvalidInput) as table:
        parse_line(PLANTED["a step of an unknown kind with the secret as its table"], 1, "f")

    assert str(deep.value).startswith("f: line 1, steps[0].toolArguments: is nested more than 64 levels deep")
    assert str(twice.value) == "f: line 1, steps[0].raw: holds a key twice; give each key of an object once"
    assert str(unknown.value).startswith("f: line 1, (a dropped key): is nested more than 64 levels deep")
    assert str(table.value) == "f: line 1, steps[0].writeTargetTable: the value is not a table name; use 1–64 of A-Za-z0-9_"


@pytest.mark.parametrize(
    "value",
    [float("nan"), "a\ud800b", {SECRET: float("inf")}],
    ids=["NaN", "a lone surrogate", "an infinity under the secret"],
)
def test_a_line_given_as_a_dict_is_refused_without_quoting_a_dropped_key(value: Any) -> None:
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.record({"type": "conversation_started", "conversation": "c", "at": AT, "kind": "chat", "owner": 7})
    with pytest.raises(InvalidInput) as refused:
        chatrecord.record(segment(step(toolArguments={SECRET: value}), future={SECRET: value}))
    assert SECRET not in str(refused.value) and "steps[0].toolArguments" in str(refused.value)
