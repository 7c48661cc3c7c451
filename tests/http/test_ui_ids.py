"""Ids that look like a sub-page (`conv-7/chain`, `a/b/events`, `turn`) open their own pages: the UI
routes on the path as sent, where the id's `%2F` is not a separator (`adapters.http.conversation_paths`).
On SQLite, in process. Also: a page's bad query value is an HTML error page."""

from __future__ import annotations

import html
import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from adapters import pages
from adapters.api import Chatrecord
from adapters.backends.settings import sqlite_env
from adapters.bootstrap import build_store
from adapters.http.app import HttpSettings, create_app
from adapters.ingest.names import reduce_id
from adapters.pages import conversation_path
from tests.e2e.conftest import DEMO

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "ui-ids-token-0123456789"
LINES = [json.loads(line) for line in DEMO.read_bytes().splitlines()]
# each id with its own number of the demo's lines (its second user message last), so that each
# conversation has another count of events: a page showing another id's data is told apart
IDS = {
    "conv-7": 17,
    "conv-7/chain": 3,
    "conv-7/events": 5,
    "conv-7/turn": 7,
    "a/b/events": 9,
    "a/b": 11,
    "x%2Fy": 13,
    "ü/ü": 15,
    "turn": 4,
    "chain": 18,
    "..": 2,
}
SUB_PAGES = (
    "",
    "/events",
    "/rules",
    "/compare?first=1&second=1",
    "/chain",
    "/overview.svg",
    "/audit.json",
    "/export.jsonl",
    "/trace.json",
)


def lines_of(conversation: str, count: int) -> list[bytes]:
    return [json.dumps({**line, "conversation": conversation}).encode() for line in [*LINES[:count], LINES[-1]]]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Chatrecord]]:
    chatrecord = Chatrecord(build_store(sqlite_env(tmp_path_factory.mktemp("ui-ids") / "store.sqlite")))
    for conversation, count in IDS.items():
        chatrecord.ingest(lines_of(conversation, count), "ids")
    app = create_app(lambda: chatrecord, HttpSettings(token=TOKEN))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        client.headers["Authorization"] = f"Bearer {TOKEN}"
        yield client, chatrecord


def versions(chatrecord: Chatrecord, conversation: str) -> int:
    return chatrecord.chain(conversation).events


def text_of(page: str) -> str:
    """The page's text without its tags and style, its entities resolved, spaces collapsed."""
    page = re.sub(r"<style.*?</style>", "", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_the_ids_have_each_another_count_of_events(store: tuple[TestClient, Chatrecord]) -> None:
    _, chatrecord = store
    counts = [versions(chatrecord, reduce_id(c)) for c in IDS]

    assert len(set(counts)) == len(IDS), counts


@pytest.mark.parametrize("asked", list(IDS))
def test_each_page_and_sub_page_of_an_id_shows_that_conversation(store: tuple[TestClient, Chatrecord], asked: str) -> None:
    client, chatrecord = store
    stored = reduce_id(asked)
    count = versions(chatrecord, stored)
    base = conversation_path(asked)
    got = {sub: client.get(base + sub) for sub in SUB_PAGES}

    assert {sub: r.status_code for sub, r in got.items()} == dict.fromkeys(SUB_PAGES, 200)
    page, events, chain = text_of(got[""].text), text_of(got["/events"].text), text_of(got["/chain"].text)
    # the pages name the id as asked (a stored id reduced from it, `x2Fy:h…`, is the same conversation)
    assert f"{asked} · chatrecord" in page and f"· {count} events" in page
    assert f"Events as stored · {asked} ·" in events and f"Events 1–{count} of {count}, as stored" in events
    assert f"Rule sets compared · {asked} ·" in text_of(got["/rules"].text)
    assert f"› {asked} › two turns compared" in text_of(got["/compare?first=1&second=1"].text)
    assert f"Chain verified up to event {count} by the server" in chain
    assert f"{count} events, head" in chain
    audit = got["/audit.json"].json()
    assert audit == chatrecord.audit(stored, chain=True).to_json() and audit[0]["conversation"] == stored
    exported = [json.loads(line) for line in got["/export.jsonl"].text.splitlines()]
    assert {line["conversation"] for line in exported} == {stored}
    assert len(exported) == len(chatrecord.export(stored).lines) >= 2
    spans = got["/trace.json"].json()["resourceSpans"][0]["scopeSpans"][0]["spans"]
    named = {a["value"]["stringValue"] for span in spans for a in span["attributes"] if a["key"] == "gen_ai.conversation.id"}
    assert named == {asked} and got["/trace.json"].text == chatrecord.trace_json(asked)
    assert got["/overview.svg"].text == chatrecord.overview_drawn(stored, pages.overview_svg)


def test_the_list_links_each_id_to_its_own_page(store: tuple[TestClient, Chatrecord]) -> None:
    client, chatrecord = store
    listed = client.get("/ui/")
    links = re.findall(r'<a href="(/ui/conversations/[^"?#]+)">', listed.text)

    assert len(links) == len(IDS)
    for link in links:
        stored = unquote(link.removeprefix("/ui/conversations/"))
        assert "/" not in link.removeprefix("/ui/conversations/")
        assert f"· {versions(chatrecord, stored)} events" in text_of(client.get(link).text)


@pytest.mark.parametrize("asked", ["conv-7/chain", "a/b/events", "x%2Fy", "turn", ".."])
def test_the_jump_box_and_the_search_stay_on_the_id(store: tuple[TestClient, Chatrecord], asked: str) -> None:
    client, _ = store
    stored = reduce_id(asked)
    searched = client.get("/ui/", params={"q": stored})
    jumped = client.get(conversation_path(asked), params={"jump": "e3"})

    assert (searched.status_code, searched.headers["location"]) == (303, conversation_path(stored))
    assert (jumped.status_code, jumped.headers["location"]) == (303, conversation_path(asked) + "#message-1")


def test_the_links_of_a_page_keep_the_id_in_one_segment(store: tuple[TestClient, Chatrecord]) -> None:
    client, chatrecord = store
    page = client.get(conversation_path("conv-7/chain")).text
    hrefs = set(re.findall(r'(?:href|action)="(/ui/conversations/[^"]*)"', html.unescape(page)))

    subs = {h.partition("#")[0].partition("?")[0].removeprefix("/ui/conversations/conv-7%2Fchain") for h in hrefs}
    assert all(h.startswith("/ui/conversations/conv-7%2Fchain") for h in hrefs), hrefs
    assert subs == {"", "/audit.json", "/chain", "/compare", "/events", "/export.jsonl", "/rules", "/trace.json"}
    for href in hrefs:  # the compare form's action gets its two fields
        asked = href.partition("#")[0] + ("?first=1&second=1" if href.endswith("/compare") else "")
        assert (href, client.get(asked).status_code) == (href, 200)
        shown = f"{versions(chatrecord, 'conv-7/chain')} events, head" if "/chain?" in href else "conv-7/chain"
        assert shown in client.get(asked).text


def test_an_id_sent_with_plain_slashes_is_read_as_before(store: tuple[TestClient, Chatrecord]) -> None:
    client, chatrecord = store

    assert f"· {versions(chatrecord, 'a/b')} events" in text_of(client.get("/ui/conversations/a/b").text)
    assert f"Events 1–{versions(chatrecord, 'a/b')} of" in text_of(client.get("/ui/conversations/a/b/events").text)
    assert f"Events 1–{versions(chatrecord, 'conv-7')} of" in text_of(client.get("/ui/conversations/conv-7/events").text)


def test_sign_in_comes_back_to_the_ids_own_page(store: tuple[TestClient, Chatrecord]) -> None:
    client, _ = store
    sent = client.get(conversation_path("conv-7/chain") + "?full=1", headers={"Authorization": ""})

    assert sent.status_code == 303
    assert sent.headers["location"] == "/ui/login?next=" + quote("/ui/conversations/conv-7%2Fchain?full=1", safe="")


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ("/ui/conversations/conv-7?before=abc", "query.before"),
        ("/ui/conversations/conv-7?turn=0", "query.turn"),
        ("/ui/conversations/conv-7%2Fchain/events?from=x", "query.from"),
        ("/ui/conversations/conv-7/compare?first=1", "query.second"),
        ("/ui/conversations/conv-7/rules?other=nope", "query.other"),
    ],
)
def test_a_pages_bad_query_value_is_an_html_error_page(store: tuple[TestClient, Chatrecord], path: str, where: str) -> None:
    client, _ = store
    got = client.get(path)

    assert got.status_code == 400
    assert got.headers["content-type"].startswith("text/html")
    assert "script-src" not in got.headers["content-security-policy"]
    assert f"{where}: " in text_of(got.text) and "A parameter has the wrong form" in got.text


def test_the_apis_bad_query_value_stays_a_problem(store: tuple[TestClient, Chatrecord]) -> None:
    client, _ = store
    got = client.get("/v1/conversations/conv-7/turn", params={"at": "abc"})

    assert got.status_code == 400
    assert got.headers["content-type"] == "application/problem+json"
    assert got.json()["where"] == "query.at"


def test_a_path_outside_the_store_still_answers_as_before(tmp_path: Path) -> None:
    chatrecord = Chatrecord(build_store(sqlite_env(tmp_path / "s.sqlite")))
    chatrecord.ingest(lines_of("only", 3), "ids")
    app = create_app(lambda: chatrecord, HttpSettings(token=None))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        assert client.get("/ui/conversations/only%2Fchain").status_code == 404
        assert client.get("/ui/conversations/only/chain").status_code == 200
        assert client.get("/ui/conversations/only/nope").status_code == 404
    chatrecord.close()
