"""docs/openapi.json and the server agree where a client written from the document alone (or
Schemathesis's coverage phase) finds an edge (issue 35, item 6): an empty optional header is one
not sent; a time in RFC 3339's lower-case form is read; `If-Match: *` on a conversation not
started says so; every problem member is typed; a note's place is given in UTF-8 bytes too. On a
real server, each backend."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from adapters.api import DEMO_CONVERSATION, Chatrecord, PlacedNote, apply_notes
from adapters.bootstrap import open_store
from tests.http.conftest import MAX_BODY, Server, unique
from tests.http.test_http import OPENAPI, demo_lines, problem

READS = ("turn", "audit", "activity", "replay", "export")


def started(server: Server) -> tuple[str, list[dict[str, Any]]]:
    """Records a demo conversation's first two lines; returns its id and all its lines."""
    conversation = unique()
    lines = demo_lines(conversation)
    for line in lines[:2]:
        assert server.client.post("/v1/lines", json=line).status_code == 200
    return conversation, lines


def test_an_empty_optional_header_is_one_not_sent(server: Server) -> None:
    conversation, lines = started(server)
    for read in READS:
        path = f"/v1/conversations/{conversation}/{read}"
        plain, empty = server.client.get(path), server.client.get(path, headers={"Chatrecord-Read-After": ""})
        assert (empty.status_code, empty.content) == (200, plain.content), (read, empty.text)
    listed = server.client.get("/v1/conversations", headers={"Chatrecord-Read-After": ""})
    assert listed.status_code == 200, listed.text
    assert conversation in [c["conversation"] for c in listed.json()["conversations"]]
    # a query parameter the operation does not take is refused: a misspelt one would be ignored
    misspelt = server.client.get(f"/v1/conversations/{conversation}/turn", params={"hidden_pages": 42})
    assert problem(misspelt, 400, "bad-request")["where"] == "query.hidden_pages"
    assert misspelt.json()["detail"] == (
        "hidden_pages is not a query parameter of this operation; it takes hidden_page, messages, visible_page"
    )

    posted = server.client.post("/v1/lines", json=lines[2], headers={"If-Match": "", "Idempotency-Key": ""})
    assert (posted.status_code, posted.json()["appended"], "idempotent-replayed" in posted.headers) == (200, 1, False)
    again = server.client.post("/v1/lines", json=lines[2], headers={"If-Match": "", "Idempotency-Key": ""})
    assert (again.status_code, again.json()["repeated"], "idempotent-replayed" in again.headers) == (200, True, False)
    # POST /v1/lines takes none (its route skips FastAPI's dependency solving, not the check): nothing stored
    queried = server.client.post("/v1/lines", params={"follows": 3}, json=lines[3])
    assert problem(queried, 400, "bad-request")["where"] == "query.follows"
    assert queried.json()["detail"] == "follows is not a query parameter of this operation; it takes none"
    assert server.client.post("/v1/lines", json=lines[3]).json()["repeated"] is False
    # a value that is not empty is still read
    bad = server.client.get(f"/v1/conversations/{conversation}/turn", headers={"Chatrecord-Read-After": "yesterday"})
    assert problem(bad, 400, "bad-request")["where"] == "header.Chatrecord-Read-After"


def test_a_time_in_rfc_3339_lower_case_is_read(server: Server) -> None:
    conversation = unique()
    [first, *_] = demo_lines(conversation)
    stored = server.client.post("/v1/lines", json={**first, "at": "2026-10-28t09:00:00z"})
    assert stored.status_code == 200, stored.text

    def listed(since: str) -> list[str]:
        response = server.client.get("/v1/conversations", params={"since": since, "limit": 1000})
        assert response.status_code == 200, response.text
        return [c["conversation"] for c in response.json()["conversations"]]

    assert conversation in listed("2026-10-28T09:00:00Z")
    assert listed("2026-10-28t09:00:00z") == listed("2026-10-28T09:00:00Z")
    assert conversation not in listed("2026-10-28T09:00:01z")
    assert listed("2026-10-28 09:00:00.5z") == listed("2026-10-28T09:00:00.5Z")


def test_if_match_star_on_a_new_conversation_says_it_is_not_started(server: Server) -> None:
    conversation = unique()
    [first, message, *_] = demo_lines(conversation)
    star = problem(server.client.post("/v1/lines", json=first, headers={"If-Match": "*"}), 412, "version-mismatch")
    assert (star["expected"], star["actual"]) == ("*", 0)
    assert star["detail"] == (
        f"conversation {conversation!r} is not started (version 0): If-Match: * matches a conversation at any "
        'version from 1; send its first line without If-Match, or with If-Match: "0"'
    )
    zero = server.client.post("/v1/lines", json=first, headers={"If-Match": '"0"'})  # the first version is "0"
    assert (zero.status_code, zero.headers["etag"]) == (200, '"1"')
    listed = problem(server.client.post("/v1/lines", json=message, headers={"If-Match": '"3", "5"'}), 412, "version-mismatch")
    assert (listed["expected"], listed["actual"]) == ([3, 5], 1)
    assert listed["detail"] == f"conversation {conversation!r} is at version 1, not one of 3, 5; read it again"
    one = problem(server.client.post("/v1/lines", json=message, headers={"If-Match": '"4"'}), 412, "version-mismatch")
    assert (one["expected"], one["actual"]) == (4, 1)


def test_every_member_of_a_problem_is_typed_in_the_document(server: Server) -> None:
    """Problems of each type that adds members validate against the document's ProblemDetails
    with no member left untyped (additionalProperties false)."""
    schema = json.loads(OPENAPI.read_text("utf-8"))["components"]["schemas"]["ProblemDetails"]
    closed = Draft202012Validator({**schema, "additionalProperties": False})
    conversation, lines = started(server)
    post = server.client.post
    answers = {
        "version-mismatch": post("/v1/lines", json=lines[2], headers={"If-Match": '"7"'}),
        "version-mismatch (star)": post("/v1/lines", json={**lines[0], "conversation": unique()}, headers={"If-Match": "*"}),
        "version-mismatch (weak)": post("/v1/lines", json=lines[2], headers={"If-Match": 'W/"3"'}),
        "bad-line": post("/v1/lines", json={**lines[2], "at": "soon"}),
        "unreadable-json": post("/v1/lines", content=b"{", headers={"Content-Type": "application/json"}),
        "refused-line": post("/v1/lines", json={**lines[1], "message": 1, "text": "other"}),
        "refused-line (too early)": post("/v1/lines", json={**lines[1], "message": 7, "text": "later"}),
        "bad-request": server.client.get("/v1/conversations", params={"since": "soon"}),
        "body-too-large": post("/v1/lines", content=b" " * (MAX_BODY + 1), headers={"Content-Type": "application/json"}),
    }
    post("/v1/lines", json=lines[2], headers={"Idempotency-Key": f"{conversation}-k"})
    answers["idempotency-key-reused"] = post("/v1/lines", json=lines[3], headers={"Idempotency-Key": f"{conversation}-k"})
    members = set()
    for name, response in answers.items():
        body = problem(response, response.status_code, name.split(" ")[0])
        errors = [error.message for error in closed.iter_errors(body)]
        assert errors == [], (name, body)
        members |= set(body) - {"type", "title", "status", "detail"}
    assert members >= {"expected", "actual", "rule", "field", "where", "line", "limit", "differs", "waits_for"}


def test_a_note_s_byte_offset_places_it_as_its_code_point_offset_does() -> None:
    """`at` counts code points, `at_byte` UTF-8 bytes: a chat that cuts bytes (PHP's substr) at
    `at_byte` puts each note where `apply_notes` (a Python str cut at `at`) does."""
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.demo()
    notes = chatrecord.turn_notes(DEMO_CONVERSATION).notes
    transcript = chatrecord.read_models.state(DEMO_CONVERSATION).transcript.messages
    into = [n for n in notes if n.into == "assistant"]
    assert any(n.at != n.at_byte for n in into)  # the demo's answers hold umlauts before a note
    assert [n.to_json()["at_byte"] for n in into] == [n.at_byte for n in into]

    def cut_in_bytes(text: str, placed: list[PlacedNote]) -> str:  # what the PHP chat does with substr
        data, out, done = text.encode("utf-8"), b"", 0
        for at in sorted({n.at_byte or 0 for n in placed}):
            joined = "\n".join(n.text for n in placed if (n.at_byte or 0) == at)
            out, done = out + data[done:at] + ("\n\n" + joined).encode("utf-8"), at
        return (out + data[done:]).decode("utf-8")

    expected = apply_notes(transcript, notes)
    for index in {n.index for n in into}:
        placed = [n for n in into if n.index == index]
        assert cut_in_bytes(transcript[index].text, placed) == expected[index].text
