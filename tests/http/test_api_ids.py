"""Ids that look like an API sub-path (`conv-7/turn`, `turn`, `a/b/export`) reach their own
conversation under `/v1/conversations/{id}/…` when sent percent-encoded, as the clients send them
(`adapters.http.conversation_paths`); on memory, SQLite and PostgreSQL in process, and through a real
`chatrecord serve` (uvicorn decodes the path once, the test client twice)."""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import postgres_env, sqlite_env
from adapters.bootstrap import build_store, open_store
from adapters.http.app import HttpSettings, create_app
from adapters.http.conversation_paths import SUB_PATHS, ConversationRoute
from adapters.ingest.names import reduce_id
from tests.e2e.conftest import DEMO
from tests.http.conftest import Server

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

LINES = [json.loads(line) for line in DEMO.read_bytes().splitlines()]
# the id and how many of the demo's first lines it gets: each has another
# count of events, so that a read of another conversation is told apart
IDS = {
    "conv-7": 19,
    "conv-7/turn": 2,
    "conv-7/export": 3,
    "conv-7/replay/changes": 4,
    "conv-7/reproductions": 5,
    "turn": 7,
    "a/b/export": 9,
    "x%2Fy": 11,
    "ü/ü": 13,
}
READS = ("turn", "export", "audit", "activity", "replay", "replay/changes", "reproductions")


def lines_of(conversation: str, count: int) -> list[bytes]:
    return [json.dumps({**line, "conversation": conversation}).encode() for line in LINES[:count]]


def ingest_all(chatrecord: Chatrecord, suffix: str = "") -> dict[str, str]:
    """Ingests each id of IDS (with `suffix`); returns the ids asked for by the ids of IDS."""
    ids = {conversation: conversation + suffix for conversation in IDS}
    for conversation, count in IDS.items():
        chatrecord.ingest(lines_of(ids[conversation], count), "ids")
    return ids


def reads(get: Any, asked: str) -> dict[str, httpx.Response]:
    base = "/v1/conversations/" + quote(asked, safe="")
    return {sub: get(f"{base}/{sub}") for sub in READS}


def check(got: dict[str, httpx.Response], asked: str, count: int) -> None:
    """Asserts that each read is of conversation `asked`, made of the demo's first `count` lines."""
    events = {2: 3, 3: 4, 4: 5, 5: 6, 7: 8, 9: 10, 11: 12, 13: 14, 19: 20}[count]
    segments = sum(line["type"] == "segment_returned" for line in LINES[:count])
    assert {sub: r.status_code for sub, r in got.items()} == dict.fromkeys(READS, 200)
    exported = [json.loads(line) for line in got["export"].text.splitlines()]
    assert len(exported) == count and {line["conversation"] for line in exported} == {exported[0]["conversation"]}
    assert {row["conversation"] for row in got["audit"].json() if "conversation" in row} == {exported[0]["conversation"]}
    assert max(row["version"] for row in got["audit"].json()) == events
    assert (got["turn"].json()["version"], got["turn"].headers["etag"]) == (events, f'"{events}"')
    assert len(got["activity"].json()) == segments
    assert len(got["replay"].json()["turns"]) == len(got["replay/changes"].json()["turns"]) == 1 + (count == 19)
    assert got["reproductions"].json() == []
    # the id as stored (`x2Fy:h…` for `x%2Fy`, whose `%` an id does not keep)
    assert got["turn"].json()["conversation"] == exported[0]["conversation"] == reduce_id(asked)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def chatrecord(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chatrecord]:
    if request.param == "memory":
        store = open_store(memory=True)
    elif request.param == "sqlite":
        store = build_store(sqlite_env(tmp_path / "store.sqlite"))
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        store = build_store({**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "1"})
    chat = Chatrecord(store)
    yield chat
    chat.close()


def test_each_read_of_an_encoded_id_is_of_that_conversation(chatrecord: Chatrecord) -> None:
    ids = ingest_all(chatrecord)
    app = create_app(lambda: chatrecord, HttpSettings(token=None))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for conversation, asked in ids.items():
            check(reads(client.get, asked), asked, IDS[conversation])
        plain = client.get("/v1/conversations/conv-7/turn")  # a plain slash: conv-7's turn, as before
        other = client.get("/v1/conversations/a/b/export/export")  # a plain slash not before a sub-path: as before
        bare = client.get("/v1/conversations/" + quote("conv-7/turn", safe=""))  # no such operation

    assert plain.json()["conversation"] == "conv-7" and plain.headers["etag"] == '"20"'
    assert {line["conversation"] for line in map(json.loads, other.text.splitlines())} == {"a/b/export"}
    assert bare.status_code == 404 and bare.headers["content-type"] == "application/problem+json"


def test_a_reproduction_is_posted_to_the_encoded_id(chatrecord: Chatrecord) -> None:
    ingest_all(chatrecord)
    app = create_app(lambda: chatrecord, HttpSettings(token=None))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        posted = client.post("/v1/conversations/" + quote("conv-7/reproductions", safe="") + "/reproductions", json={})
        wrong = client.put("/v1/conversations/" + quote("conv-7/turn", safe="") + "/reproductions")

    # no model is configured: the refusal is for the id asked (a 409), not a 404 of another path
    assert (posted.status_code, posted.json()["type"]) == (409, "urn:chatrecord:problem:model-not-set")
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "GET, POST")


def test_a_real_server_reads_each_encoded_id_as_its_own(server: Server) -> None:
    suffix = "-" + uuid.uuid4().hex[:8]
    ids = {conversation: conversation + suffix for conversation in IDS}
    for conversation, count in IDS.items():
        posted = server.client.post(
            "/v1/lines",
            content=b"\n".join(lines_of(ids[conversation], count)),
            headers={"Content-Type": "application/x-ndjson"},
        )
        assert posted.status_code == 200, posted.text
    for conversation, asked in ids.items():
        check(reads(server.client.get, asked), asked, IDS[conversation])


def routes_of(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yields each route of the app with its whole path (FastAPI keeps an included router's routes
    under it, with the prefix of the include)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from routes_of(included.routes, prefix + route.include_context.prefix)
        else:
            yield prefix + route.path, route


def test_every_conversation_route_ends_in_a_listed_sub_path_and_routes_on_the_raw_path() -> None:
    app = create_app(lambda: Chatrecord(open_store(memory=True)), HttpSettings(token=None))
    routes = [(path, route) for path, route in routes_of(app.routes) if "{conversation:path}" in path]
    found = {
        (head, path.removeprefix(head + "{conversation:path}").lstrip("/"))
        for path, _ in routes
        for head in SUB_PATHS
        if path.startswith(head)
    }

    assert all(isinstance(route, ConversationRoute) for _, route in routes)
    assert len(found) == len({path for path, _ in routes}) == sum(len(subs) + 1 for subs in SUB_PATHS.values()) - 1
    assert {pair for pair in found if pair[1]} == {(head, sub) for head, subs in SUB_PATHS.items() for sub in subs}
    assert ("/ui/conversations/", "") in found
