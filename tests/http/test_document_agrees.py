"""docs/openapi.json and the server agree where a client written from the document alone (or
Schemathesis's coverage phase) finds an edge (issue 35, item 6): an empty optional header is one
not sent; a time in RFC 3339's lower-case form is read; on a real server, each backend."""

from __future__ import annotations

from typing import Any

from tests.http.conftest import Server, unique
from tests.http.test_http import demo_lines, problem

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
    listed = server.client.get("/v1/conversations", params={"cursor": "", "since": ""}, headers={"Chatrecord-Read-After": ""})
    assert listed.status_code == 200, listed.text
    assert conversation in [c["conversation"] for c in listed.json()["conversations"]]

    posted = server.client.post("/v1/lines", json=lines[2], headers={"If-Match": "", "Idempotency-Key": ""})
    assert (posted.status_code, posted.json()["appended"], "idempotent-replayed" in posted.headers) == (200, 1, False)
    again = server.client.post("/v1/lines", json=lines[2], headers={"If-Match": "", "Idempotency-Key": ""})
    assert (again.status_code, again.json()["repeated"], "idempotent-replayed" in again.headers) == (200, True, False)
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
