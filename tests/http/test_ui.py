"""The UI's routes in process: behind the API's token (bearer, or the sign-in form's cookie),
escaped, with no script allowed; the list and the conversation page."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator

import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.http.app import HttpSettings, create_app
from adapters.http.sessions import Sessions, new_session
from adapters.http.ui import COOKIE
from tests.browser.conftest import PAYLOAD, hostile_lines
from tests.e2e.conftest import DEMO

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "ui-token-0123456789"


def client_for(token: str | None) -> Iterator[TestClient]:
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    chatrecord.ingest([json.dumps(line).encode() for line in hostile_lines()], "hostile")
    app = create_app(lambda: chatrecord, HttpSettings(token=token))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield client


@pytest.fixture
def client() -> Iterator[TestClient]:
    yield from client_for(TOKEN)


def test_without_the_token_a_page_sends_the_browser_to_the_sign_in_form(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-demo-seo?turn=1")
    wrong = client.get("/ui/", headers={"Authorization": "Bearer not-it"})
    client.cookies.set(COOKIE, new_session("another-token-0123456789"))
    forged = client.get("/ui/")
    client.cookies.clear()

    assert (page.status_code, page.headers["location"]) == (
        303,
        "/ui/login?next=%2Fui%2Fconversations%2Fconv-demo-seo%3Fturn%3D1",
    )
    assert wrong.status_code == forged.status_code == 303
    assert client.get("/ui/conversations/conv-demo-seo/overview.svg").status_code == 303
    assert client.get("/ui/conversations/conv-demo-seo/chain").status_code == 303


def test_the_apis_bearer_token_gets_the_page(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-demo-seo", headers={"Authorization": f"Bearer {TOKEN}"})

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"]
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "<script" not in page.text
    assert page.text.count('<li class="note') == 14


def test_each_segment_shows_its_time_tokens_and_cost(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-demo-seo", headers={"Authorization": f"Bearer {TOKEN}"})

    assert page.text.count('<p class="usage">') == 8
    assert '<p class="usage">usage: 4,345 ms, 2 model calls, 3,600 in / 240 out tokens, cost 0.0082</p>' in page.text
    assert page.text.count("1,800 in / 120 out tokens, cost 0.0041</p>") == 6


def test_the_sign_in_form_sets_an_httponly_samesite_cookie_that_is_not_the_token(client: TestClient) -> None:
    signed = client.post("/ui/login", data={"token": TOKEN, "next": "/ui/conversations/conv-demo-seo"})
    elsewhere = client.post("/ui/login", data={"token": TOKEN, "next": "https://evil.example/"})
    refused = client.post("/ui/login", data={"token": "nope", "next": "/ui/conversations/conv-demo-seo"})

    assert refused.status_code == 401 and "That is not the token." in refused.text and "set-cookie" not in refused.headers
    assert (signed.status_code, signed.headers["location"]) == (303, "/ui/conversations/conv-demo-seo")
    cookie = signed.headers["set-cookie"]
    value = signed.cookies[COOKIE]
    assert cookie.startswith(f"{COOKIE}={value};") and TOKEN not in cookie and Sessions(TOKEN).valid(value)
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert elsewhere.headers["location"] == "/ui/"
    client.cookies.set(COOKIE, new_session(TOKEN))
    assert client.get("/ui/conversations/conv-demo-seo").status_code == 200


def test_hostile_texts_are_escaped_and_their_invisible_characters_shown(client: TestClient) -> None:
    page = client.get("/ui/conversations/conv-hostile", headers={"Authorization": f"Bearer {TOKEN}"})

    assert page.status_code == 200
    assert "<script>window" not in page.text and "<img src=x" not in page.text and "<b>bold" not in page.text
    assert "&lt;script&gt;window.__pwned = &#34;script&#34;&lt;/script&gt;" in page.text
    assert "\u202e" not in page.text and '<span class="ctl">\\u202e</span>evil' in page.text
    assert PAYLOAD not in page.text


def test_the_list_finds_a_conversation_by_id(client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    listed = client.get("/ui/", headers=auth)
    found = client.get("/ui/", params={"q": "conv-demo-seo"}, headers=auth)
    missing = client.get("/ui/", params={"q": "conv-nope"}, headers=auth)

    assert listed.status_code == 200 and 'href="/ui/conversations/conv-demo-seo"' in listed.text
    assert 'href="/ui/conversations/conv-hostile"' in listed.text
    demo_row = listed.text.split('href="/ui/conversations/conv-demo-seo"', 1)[1].split("</tr>", 1)[0]
    assert "<td>chat</td><td>7</td><td>3</td><td>8</td><td>20</td>" in demo_row  # kind, owner, messages, segments, events
    assert client.get("/ui/", params={"after": "not-a-cursor"}, headers=auth).status_code == 400
    assert (found.status_code, found.headers["location"]) == (303, "/ui/conversations/conv-demo-seo")
    assert missing.status_code == 404 and "no conversation &#39;conv-nope&#39;" in missing.text
    assert "stored:" not in missing.text and "sqlite" not in missing.text.lower()  # no file, no other ids (a fresh user)


def test_the_lists_form_filters_by_part_of_the_id_owner_time_and_status(client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def shown(params: dict[str, object]) -> tuple[int, list[str], str]:
        page = client.get("/ui/", params=params, headers=auth)
        return page.status_code, re.findall(r'href="/ui/conversations/([^"/?]+)"', page.text), page.text

    part = shown({"q": "DEMO"})
    owned = shown({"owner": "7", "since": "2026-10-01T00:00:00Z", "until": "2026-11-01T00:00:00Z"})
    failed = shown({"status": ["failed", "waiting"]})
    nobody = shown({"owner": "999"})
    bad = shown({"owner": "seven"})
    no_status = shown({"status": "lost"})

    assert part[:2] == (200, ["conv-demo-seo"])
    assert 'name="q" value="DEMO"' in part[2]  # the form keeps what was asked
    assert "conv-demo-seo" in owned[1] and owned[0] == 200
    assert failed[:2] == (200, []) and "No conversation matches." in failed[2]
    assert 'value="failed" checked' in failed[2] and 'value="waiting" checked' in failed[2]
    assert nobody[:2] == (200, [])
    assert bad[0] == 400 and "owner: &#39;seven&#39; is not a user id" in bad[2]
    assert no_status[0] == 400 and "status: &#39;lost&#39; is none of failed" in no_status[2]
    assert "<script" not in part[2] and 'method="get"' in part[2]


def test_the_lists_next_page_link_keeps_the_filters() -> None:
    chatrecord = Chatrecord(open_store(memory=True))
    for n in range(51):
        line = {"type": "conversation_started", "conversation": f"c-{n:02}", "at": f"2026-10-28T09:{n:02}:00Z"}
        chatrecord.ingest([json.dumps({**line, "kind": "chat", "owner": 5}).encode()], "many")
    app = create_app(lambda: chatrecord, HttpSettings(token=TOKEN))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        first = client.get("/ui/", params={"q": "c-", "owner": "5"}, headers=auth)
        more = re.search(r'<a class="more" href="([^"]+)"', first.text)
        assert more is not None
        link = more.group(1).replace("&amp;", "&")
        assert link.startswith("/ui/?q=c-&owner=5&after=c")
        second = client.get(link, headers=auth)
    assert second.status_code == 200
    assert re.findall(r'href="/ui/conversations/([^"/?]+)"', second.text) == ["c-00"]


def test_turn_and_rules_show_that_turn_under_that_rule_set() -> None:
    for client in client_for(None):  # serve --no-auth (loopback only): the UI is open like the API
        first = client.get("/ui/conversations/conv-demo-seo", params={"turn": 1})
        bare = client.get("/ui/conversations/conv-demo-seo", params={"turn": 3, "rules": "transcript-only"})
        no_turn = client.get("/ui/conversations/conv-demo-seo", params={"turn": 2})

        assert first.status_code == 200 and first.text.count('class="msg ') == 2
        assert "What the model was sent at user message 1" in first.text
        assert bare.text.count('<li class="note') == 14 and bare.text.count("<del>[Chat record") == 14
        assert no_turn.status_code == 404 and no_turn.headers["content-type"].startswith("text/html")
        assert "no turn starts at user message 2; turns start at messages 1, 3" in no_turn.text
        unknown = client.get("/ui/conversations/conv-%3Cscript%3E")
        assert unknown.status_code == 404 and "&#39;conv-&lt;script&gt;&#39;" in unknown.text


def test_the_chain_and_the_overview_are_requests_of_their_own(client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    chain = client.get("/ui/conversations/conv-demo-seo/chain", headers=auth)
    overview = client.get("/ui/conversations/conv-demo-seo/overview.svg", headers=auth)

    assert chain.status_code == 200 and 'id="chain-state"' in chain.text
    assert overview.status_code == 200 and overview.headers["content-type"] == "image/svg+xml"
    assert 'aria-label="Overview: 16 facts, 8 segments"' in overview.text
    assert client.get("/ui/conversations/conv-nope/chain", headers=auth).status_code == 404


def test_the_chains_verdict_says_what_it_recomputed_and_when_and_by_what(client: TestClient) -> None:
    """The page shows the chain's verdict itself, whole (no frame): the first look recomputes every
    hash and says so; a later one names the version up to which an earlier one recomputed every
    hash, when and by what, says what it recomputed now, and links a full recomputation."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    first = client.get("/ui/conversations/conv-demo-seo", headers=auth)  # every hash: no position stored yet
    second = client.get("/ui/conversations/conv-demo-seo", headers=auth)
    full = client.get("/ui/conversations/conv-demo-seo", params={"full": 1}, headers=auth)
    alone = client.get("/ui/conversations/conv-demo-seo/chain", headers=auth)

    assert "<iframe" not in first.text and 'id="chain-kept"' not in first.text
    assert "✔ Chain verified: 20 events, head " in first.text
    assert "every hash, from the first event to event 20, was recomputed now." in first.text
    assert re.search(
        r"✔ Chain verified up to event 20 by the server at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; no event after 20\.", second.text
    )
    assert (
        "Checked now: event 20 and its hash are unchanged since; an event up to 20 whose stored bytes were changed "
        "without its hash is found only when every hash is recomputed: "
        '<a href="/ui/conversations/conv-demo-seo?full=1">Recompute every hash</a>.' in second.text
    )
    assert 'id="chain-kept"' not in full.text and "was recomputed now." in full.text
    assert '<a href="?full=1">Recompute every hash</a>' in alone.text
