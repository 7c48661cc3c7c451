"""`GET /v1/conversations/{id}/replay` a page at a time and `…/replay/changes` (issue 39, item 1):
the pages, followed by their cursors, hold every turn `chatrecord replay --json` prints; the
changes, read by the reference reader, give the same turns; `at=N` stays one turn, whole; a
cursor no page returned is a 400. On a real server, each backend."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from adapters.http import schemas
from projections.turn_changes import Rebuilt
from tests.http.conftest import Server, unique
from tests.http.test_http import demo_lines, problem


def pages(server: Server, path: str, limit: int) -> tuple[list[dict[str, Any]], list[str | None]]:
    """Returns the turns of every page of `path`, following the cursors, and the cursors."""
    turns: list[dict[str, Any]] = []
    cursors: list[str | None] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        response = server.client.get(path, params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        turns += body["turns"]
        cursor = body["next_cursor"]
        cursors.append(cursor)
        if cursor is None:
            return turns, cursors


def test_pages_of_whole_turns_and_of_changes_hold_every_turn(server: Server) -> None:
    conversation = unique()
    lines = demo_lines(conversation)
    for line in lines:
        assert server.client.post("/v1/lines", json=line).status_code == 200
    path = f"/v1/conversations/{conversation}/replay"
    whole = server.client.get(path, params={"limit": 1000}).json()

    turns, cursors = pages(server, path, 1)
    changes, change_cursors = pages(server, path + "/changes", 1)
    reader = Rebuilt()

    assert [t["message"] for t in whole["turns"]] == [1, 3] and whole["next_cursor"] is None
    assert turns == whole["turns"] and cursors == change_cursors == ["t1", None]
    assert [reader.turn(c) for c in changes] == whole["turns"]
    TypeAdapter(schemas.Replay).validate_json(server.client.get(path, params={"limit": 1}).content, strict=False)
    TypeAdapter(schemas.ReplayChanges).validate_json(server.client.get(path + "/changes").content, strict=False)
    at = server.client.get(path, params={"at": 3}).json()
    assert at == {"conversation": conversation, "rules": whole["rules"], "turns": whole["turns"][1:]}  # one turn, as before


def test_a_cursor_no_page_returned_is_a_bad_request(server: Server) -> None:
    conversation = unique()
    for line in demo_lines(conversation)[:3]:
        assert server.client.post("/v1/lines", json=line).status_code == 200
    path = f"/v1/conversations/{conversation}/replay"
    assert problem(server.client.get(path, params={"cursor": "c1"}), 400, "bad-request")["where"] == "query.cursor"
    assert problem(server.client.get(path + "/changes", params={"limit": 0}), 400, "bad-request")["where"] == "query.limit"
    one = server.client.get(path, params={"at": 1, "cursor": "t1", "limit": 1})  # one turn, whole: no page
    assert (one.status_code, [t["message"] for t in one.json()["turns"]], "next_cursor" in one.json()) == (200, [1], False)
    past = server.client.get(path, params={"cursor": "t99"}).json()
    assert (past["turns"], past["next_cursor"]) == ([], None)
    missing = server.client.get(f"/v1/conversations/{unique()}/replay/changes")
    assert problem(missing, 404, "unknown-conversation")
