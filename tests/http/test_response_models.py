"""The response models of docs/openapi.json are what the server sends: the real 200 answers of
the conversation's reads (list, turn, audit, activity, replay), over conversations that show
every audit row kind, validate strictly against the models of `adapters.http.schemas` (every
field present, no other, each of its type and value set) and the models write them back byte
for byte. The handlers write their JSON themselves; this test keeps document and server from
drifting apart (issue 23)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, get_args

import orjson
import pytest
from pydantic import TypeAdapter

from adapters.http import audit_schema, schemas
from tests.e2e.conftest import ROOT, cli_env
from tests.http.conftest import Server, unique

DATA = ROOT / "tests" / "data"
READS: dict[str, TypeAdapter[Any]] = {
    "turn": TypeAdapter(schemas.TurnNotes),
    "audit": TypeAdapter(list[audit_schema.AuditRow]),
    "activity": TypeAdapter(list[schemas.SegmentActivity]),
    "replay": TypeAdapter(schemas.Replay),
}
KINDS = {get_args(row.model_fields["kind"].annotation)[0] for row in get_args(get_args(audit_schema.AuditRow)[0])}


def tool(name: str, failed: bool = False) -> dict[str, Any]:
    return {
        "kind": "tool",
        "round": 1,
        "durationMs": 12.0,
        "toolName": name,
        "toolIsError": failed,
        "toolOutcome": "failed" if failed else "ok",
    }


LLM = {"kind": "llm", "round": 1, "durationMs": 100.0}


def at(minute: int) -> str:
    return f"2026-11-03T10:{minute:02d}:00Z"


def varied() -> list[dict[str, Any]]:
    """A card left undecided by a new message, a failed turn, its retry writing a record
    partly, an edit that cuts both away, the edited message's turn with a failed call."""
    return [
        {"type": "conversation_started", "at": at(0), "kind": "chat", "owner": 7},
        {"type": "user_message", "at": at(1), "message": 1, "text": "Titel?", "page": 5, "skill": None},
        {
            "type": "segment_returned",
            "at": at(2),
            "segment": "a/1",
            "run": "a",
            "trigger": "turn",
            "outcome": "awaiting_approval",
            "answer": "Vorschlag",
            "steps": [LLM, tool("get_page")],
            "pending": [{"toolName": "update_page_metadata", "table": "pages", "uid": 5, "fields": ["title"]}],
        },
        {"type": "user_message", "at": at(3), "message": 2, "text": "Doch nicht", "page": 5, "skill": None},
        {
            "type": "segment_returned",
            "at": at(4),
            "segment": "b/1",
            "run": "b",
            "trigger": "turn",
            "outcome": "failed",
            "answer": None,
            "steps": [LLM, tool("get_page", failed=True)],
        },
        {"type": "turn_retried", "at": at(5), "message": 2},
        {
            "type": "segment_returned",
            "at": at(6),
            "segment": "b/2",
            "run": "b",
            "trigger": "retry",
            "outcome": "completed",
            "answer": "Fertig",
            "steps": [
                LLM,
                tool("update_page_metadata"),
                {
                    "kind": "tool_write",
                    "round": 1,
                    "durationMs": 1.0,
                    "writeTargetTable": "pages",
                    "writeTargetUid": 5,
                    "writeCompleteness": "partial",
                },
            ],
        },
        {"type": "message_edited", "at": at(7), "message": 2, "text": "Doch"},
        {
            "type": "segment_returned",
            "at": at(8),
            "segment": "c/1",
            "run": "c",
            "trigger": "turn",
            "outcome": "completed",
            "answer": "Erledigt",
            "steps": [LLM, tool("get_page", failed=True), tool("get_page")],
        },
    ]


def alt_text() -> list[dict[str, Any]]:
    return [
        {"type": "conversation_started", "at": at(0), "kind": "alt_text", "owner": 7},
        {"type": "transcript_replaced", "at": at(1), "messages": [{"role": "assistant", "text": "Alt-Text gesetzt."}]},
    ]


def legacy() -> list[dict[str, Any]]:
    return [
        {"type": "conversation_started", "at": at(0), "kind": "chat", "owner": 7},
        {
            "type": "legacy_row",
            "at": at(1),
            "messages": [{"role": "user", "text": "SEO"}, {"role": "assistant", "text": "Ok."}],
            "card_outcomes": [
                {
                    "outcome": "declined",
                    "after": 1,
                    "tool": "update_page_metadata",
                    "table": "pages",
                    "uid": 5,
                    "fields": ["title"],
                }
            ],
        },
    ]


def tour(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(raw) for raw in (DATA / name).read_bytes().splitlines() if raw.strip()]


def post(server: Server, conversation: str, lines: list[dict[str, Any]]) -> None:
    body = b"".join(orjson.dumps(line | {"conversation": conversation}) + b"\n" for line in lines)
    response = server.client.post("/v1/lines", content=body, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text


def checked(adapter: TypeAdapter[Any], content: bytes) -> Any:
    """Returns `content` read strictly by the model, after checking the model writes it back
    as the server wrote it, byte for byte (no field reordered, coerced, added or dropped)."""
    value = adapter.validate_json(content, strict=True)
    assert adapter.dump_json(value, exclude_unset=True) == content  # unset: the turn's messages, unless asked for
    return value


@pytest.fixture(scope="module")
def stored(server: Server) -> list[str]:
    """The conversations of this module's store: the demo and Behalten tours, `varied`, an
    alt_text one, an imported legacy row, and the demo's start erased."""
    conversations = {
        unique("demo"): tour("demo_seo_tour.jsonl"),
        unique("behalten"): tour("behalten_tour.jsonl"),
        unique("varied"): varied(),
        unique("alt"): alt_text(),
        unique("legacy"): legacy(),
        unique("erased"): tour("demo_seo_tour.jsonl")[:3],
    }
    for conversation, lines in conversations.items():
        post(server, conversation, lines)
    erased = list(conversations)[-1]
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "erase", erased, "--yes"],
        cwd=ROOT,
        env=cli_env(**server.settings),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return list(conversations)


def test_every_read_of_every_conversation_is_its_model_byte_for_byte(server: Server, stored: list[str]) -> None:
    kinds: set[str] = set()
    readings: set[str | None] = set()
    for conversation in stored:
        for read, adapter in READS.items():
            response = server.client.get(f"/v1/conversations/{conversation}/{read}")
            assert (response.status_code, response.headers["content-type"]) == (200, "application/json"), response.text
            value = checked(adapter, response.content)
            if read == "audit":
                kinds |= {row.kind for row in value}
            if read == "activity":
                readings |= {entry.reading for segment in value for entry in segment.entries}
        replay = server.client.get(f"/v1/conversations/{conversation}/replay", params={"rules": "transcript-only"})
        assert checked(READS["replay"], replay.content).rules == "transcript-only"

    assert (
        kinds
        == KINDS
        == {
            "started",
            "message",
            "skill",
            "segment",
            "decision",
            "card_outcome",
            "answer",
            "undecided",
            "retry",
            "tour_ended",
            "edit",
            "cut",
            "transcript_replaced",
            "erased",
            "legacy_row",
        }
    )
    assert readings == {"ran", "failed", None}


def test_the_turn_with_its_messages_and_the_list_pages_are_their_models(server: Server, stored: list[str]) -> None:
    demo = stored[0]
    full = server.client.get(f"/v1/conversations/{demo}/turn", params={"messages": "full"})
    notes = checked(READS["turn"], full.content)
    assert [m.role for m in notes.messages[:2]] == ["system", "user"] and len(notes.notes) == 14

    pages, cursor = [], None
    while True:
        response = server.client.get("/v1/conversations", params={"limit": 4} | ({"cursor": cursor} if cursor else {}))
        page = checked(TypeAdapter(schemas.ConversationList), response.content)
        pages.append(page)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    listed = {c.conversation: c for page in pages for c in page.conversations}
    assert [len(page.conversations) for page in pages] == [4, 2]
    assert sorted(listed) == sorted(stored)
    assert (listed[demo].kind, listed[demo].messages, listed[demo].segments, listed[demo].events) == ("chat", 3, 8, 20)
    assert (listed[stored[3]].kind, listed[stored[-1]].erased, listed[demo].erased) == ("alt_text", True, False)


def test_the_usage_pages_are_their_model_and_the_demos_group_sums_its_lines(server: Server, stored: list[str]) -> None:
    from tests.application.test_usage import demo_sums

    pages, cursor = [], None
    while True:
        response = server.client.get("/v1/usage", params={"limit": 4} | ({"cursor": cursor} if cursor else {}))
        assert response.status_code == 200, response.text
        page = checked(TypeAdapter(schemas.UsageReport), response.content)
        pages.append(page)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    groups = {g.key: g for page in pages for g in page.groups}
    expected = demo_sums()
    demo = groups[stored[0]].model_dump(mode="json")

    assert {k: demo[k] for k in expected} == expected | {"first_at": "2026-10-28T09:00:25Z", "last_at": "2026-10-28T09:06:55Z"}
    assert set(stored[:3]) <= set(groups)  # the demo, Behalten and varied tours; the others hold no segment
    assert pages[0].total.segments == sum(g.segments for g in groups.values())
    bad = server.client.get("/v1/usage", params={"cursor": "x"})
    assert (bad.status_code, bad.json()["where"]) == (400, "query.cursor")
