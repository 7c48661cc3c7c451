"""The chat's whole path over HTTP, on a real server (SQLite, then PostgreSQL): every line of the
demo recorded one request at a time, the turn read, the audit; every error a problem; a decision
racing a new message ends as one of the CLI's orders."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.http.headers import fingerprint
from adapters.ingest.names import reduce_id
from tests.e2e.conftest import cli_env
from tests.http.conftest import MAX_BODY, Server, unique

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo_seo_tour.jsonl"
BEHALTEN = ROOT / "tests" / "data" / "behalten_tour.jsonl"
OPENAPI = ROOT / "docs" / "openapi.json"
PROBLEM_KEYS = {"type", "title", "status", "detail"}


def demo_lines(conversation: str = "conv-demo-seo") -> list[dict[str, Any]]:
    return [{**orjson.loads(raw), "conversation": conversation} for raw in DEMO.read_bytes().splitlines() if raw.strip()]


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    return b"\n".join(orjson.dumps(line) for line in lines) + b"\n"


def problem(response: httpx.Response, status: int, name: str) -> dict[str, Any]:
    """Returns the problem of `response` after checking its status, type and shape."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == f"urn:chatrecord:problem:{name}"
    assert PROBLEM_KEYS <= set(body) and body["status"] == status
    assert "Traceback" not in response.text
    return body


def events_of(server: Server, conversation: str) -> list[dict[str, Any]]:
    response = server.client.get(f"/v1/conversations/{conversation}/audit")
    return response.json() if response.status_code == 200 else []


@pytest.fixture(scope="module")
def demo() -> Chatrecord:
    """The demo stored in process, as `chatrecord demo` does."""
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.demo()
    return chatrecord


def test_the_demo_sent_line_by_line_gives_the_turn_chatrecord_demo_prints(server: Server, demo: Chatrecord) -> None:
    versions = []
    for line in demo_lines():
        response = server.client.post("/v1/lines", json=line)
        assert response.status_code == 200, response.text
        versions.append((response.json()["version"], response.headers["etag"]))

    turn = server.client.get("/v1/conversations/conv-demo-seo/turn", params={"messages": "full"})
    audit = server.client.get("/v1/conversations/conv-demo-seo/audit")
    replay = server.client.get("/v1/conversations/conv-demo-seo/replay", params={"at": 3})
    activity = server.client.get("/v1/conversations/conv-demo-seo/activity")

    expected = demo.turn_input("conv-demo-seo")
    body = turn.json()
    assert versions[-1] == (20, '"20"') and turn.headers["etag"] == '"20"'
    assert body["messages"] == expected.model_messages()
    assert [n["text"] for n in body["notes"]] == list(expected.notes) and len(body["notes"]) == 14
    assert {k: v for k, v in body.items() if k != "messages"} == demo.turn_notes("conv-demo-seo").to_json()
    assert audit.json() == demo.audit("conv-demo-seo", chain=True).to_json()
    assert replay.json() == demo.replay("conv-demo-seo", at=3).to_json()
    assert activity.json() == [s.model_dump(mode="json") for s in demo.activity("conv-demo-seo")]


def test_a_batch_is_stored_whole_a_repeat_returns_the_first_result(server: Server) -> None:
    conversation = unique()
    lines = demo_lines(conversation)

    first = server.client.post("/v1/lines", content=ndjson(lines), headers={"content-type": "application/x-ndjson"})
    again = server.client.post("/v1/lines", json=lines[2])

    assert (first.status_code, first.json()["appended"], first.json()["version"]) == (200, 20, 20)
    assert again.json()["repeated"] is True and again.json()["appended"] == 0
    assert again.json()["events"] == [{"type": "SegmentReturned", "version": 4}]


def test_a_body_after_a_byte_order_mark_is_read_as_chatrecord_ingest_reads_a_file(server: Server) -> None:
    """RFC 8259 lets a reader ignore a BOM; the CLI's ingest does, so the service does too
    (it refused it, a fresh user found: the same lines taken by one and not the other)."""
    conversation = unique()
    lines = demo_lines(conversation)

    batch = server.client.post(
        "/v1/lines", content=b"\xef\xbb\xbf" + ndjson(lines[:3]), headers={"content-type": "application/x-ndjson"}
    )
    one = server.client.post(
        "/v1/lines", content=b"\xef\xbb\xbf" + orjson.dumps(lines[3]), headers={"content-type": "application/json"}
    )
    inner = server.client.post(
        "/v1/lines",
        content=ndjson(lines[4:5]) + b"\xef\xbb\xbf" + ndjson(lines[5:6]),
        headers={"content-type": "application/x-ndjson"},
    )

    assert (batch.status_code, batch.json()["appended"], one.status_code, one.json()["version"]) == (200, 4, 200, 5)
    assert (inner.status_code, inner.json()["type"]) == (400, "urn:chatrecord:problem:unreadable-json")  # only before line 1
    assert len(events_of(server, conversation)) == 5


def test_pages_the_user_may_not_see_are_never_named(server: Server) -> None:
    conversation = unique()
    server.client.post("/v1/lines", content=ndjson(demo_lines(conversation)), headers={"content-type": "application/x-ndjson"})

    hidden = server.client.get(f"/v1/conversations/{conversation}/turn", params={"hidden_page": 42, "messages": "full"})
    only_7 = server.client.get(f"/v1/conversations/{conversation}/turn", params=[("visible_page", 7), ("visible_page", 8)])

    assert hidden.status_code == only_7.status_code == 200
    # The conversation id is random hex and may hold "42" itself: it is taken out before the check.
    shown = [json.dumps(r.json()).replace(conversation, "CONVERSATION") for r in (hidden, only_7)]
    assert "42" not in shown[0] and "42" not in shown[1]
    assert "a page not named here" in hidden.text


def test_if_match_stores_only_on_the_version_it_names(server: Server) -> None:
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    server.client.post("/v1/lines", json=started, headers={"If-Match": '"0"'})

    stale = server.client.post("/v1/lines", json=message, headers={"If-Match": '"0"'})
    malformed = server.client.post("/v1/lines", json=message, headers={"If-Match": "7"})
    fresh = server.client.post("/v1/lines", json=message, headers={"If-Match": '"1"'})

    retried = server.client.post("/v1/lines", json=message, headers={"If-Match": '"1"'})  # its answer was lost

    assert problem(stale, 412, "version-mismatch")["actual"] == 1
    problem(malformed, 400, "bad-request")
    assert (fresh.status_code, fresh.headers["etag"]) == (200, '"3"')  # SkillLoaded and UserMessagePosted
    assert (retried.status_code, retried.json()["repeated"], retried.headers["etag"]) == (200, True, '"3"')
    assert [row["kind"] for row in events_of(server, conversation)] == ["started", "skill", "message"]


def test_if_match_is_strong_bounded_and_json_is_utf_8(server: Server) -> None:
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    server.client.post("/v1/lines", json=started)

    weak = server.client.post("/v1/lines", json=message, headers={"If-Match": 'W/"1"'})
    huge = server.client.post("/v1/lines", json=message, headers={"If-Match": '"99999999999999999999"'})
    latin = server.client.post(
        "/v1/lines", content=json.dumps(message).encode(), headers={"content-type": "application/json; charset=latin-1"}
    )

    assert problem(weak, 412, "version-mismatch")["detail"].startswith("If-Match compares ETags strongly")
    assert problem(huge, 400, "bad-request")["detail"] == "If-Match names a version of at most 2147483647"
    assert "not charset latin-1" in problem(latin, 415, "unsupported-media-type")["detail"]
    assert [row["kind"] for row in events_of(server, conversation)] == ["started"]  # nothing of them stored


def test_an_idempotency_key_returns_the_first_response_and_refuses_another_body(server: Server) -> None:
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    key = {"Idempotency-Key": unique("key")}
    server.client.post("/v1/lines", json=started)

    first = server.client.post("/v1/lines", json=message, headers=key)
    retried = server.client.post("/v1/lines", json=message, headers=key)
    other = server.client.post("/v1/lines", json={**message, "text": "other"}, headers=key)

    assert first.json()["appended"] == 2 and retried.json() == first.json()
    assert retried.headers["idempotent-replayed"] == "true" and retried.headers["etag"] == '"3"'
    problem(other, 422, "idempotency-key-reused")
    assert len(events_of(server, conversation)) == 3


def test_an_idempotency_key_error_names_the_part_that_differs_and_if_match_is_no_part(server: Server) -> None:
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    key = {"Idempotency-Key": unique("key")}
    body, as_json = json.dumps(started).encode(), {"Content-Type": "application/json"}
    first = server.client.post("/v1/lines", content=body, headers=key | as_json | {"If-Match": '"0"'})
    without_if_match = server.client.post("/v1/lines", content=body, headers=key | as_json)
    as_ndjson = server.client.post("/v1/lines", content=body, headers=key | {"Content-Type": "application/x-ndjson"})
    other = server.client.post("/v1/lines", json=message, headers=key)

    assert without_if_match.status_code == 200 and without_if_match.json() == first.json()
    assert without_if_match.headers["idempotent-replayed"] == "true"
    assert problem(as_ndjson, 422, "idempotency-key-reused")["differs"] == "another Content-Type"
    assert problem(other, 422, "idempotency-key-reused")["differs"] == "another body"


def test_a_key_sent_again_as_one_json_line_for_a_batch_is_told_the_content_type_differs(server: Server) -> None:
    """The key is checked before the body is read: a batch sent again under its key as
    `application/json` (which no batch of two lines is) gets 422 naming the Content-Type, not a
    400 for its second line, and stores nothing more."""
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    key = {"Idempotency-Key": unique("key")}
    body = b"\n".join(json.dumps(line).encode() for line in (started, message))
    first = server.client.post("/v1/lines", content=body, headers=key | {"Content-Type": "application/x-ndjson"})
    stored = len(events_of(server, conversation))
    as_json = server.client.post("/v1/lines", content=body, headers=key | {"Content-Type": "application/json"})
    unkeyed = server.client.post("/v1/lines", content=body, headers={"Content-Type": "application/json"})

    assert first.status_code == 200 and first.headers["etag"] == f'"{stored}"' and stored >= 2
    assert problem(as_json, 422, "idempotency-key-reused")["differs"] == "another Content-Type"
    assert problem(unkeyed, 400, "unreadable-json")["line"] == 1
    assert len(events_of(server, conversation)) == stored


def test_requests_racing_with_one_key_and_other_bodies_store_one_line(server: Server) -> None:
    """The key is reserved before anything is recorded: of eight requests sent at once with one
    key and eight bodies, one stores its message; the others are 422 (another body) and store
    nothing."""
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    server.client.post("/v1/lines", json=started)
    key, barrier, answers = {"Idempotency-Key": unique("key")}, threading.Barrier(8), {}

    def post(n: int) -> None:
        with httpx.Client(base_url=server.url, headers=server.client.headers, timeout=60) as client:
            barrier.wait()
            answers[n] = client.post("/v1/lines", json={**message, "text": f"m{n + 1}"}, headers=key)

    threads = [threading.Thread(target=post, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = sorted(answer.status_code for answer in answers.values())
    [winner] = [n for n, answer in answers.items() if answer.status_code == 200]
    messages = [row for row in events_of(server, conversation) if row["kind"] == "message"]
    assert statuses == [200] + [422] * 7
    assert all(problem(answers[n], 422, "idempotency-key-reused") for n in answers if n != winner)
    assert [row["message"] for row in messages] == [1]  # one of the eight, once


def test_a_key_in_flight_in_another_process_is_a_409_and_a_failed_request_frees_its_key(server: Server) -> None:
    """A reservation made through the store by another process (here: this test's own store)
    holds the key: the same request gets 409 request-in-progress, another body 422, and neither
    stores anything; once it is released the request runs. A request refused after reserving
    (a bad line) keeps nothing, so its retry runs."""
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    server.client.post("/v1/lines", json=started)
    key = unique("key")
    store = open_store(server.settings)
    try:
        keys = store.idempotency_keys
        reserved, mine = keys.reserve(key, fingerprint("application/json", orjson.dumps(message)))
        same = server.client.post(
            "/v1/lines", content=orjson.dumps(message), headers={"Idempotency-Key": key, "Content-Type": "application/json"}
        )
        other = server.client.post("/v1/lines", json={**message, "text": "other"}, headers={"Idempotency-Key": key})
        stored_meanwhile = len(events_of(server, conversation))
        keys.release(key, reserved)
    finally:
        store.close()
    bad_key = {"Idempotency-Key": unique("key")}
    bad = server.client.post("/v1/lines", json={**message, "page": "forty-two"}, headers=bad_key)
    after = server.client.post(
        "/v1/lines", content=orjson.dumps(message), headers={"Idempotency-Key": key, "Content-Type": "application/json"}
    )
    fixed = server.client.post("/v1/lines", json={**message, "message": 2, "text": "fixed"}, headers=bad_key)

    assert mine and same.headers["retry-after"] == "1"
    assert "still being processed" in problem(same, 409, "request-in-progress")["detail"]
    problem(other, 422, "idempotency-key-reused")
    assert stored_meanwhile == 1  # only the conversation's start
    problem(bad, 422, "bad-line")
    assert (after.status_code, after.json()["appended"], "idempotent-replayed" in after.headers) == (200, 2, False)
    assert (fixed.status_code, fixed.json()["appended"]) == (200, 1)


def test_if_match_takes_a_list_of_etags_and_a_star(server: Server) -> None:
    conversation = unique()
    [started, message, answered, *_] = demo_lines(conversation)
    star_before = server.client.post("/v1/lines", json=started, headers={"If-Match": "*"})
    server.client.post("/v1/lines", json=started)
    listed = server.client.post("/v1/lines", json=message, headers={"If-Match": '"7", "1", W/"2"'})
    star = server.client.post("/v1/lines", json=answered, headers={"If-Match": "*"})
    stale = server.client.post("/v1/lines", json={**message, "text": "x"}, headers={"If-Match": '"1", "2"'})

    problem(star_before, 412, "version-mismatch")
    assert (listed.status_code, listed.headers["etag"]) == (200, '"3"')
    assert star.status_code == 200 and star.headers["etag"] == f'"{star.json()["version"]}"'
    problem(stale, 412, "version-mismatch")


def test_a_line_nested_past_the_json_reader_s_depth_is_a_bad_line_as_one_65_levels_deep(server: Server) -> None:
    """Found by a fresh user: 600 levels were "nested more than 64 levels", 100,000 "not valid JSON (depth limit
    exceeded …)" (orjson reads no more than 1,024 levels)."""
    [started, *_] = demo_lines(unique())
    answers = []
    for levels in (600, 20_000):  # past 1,024: orjson refuses it; 40 kB, within the test server's body limit
        deep = (b"[" * levels + b"]" * levels).join(orjson.dumps({**started, "zz": "@"}).split(b'"@"'))
        answers.append(
            problem(server.client.post("/v1/lines", content=deep, headers={"content-type": "application/json"}), 422, "bad-line")
        )
    for answer in answers:
        assert answer["detail"] == (
            'request: line 1, (a dropped key): is nested more than 64 levels deep, the most a line may be (README, "Input limits")'
        )


def test_every_error_is_a_problem_and_stores_nothing(server: Server) -> None:
    conversation = unique()
    [started, _, _, _, _, decided, *_] = demo_lines(conversation)
    bare = httpx.Client(base_url=server.url, timeout=30)

    problem(bare.get(f"/v1/conversations/{conversation}/turn"), 401, "unauthorized")
    problem(bare.post("/v1/lines", json=started, headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
    spaced = {"Authorization": "Bearer  " + server.client.headers["authorization"].partition(" ")[2]}
    problem(bare.post("/v1/lines", json=started, headers=spaced), 401, "unauthorized")  # the token as sent, exactly
    problem(
        server.client.post("/v1/lines", content=b'{"type": ', headers={"content-type": "application/json"}),
        400,
        "unreadable-json",
    )
    lines = ndjson([started]) + b"{nope\n"
    assert (
        problem(
            server.client.post("/v1/lines", content=lines, headers={"content-type": "application/x-ndjson"}),
            400,
            "unreadable-json",
        )["line"]
        == 2
    )
    bad = problem(server.client.post("/v1/lines", json={**started, "owner": "x"}), 422, "bad-line")
    assert (bad["detail"], bad["field"]) == ("request: line 1, owner: expected a whole number, got a string", "owner")
    refused = problem(
        server.client.post("/v1/lines", content=ndjson([started, decided]), headers={"content-type": "application/x-ndjson"}),
        409,
        "refused-line",
    )
    assert (refused["rule"], refused["field"], refused["detail"], refused["waits_for"]) == (
        "NoCardWaiting",
        "segment",
        "request: line 2, segment: refused: a card decision names a segment that has no card waiting: the line "
        f"came too early: it waits for segment {decided['segment']}; nothing of it was stored, send it again later",
        f"segment {decided['segment']}",
    )
    problem(server.client.post("/v1/lines", content=b"x" * (MAX_BODY + 1)), 413, "body-too-large")
    problem(server.client.post("/v1/lines", content=b"<a/>", headers={"content-type": "text/xml"}), 415, "unsupported-media-type")
    unknown = problem(server.client.get(f"/v1/conversations/{conversation}/audit"), 404, "unknown-conversation")
    assert "stored" not in unknown["detail"]
    problem(server.client.get(f"/v1/conversations/{conversation}/replay", params={"at": "x"}), 400, "bad-request")
    problem(server.client.get("/v1/nowhere"), 404, "not-found")
    assert events_of(server, conversation) == []

    server.client.post("/v1/lines", json=started)
    restarted = problem(server.client.post("/v1/lines", json={**started, "owner": 9}), 409, "refused-line")
    assert restarted["rule"] == "ConversationAlreadyStarted" and "owner" not in restarted["detail"]  # no stored owner
    early = server.client.get(f"/v1/conversations/{conversation}/turn")  # the next model call's notes: none yet
    assert early.status_code == 200 and early.json()["notes"] == [] and early.json()["version"] == 1
    problem(server.client.get(f"/v1/conversations/{conversation}/turn?messages=full"), 409, "no-turn")
    problem(server.client.get(f"/v1/conversations/{conversation}/replay", params={"at": 5}), 404, "no-such-turn")


def test_a_line_out_of_order_says_whether_it_came_too_early_or_too_late(server: Server) -> None:
    conversation = unique()
    [started, message, *_] = demo_lines(conversation)
    server.client.post("/v1/lines", json=started)  # version 1

    early = problem(server.client.post("/v1/lines", json={**message, "follows": 3}), 409, "refused-line")
    late = problem(server.client.post("/v1/lines", json={**message, "follows": 0}), 409, "refused-line")

    assert {k: early[k] for k in ("rule", "field", "follows", "actual", "early", "detail")} == {
        "rule": "LineOutOfOrder",
        "field": "follows",
        "follows": 3,
        "actual": 1,
        "early": True,
        "detail": "request: line 1, follows: refused: the line came too early: it waits for the lines before it "
        "(the conversation is at version 1; the line follows version 3); nothing of it was stored",
    }
    assert (late["follows"], late["actual"], late["early"]) == (0, 1, False)
    assert late["detail"].startswith(
        "request: line 1, follows: refused: the line came too late: it was written for "
        "an earlier state (the conversation is at version 1; the line follows version 0)"
    )
    assert [row["kind"] for row in events_of(server, conversation)] == ["started"]  # nothing of them stored


def test_a_line_that_came_too_early_is_sent_again_later_and_a_refused_one_is_final(server: Server) -> None:
    """Issue 35, item 2: a user message past a gap waits for the message before it; the 409
    says so with Retry-After, and a refusal that delivering again cannot change has none."""
    conversation = unique()
    lines = demo_lines(conversation)
    started, last = lines[0], lines[-1]
    assert (last["type"], last["message"]) == ("user_message", 3)
    server.client.post("/v1/lines", json=started)

    early = server.client.post("/v1/lines", json=last)
    final = server.client.post("/v1/lines", json={**started, "owner": 9})

    body = problem(early, 409, "refused-line")
    assert early.headers["retry-after"] == "1"
    assert {k: body[k] for k in ("rule", "field", "early", "waits_for")} == {
        "rule": "MessageTooEarly",
        "field": "message",
        "early": True,
        "waits_for": "message 2",
    }
    assert problem(final, 409, "refused-line")["rule"] == "ConversationAlreadyStarted"
    assert "retry-after" not in final.headers and "early" not in final.json()
    assert [row["kind"] for row in events_of(server, conversation)] == ["started"]  # nothing of it stored


def test_a_continuation_sent_before_the_decisions_before_it_waits_for_its_own_and_the_queue_drains(server: Server) -> None:
    """F5: the Behalten tour's last continuation (segment /4) sent right after card /1's decision
    was stored as /1's continuation, and segments /2 and /3 then got a too-early 409 for ever.
    It waits for its own decision now; the lines sent again in order are all stored."""
    conversation = unique()
    lines = [{**json.loads(line), "conversation": conversation} for line in BEHALTEN.read_text().splitlines()]
    for line in lines[:4]:
        assert server.client.post("/v1/lines", json=line).status_code == 200

    early = server.client.post("/v1/lines", json=lines[8])

    body = problem(early, 409, "refused-line")
    assert early.headers["retry-after"] == "1"
    assert {k: body[k] for k in ("rule", "early", "waits_for")} == {
        "rule": "ContinuationBeforeDecision",
        "early": True,
        "waits_for": "card_decided of run 7c1d0b5e-2f4a-4b8e-9c3d-5a6b7c8d9e01 paused at round 3",
    }
    assert [server.client.post("/v1/lines", json=line).status_code for line in lines[4:]] == [200] * 7
    in_order = unique()
    for line in lines:
        assert server.client.post("/v1/lines", json={**line, "conversation": in_order}).status_code == 200
    rows, in_order_rows = events_of(server, conversation), events_of(server, in_order)
    assert len(rows) == 15
    assert [{**row, "conversation": None} for row in rows] == [{**row, "conversation": None} for row in in_order_rows]


def expected_orders() -> dict[str, tuple[list[str], list[int]]]:
    """The event kinds and statuses of the decision and the new message, in each order, as
    the CLI (one line at a time) stores them."""
    out = {}
    for order in ("decision first", "message first"):
        chatrecord = Chatrecord(open_store(memory=True))
        lines = demo_lines("c")
        chatrecord.ingest([orjson.dumps(line) for line in lines[:5]], "setup")
        decision, message = lines[5], {**lines[-1], "message": 3}
        sent = [decision, message] if order == "decision first" else [message, decision]
        statuses = []
        for line in sent:
            report = chatrecord.ingest([orjson.dumps(line)], "x")
            statuses.append(409 if report.stopped else 200)
        if order == "message first":
            statuses.reverse()  # statuses in the order (decision, message)
        kinds = [row.kind for row in chatrecord.audit("c").rows]
        out[order] = (kinds, statuses)
    return out


def test_a_decision_racing_a_new_message_ends_as_one_of_the_clis_orders(server: Server) -> None:
    orders = expected_orders()
    assert orders["decision first"] != orders["message first"]
    seen = set()
    for _ in range(4):
        conversation = unique("race")
        lines = demo_lines(conversation)
        server.client.post("/v1/lines", content=ndjson(lines[:5]), headers={"content-type": "application/x-ndjson"})
        decision, message = lines[5], {**lines[-1], "message": 3}
        barrier = threading.Barrier(2)
        statuses: dict[int, int] = {}

        def send(i: int, line: dict[str, Any], barrier: threading.Barrier = barrier, statuses: dict[int, int] = statuses) -> None:
            barrier.wait()
            statuses[i] = server.client.post("/v1/lines", json=line).status_code

        threads = [threading.Thread(target=send, args=(i, line)) for i, line in enumerate((decision, message))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        kinds = [row["kind"] for row in events_of(server, conversation)]
        outcome = (kinds, [statuses[0], statuses[1]])
        assert outcome in orders.values()
        seen.add(next(name for name, value in orders.items() if value == outcome))
    assert seen  # which orders the race produced varies; each is one of the CLI's


def test_healthz_needs_no_token_and_the_committed_openapi_is_the_served_one(server: Server) -> None:
    health = httpx.get(f"{server.url}/v1/healthz")
    served = httpx.get(f"{server.url}/openapi.json").json()

    assert health.json()["status"] == "ok"
    assert served == json.loads(OPENAPI.read_text(encoding="utf-8")), (
        "docs/openapi.json drifted; regenerate: python -m scripts.export_openapi > docs/openapi.json"
    )


def test_a_store_that_cannot_be_used_is_a_503_that_does_not_show_the_stores_settings() -> None:
    from adapters.backends.settings import StoreUnusable
    from adapters.http.problems import from_error

    problem = from_error(StoreUnusable("the store (PostgreSQL u@db.internal:5432/chat) cannot be used: refused"))

    assert (problem.status, problem.name, problem.detail, problem.headers) == (
        503,
        "store-unavailable",
        "the store cannot be used now; try again later",
        {"Retry-After": "5"},
    )


def test_conversations_lists_the_newest_first_and_export_gives_the_lines_back(server: Server) -> None:
    conversation = unique("chat ")  # a space: stored reduced, listed and exported under its stored form
    lines = demo_lines(conversation)
    server.client.post("/v1/lines", content=ndjson(lines), headers={"content-type": "application/x-ndjson"})

    listed = server.client.get("/v1/conversations", params={"limit": 1})
    every = server.client.get("/v1/conversations", params={"limit": 1000}).json()["conversations"]
    stored = reduce_id(conversation)
    assert stored in [c["conversation"] for c in every]  # by the time of its last line, among the others'
    times = [datetime.fromisoformat(c["last_at"]) for c in every]
    assert times == sorted(times, reverse=True)
    assert (listed.json()["next_cursor"] is None) == (len(every) == 1)
    exported = server.client.get(f"/v1/conversations/{stored}/export")
    cut = server.client.get(f"/v1/conversations/{stored}/export", params={"upto": 1})
    bad = server.client.get("/v1/conversations", params={"cursor": "nonsense"})
    past = server.client.get(f"/v1/conversations/{stored}/export", params={"upto": 99})

    assert (listed.status_code, len(listed.json()["conversations"])) == (200, 1)
    assert stored.startswith("chat") and ":h" in stored
    assert exported.headers["content-type"] == "application/x-ndjson"
    got = [orjson.loads(x) for x in exported.content.splitlines()]
    assert got == _as_exported(lines)
    assert [x["type"] for x in orjson.loads(b"[" + b",".join(cut.content.splitlines()) + b"]")] == [
        "conversation_started",
        "user_message",
        "segment_returned",
    ]
    assert problem(bad, 400, "bad-request")["detail"].startswith("'nonsense' is not a cursor")
    assert problem(past, 404, "no-such-turn")["detail"] == (
        "upto=99: no user message 99; the conversation's user messages are 1, 2, 3"
    )


def test_an_erased_conversations_export_says_so_in_its_header(server: Server) -> None:
    conversation = unique("conv-erased")
    server.client.post(
        "/v1/lines", content=ndjson(demo_lines(conversation)[:2]), headers={"content-type": "application/x-ndjson"}
    )
    before = server.client.get(f"/v1/conversations/{conversation}/export")
    erased = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "erase", conversation, "--yes"],
        cwd=ROOT,
        env=cli_env(**server.settings),
        capture_output=True,
        text=True,
        check=False,
    )
    after = server.client.get(f"/v1/conversations/{conversation}/export")

    assert erased.returncode == 0, erased.stdout + erased.stderr
    assert (before.status_code, before.headers.get("chatrecord-erased")) == (200, None)
    assert orjson.loads(before.content.splitlines()[1])["text"] == "SEO optimieren"
    assert (after.status_code, after.headers["chatrecord-erased"]) == (200, "true")
    assert orjson.loads(after.content.splitlines()[1])["text"] == "[erased]"
    documented = orjson.loads(OPENAPI.read_bytes())["paths"]["/v1/conversations/{conversation}/export"]["get"]
    assert "Chatrecord-Erased" in documented["responses"]["200"]["headers"]


def _as_exported(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The demo's lines as export writes them: through the store's facts."""
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.ingest([orjson.dumps(x) for x in lines], "demo")
    return list(chatrecord.export(lines[0]["conversation"]).lines)


def test_an_append_to_a_broken_chain_is_a_409_naming_the_broken_link() -> None:
    from uuid import UUID

    from adapters.http.problems import from_error
    from adapters.store.chain import ChainBroken

    key = UUID("5d91b7e3-ea14-590f-bbd7-a5f872bc7e3d")
    inserted = from_error(
        ChainBroken(f"conversation {key}: the hash chain is broken at version 21 (inserted)", key, 21, "inserted")
    )
    unchained = from_error(ChainBroken(f"conversation {key} was stored before the hash chain", key, 1, "unchained"))

    assert (inserted.status, inserted.name, inserted.members) == (409, "chain-broken", {"version": 21, "problem": "inserted"})
    assert inserted.detail == (
        "the conversation's hash chain is broken at version 21 (inserted); nothing was appended; "
        "an operator runs chatrecord verify"
    )
    assert unchained.detail.endswith("an operator runs chatrecord verify --upgrade")
