"""The page's sign-in (issue 35, item 7): a session of its own per sign-in, expiring after 8
hours; a sign-out; a growing wait after wrong tokens, per client; no token shorter than 16
characters; and a request body that never finishes answered 408 and closed, not held open."""

from __future__ import annotations

import json
import socket
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from adapters.api import Chatrecord
from adapters.backends.settings import BadSetting
from adapters.bootstrap import open_store
from adapters.http import server, sessions
from adapters.http.app import HttpSettings, create_app
from adapters.http.sessions import FIRST_WAIT, LONGEST_WAIT, SESSION_SECONDS, Sessions, Throttle, new_session
from adapters.http.ui import COOKIE
from tests.e2e.conftest import DEMO, runner
from tests.http.conftest import TOKEN, start, stop

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

PAGE = "/ui/conversations/conv-demo-seo"


@pytest.fixture
def client() -> Iterator[TestClient]:
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    app = create_app(lambda: chatrecord, HttpSettings(token=TOKEN))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as test_client:
        yield test_client


def signed_in(client: TestClient) -> str:
    answer = client.post("/ui/login", data={"token": TOKEN, "next": PAGE})
    assert answer.status_code == 303
    return answer.cookies[COOKIE]


def test_each_sign_in_gets_a_session_of_its_own_that_expires_after_8_hours(client: TestClient) -> None:
    first, second = signed_in(client), signed_in(client)
    client.cookies.clear()
    cookie = client.post("/ui/login", data={"token": TOKEN, "next": PAGE}).headers["set-cookie"]
    stale = new_session(TOKEN, now=time.time() - SESSION_SECONDS - 1)
    client.cookies.set(COOKIE, stale)
    expired = client.get(PAGE)
    client.cookies.set(COOKIE, first)
    live = client.get(PAGE)

    assert first != second and TOKEN not in first + second
    assert f"Max-Age={SESSION_SECONDS}" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert (expired.status_code, live.status_code) == (303, 200)
    kept, issued = Sessions(TOKEN), 1_800_000_000
    made = new_session(TOKEN, now=issued)
    assert [kept.valid(made, now=issued + s) for s in (0, SESSION_SECONDS - 1, SESSION_SECONDS)] == [True, True, False]
    assert Sessions("another-token-0123456789").valid(made, now=issued) is False
    assert kept.valid(made.replace(str(issued), str(issued + 3600)), now=issued) is False  # its time is signed


def test_sign_out_ends_the_session_and_the_served_pages_offer_it(client: TestClient) -> None:
    cookie = signed_in(client)
    listing, page = client.get("/ui/"), client.get(PAGE)
    out = client.post("/ui/logout")
    client.cookies.clear()
    client.cookies.set(COOKIE, cookie)  # the same cookie again, as a copy of it would be sent
    after = client.get(PAGE)

    button = '<form method="post" action="/ui/logout"'
    assert button in listing.text and button in page.text
    assert out.status_code == 200 and "Signed out." in out.text
    assert out.headers["set-cookie"].startswith(f'{COOKIE}="";') and "Max-Age=0" in out.headers["set-cookie"]
    assert (after.status_code, after.headers["location"]) == (303, "/ui/login?next=%2Fui%2Fconversations%2Fconv-demo-seo")
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.ingest(DEMO.read_bytes().splitlines(), DEMO.name)
    from adapters.pages import export_page

    assert "/ui/logout" not in export_page(chatrecord, "conv-demo-seo")  # the file written by `timeline -o`


def test_wrong_tokens_make_the_client_wait_longer_each_time(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "clock", lambda: 1000.0)  # the 20 attempts come within the first wait, however slow
    answers = [client.post("/ui/login", data={"token": f"wrong-{n}", "next": PAGE}) for n in range(20)]
    right = client.post("/ui/login", data={"token": TOKEN, "next": PAGE})

    assert [a.status_code for a in answers] == [401] + [429] * 19
    assert answers[0].headers["retry-after"] == "1" and "That is not the token." in answers[0].text
    assert "Too many wrong tokens from this address; try again in 1 s." in answers[1].text
    assert right.status_code == 429 and "set-cookie" not in right.headers
    throttle = Throttle()
    waits = [throttle.failed("a", now=1000.0 + 400 * n) for n in range(11)]  # each after the last wait ended
    assert waits == [FIRST_WAIT * 2**n for n in range(9)] + [LONGEST_WAIT] * 2 == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert throttle.wait("a", now=5000.0) == LONGEST_WAIT and throttle.wait("b", now=5000.0) == 0
    throttle.passed("a")
    assert throttle.wait("a", now=5000.0) == 0 and throttle.failed("a", now=5000.0) == FIRST_WAIT
    assert throttle.failed("a", now=5001.0 + 900 + 1) == FIRST_WAIT  # quiet past its wait: counted again from one


def test_serve_refuses_a_token_shorter_than_16_characters(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"), CHATRECORD_API_TOKEN="x")

    short = run("serve", "--port", "1")

    assert (short.returncode, short.stdout) == (1, "")
    assert short.stderr == (
        "error: CHATRECORD_API_TOKEN is 1 character long; use at least 16 "
        "(a random one: python3 -c 'import secrets; print(secrets.token_urlsafe(24))')\n"
    )
    assert HttpSettings.from_env({"CHATRECORD_API_TOKEN": "x" * 16}).token == "x" * 16
    with pytest.raises(BadSetting, match="is 15 characters long"):
        HttpSettings.from_env({"CHATRECORD_API_TOKEN": "x" * 15})
    for bad in ("0", "-1", "soon", "nan", "inf"):
        with pytest.raises(BadSetting, match="CHATRECORD_BODY_TIMEOUT_SECONDS must be a number of seconds > 0"):
            HttpSettings.from_env({"CHATRECORD_BODY_TIMEOUT_SECONDS": bad})
    assert HttpSettings.from_env({"CHATRECORD_BODY_TIMEOUT_SECONDS": "2.5"}).body_timeout == 2.5


def test_a_body_that_never_finishes_is_answered_408_and_its_connection_closed(tmp_path: Path) -> None:
    process, url = start({"CHATRECORD_DB": str(tmp_path / "s.sqlite"), "CHATRECORD_BODY_TIMEOUT_SECONDS": "1"}, tmp_path / "log")
    host, port = url.removeprefix("http://").split(":")
    line = json.dumps(
        {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}
    )
    try:
        slow = []
        began = time.monotonic()
        for _ in range(30):
            conn = socket.create_connection((host, int(port)), timeout=20)
            head = f"POST /v1/lines HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            conn.sendall(f"{head}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{".encode())
            slow.append(conn)
        answers = []
        for conn in slow:
            received = b""
            while chunk := conn.recv(65536):  # until the server closes the connection
                received += chunk
            answers.append(received)
            conn.close()
        took = time.monotonic() - began
        whole = socket.create_connection((host, int(port)), timeout=20)
        head = f"POST /v1/lines HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n"
        whole.sendall(f"{head}Content-Type: application/json\r\nContent-Length: {len(line)}\r\n\r\n{line}".encode())
        recorded = b""
        while chunk := whole.recv(65536):
            recorded += chunk
        whole.close()
    finally:
        stop(process)

    assert all(a.startswith(b"HTTP/1.1 408 ") and b"urn:chatrecord:problem:body-timeout" in a for a in answers)
    assert b"did not arrive within 1 s" in answers[0] and took < 15
    assert recorded.startswith(b"HTTP/1.1 200 ")


def test_wrong_bearer_tokens_make_the_client_wait_on_v1_and_ui_and_the_right_one_works_after(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(sessions, "clock", lambda: now[0])
    wrong = [client.get("/v1/conversations", headers={"Authorization": f"Bearer wrong-{n}"}) for n in range(30)]
    right_meanwhile = client.get("/v1/conversations", headers={"Authorization": f"Bearer {TOKEN}"})
    on_ui = client.get("/ui/", headers={"Authorization": "Bearer wrong-ui"})
    now[0] += 1.0  # the first wait (1 s) is over
    right_after = client.get("/v1/conversations", headers={"Authorization": f"Bearer {TOKEN}"})
    ui_wrong = client.get("/ui/", headers={"Authorization": "Bearer wrong-ui"})  # a wrong one on /ui counts too
    ui_waits = client.get("/ui/", headers={"Authorization": f"Bearer {TOKEN}"})
    form_waits = client.post("/ui/login", data={"token": TOKEN, "next": PAGE})
    now[0] += 1.0
    ui_right = client.get("/ui/", headers={"Authorization": f"Bearer {TOKEN}"})

    assert [a.status_code for a in wrong] == [401] + [429] * 29
    assert wrong[1].json()["type"] == "urn:chatrecord:problem:too-many-wrong-tokens"
    assert wrong[1].json()["detail"] == "too many wrong tokens from this address; try again in 1 s"
    assert wrong[1].headers["retry-after"] == "1"
    assert (right_meanwhile.status_code, on_ui.status_code) == (429, 429)  # nothing compared while it waits
    assert right_after.status_code == 200 and ui_wrong.status_code == 303
    assert (ui_waits.status_code, form_waits.status_code) == (429, 429)
    assert ui_right.status_code == 200


def test_the_wait_after_a_wrong_token_is_a_setting_and_0_turns_it_off(tmp_path: Path) -> None:
    off = Throttle(0.0)

    assert [off.failed("a", now=1000.0) for _ in range(3)] == [0, 0, 0] and off.wait("a", now=1000.0) == 0
    assert HttpSettings.from_env({}).wrong_token_wait == FIRST_WAIT == 1
    assert HttpSettings.from_env({"CHATRECORD_WRONG_TOKEN_WAIT_SECONDS": "0"}).wrong_token_wait == 0
    with pytest.raises(BadSetting, match=r"CHATRECORD_WRONG_TOKEN_WAIT_SECONDS must be a number of seconds >= 0, not '-1'"):
        HttpSettings.from_env({"CHATRECORD_WRONG_TOKEN_WAIT_SECONDS": "-1"})


def test_serve_believes_x_forwarded_for_only_from_the_proxies_it_is_told_to_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process, url = start(
        {"CHATRECORD_DB": str(tmp_path / "s.sqlite"), "CHATRECORD_WRONG_TOKEN_WAIT_SECONDS": "60"}, tmp_path / "log"
    )
    try:
        with httpx.Client(base_url=url, timeout=20) as web:
            spoofed = [
                web.get("/v1/conversations", headers={"Authorization": "Bearer wrong", "X-Forwarded-For": f"10.0.0.{n}"})
                for n in range(5)
            ]
    finally:
        stop(process)
    runs: list[dict[str, object]] = []
    monkeypatch.setattr(server.uvicorn, "run", lambda *args, **kwargs: runs.append(kwargs))
    server.run("127.0.0.1", 8765, 1)
    server.run("127.0.0.1", 8765, 1, proxies=server.trusted("10.0.0.1, 192.168.0.0/16"))

    assert [a.status_code for a in spoofed] == [401, 429, 429, 429, 429]  # one client, whatever it claims
    assert spoofed[1].headers["retry-after"] in {"59", "60"}
    assert [(r["proxy_headers"], r["forwarded_allow_ips"]) for r in runs] == [
        (False, None),
        (True, ["10.0.0.1", "192.168.0.0/16"]),
    ]
    with pytest.raises(BadSetting, match="--trusted-proxies: 'proxy.local' is not an IP address or network"):
        server.trusted("proxy.local")
