"""The conversation page's tools in process, on the memory store: the jump box, the events as
stored, the rule sets compared turn by turn, two turns compared, and the downloads a signed-in
browser follows (audit, export, trace, verify) (issue 39 item 4)."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.http.app import HttpSettings, create_app
from tests.e2e.conftest import DEMO

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

BEHALTEN = DEMO.parent / "behalten_tour.jsonl"


def long_lines(conversation: str, messages: int) -> list[dict[str, object]]:
    """Returns a chat of `messages` user messages a minute apart from 08:00, each answered by one
    completed segment (`{conversation}-run-N/1`) 30 s later that ran `get_page` for 12.5 ms."""
    began = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    lines: list[dict[str, object]] = [
        {"type": "conversation_started", "at": "2026-11-01T08:00:00Z", "kind": "chat", "owner": 9, "conversation": conversation}
    ]
    for n in range(1, messages + 1):
        at = (began + timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M")
        lines.append(
            {"type": "user_message", "at": f"{at}:00Z", "message": n, "text": f"Frage {n}", "page": 7, "skill": None}
            | {"conversation": conversation}
        )
        lines.append(
            {
                "type": "segment_returned",
                "at": f"{at}:30Z",
                "segment": f"{conversation}-run-{n}/1",
                "run": f"{conversation}-run-{n}",
                "trigger": "turn",
                "outcome": "completed",
                "answer": f"Antwort {n}",
                "steps": [
                    {"kind": "llm", "round": 1, "durationMs": 900.0, "content": "", "promptTokens": 100, "completionTokens": 10},
                    {"kind": "tool", "round": 1, "durationMs": 12.5, "toolName": "get_page", "toolIsError": False},
                ],
                "conversation": conversation,
            }
        )
    return lines


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    chatrecord.ingest(BEHALTEN.read_bytes().splitlines(), BEHALTEN.name)
    chatrecord.ingest([json.dumps(line).encode() for line in long_lines("conv-long", 25)], "long")
    app = create_app(lambda: chatrecord, HttpSettings(token=None))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield client


def test_the_jump_box_sends_the_browser_to_the_page_and_anchor_of_a_message_a_segment_or_an_event(client: TestClient) -> None:
    message = client.get("/ui/conversations/conv-long", params={"jump": "message 2"})
    segment = client.get("/ui/conversations/conv-long", params={"jump": "conv-long-run-3/1"})
    event = client.get("/ui/conversations/conv-long", params={"jump": "e51"})
    newest = client.get("/ui/conversations/conv-long", params={"jump": "25"})
    missing = client.get("/ui/conversations/conv-long", params={"jump": "nothing-here"})

    # message 2 starts at event 4; the page ending before message 3 (event 6) shows it
    assert message.headers["location"] == "/ui/conversations/conv-long?before=6#message-2"
    assert segment.headers["location"] == "/ui/conversations/conv-long?before=8#e-7"
    assert event.headers["location"] == "/ui/conversations/conv-long#e-51"  # the last turn's segment
    assert newest.headers["location"] == "/ui/conversations/conv-long#message-25"
    assert missing.status_code == 404 and "no user message, segment or event &#39;nothing-here&#39;" in missing.text
    older = client.get("/ui/conversations/conv-long?before=6")
    assert 'id="message-2"' in older.text and 'id="e-5"' in older.text and "User message 2</h3>" in older.text


def test_each_segment_shows_the_assistants_answer_its_call_times_and_usage(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-long").text

    assert '<span class="role">assistant</span> Antwort 25</p>' in page
    assert '<span class="time-of"><code>get_page</code> 12 ms</span>' in page  # 12.5 ms, shown whole
    assert "usage: 912 ms, 1 model call, 100 in / 10 out tokens, cost unknown" in page
    assert "Antwort 1<" not in page  # the first turn is not on the newest page (20 turns)


def test_the_chats_labels_are_quoted_and_a_decline_sits_beside_the_card_it_decides(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-behalten").text

    waiting = re.findall(r'<p class="waiting">(.*?)</p>', page)
    assert len(waiting) == 3 and all('<q class="act decision" lang="de">Von dir abgelehnt: Behalten</q>' in w for w in waiting)
    assert '<q class="act ran" lang="de">chat_set_progress ausgeführt</q>' in page
    assert "approval after the card declined" in page
    assert ', the chat\'s answer <q lang="de">Behalten</q>, on the card of <code>7c1d0b5e…/1</code>' in page
    assert "into message 2 (assistant)" in page and "message #" not in page  # counted from 1


def test_the_overview_is_inline_and_its_marks_link_to_their_events(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-demo-seo").text

    assert "<img" not in page and '<svg xmlns="http://www.w3.org/2000/svg" class="overview"' in page
    marks = re.findall(r'<a href="\?jump=e(\d+)" class="mark"><rect class="(\w+)"[^>]*><title>([^<]*)</title>', page)
    assert len(marks) == 16 and marks[0][0] == "3" and marks[0][1] == "info"
    assert all(title for _, _, title in marks)


def test_the_events_as_stored_show_each_hash_over_the_one_before_and_the_texts_sealed(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-demo-seo/events", params={"from": 3}).text

    hashes = re.findall(
        r'hash <code class="hash">([0-9a-f]{64})</code> over the hash before, <code class="previous">([0-9a-f]{64})</code>', page
    )
    assert len(hashes) == 20
    assert hashes[0][1] == "0" * 64 and all(hashes[i][1] == hashes[i - 1][0] for i in range(1, 20))
    assert "Events 1–20 of 20, as stored" in page and 'id="raw-3"' in page
    assert "SEO optimieren" not in page and "aesgcm" in page  # the user's text as the store holds it: sealed


def test_the_events_as_stored_are_paged_by_versions(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-long/events", params={"from": 60}).text

    assert "Events 51–51 of 51, as stored" in page and page.count('<li class="raw-event"') == 1
    assert 'href="/ui/conversations/conv-long/events?from=1"' in page  # the page before


def test_the_rule_sets_compared_name_each_turns_dropped_notes_and_page_line(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-demo-seo/rules", params={"other": "transcript-only"}).text

    rows = re.findall(r'<tr class="turn-diff( same)?" id="diff-(\d)">(.*?)</tr>', page, re.S)
    assert [(same, index) for same, index, _ in rows] == [(" same", "0"), ("", "1")]
    assert rows[1][2].count('<li class="note"><del>') == 14
    assert "<del>No page is selected now." in rows[1][2] and "<br>No page is selected.</td>" in rows[1][2]
    assert "Turns 1–2, oldest first" in page


def test_two_turns_compared_count_the_messages_appended_and_the_notes_added(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-demo-seo/compare", params={"first": 1, "second": 3}).text
    missing = client.get("/ui/conversations/conv-demo-seo/compare", params={"first": 2, "second": 3})

    assert '<p id="notes-count">14 added, 0 moved, 0 dropped.</p>' in page
    assert "1 message kept, 4 appended." in page and "was ist hier passiert?" in page
    assert '<p id="record-count">8 entries new or changed, 0 dropped.</p>' in page
    assert missing.status_code == 404 and "turns start at messages 1, 3" in missing.text


def test_the_downloads_answer_a_browsers_session_as_the_cli_does(client: TestClient) -> None:
    audit = client.get("/ui/conversations/conv-demo-seo/audit.json")
    export = client.get("/ui/conversations/conv-demo-seo/export.jsonl")
    trace = client.get("/ui/conversations/conv-demo-seo/trace.json")
    verify = client.get("/ui/conversations/conv-demo-seo/chain", params={"full": 1})

    rows = audit.json()
    assert rows[0]["kind"] == "started" and sum(r["kind"] == "segment" for r in rows) == 8
    assert len(export.text.splitlines()) == len(DEMO.read_text(encoding="utf-8").splitlines())
    assert export.headers["content-type"] == "text/plain; charset=utf-8"  # shown in the browser
    spans = [s for r in trace.json()["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert sum(s["name"].startswith("invoke_agent") for s in spans) == 8
    assert "Womit sollen wir beginnen?" not in trace.text  # no texts in the trace
    assert "✔ Chain verified: 20 events" in verify.text
    page = client.get("/ui/conversations/conv-demo-seo").text
    for name in ("audit.json", "export.jsonl", "trace.json", "chain?full=1"):
        assert f'href="/ui/conversations/conv-demo-seo/{name}"' in page
