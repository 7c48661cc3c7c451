"""The chat's two hot requests (`POST /v1/lines`, `GET …/turn`) answered before FastAPI's routing and
middleware (`adapters.http.hot_routes`) give exactly what FastAPI's routes give: the same status,
headers and body, request by request, for the right and the wrong ones (a bad or missing token, a
waiting client, a body over the limit or too slow, unreadable JSON, a wrong media type, a bad line,
bad headers, an unknown conversation, a query the hot path leaves to FastAPI, other methods, a bug).
Each request goes to an app with the hot path and to one without it, on one store; the one with it
must have answered the hot requests itself. On the in-memory store, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.http.app import HttpSettings, create_app
from adapters.http.hot_routes import pages_of
from projections.page_line import PageFilter
from tests.conftest import _in_ci

TOKEN = "hot-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AT = "2026-11-02T10:00:00Z"
CONV = "tenant/7/hot-chat"
OTHER = "tenant/8/hot-chat"
"""The conversation of the app without the hot path: each app records its own, alike."""
TURN = "/v1/conversations/tenant%2F7%2Fhot-chat/turn"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def chatrecord(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chatrecord]:
    if request.param == "memory":
        store = open_store(memory=True)
    elif request.param == "sqlite":
        store = open_store({"CHATRECORD_DB": str(tmp_path / "hot.sqlite")})
    else:
        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("postgres_schema")
        store = open_store({"CHATRECORD_DATABASE_URL": f"{url}?schema={schema}"})
    chatrecord = Chatrecord(store)
    try:
        yield chatrecord
    finally:
        chatrecord.close()


class Apps:
    """The app with the hot path and the app without it, on one Chatrecord; counts the hot path's
    answers."""

    def __init__(self, chatrecord: Chatrecord, **settings: Any) -> None:
        options = {"token": TOKEN, "max_body_bytes": 4096, "wrong_token_wait": 0.0} | settings
        self.hot, self.plain = (create_app(lambda: chatrecord, HttpSettings(**options), hot=hot) for hot in (True, False))
        assert self.hot.hot is not None and self.plain.hot is None  # type: ignore[attr-defined]
        self.answered = 0
        hot_routes = self.hot.hot  # type: ignore[attr-defined]
        lines, turn = hot_routes.lines, hot_routes.turn

        async def counted_lines(request: Any) -> Any:
            self.answered += 1
            return await lines(request)

        async def counted_turn(request: Any, *args: Any) -> Any:
            self.answered += 1
            return await turn(request, *args)

        hot_routes.lines, hot_routes.turn = counted_lines, counted_turn
        for app in (self.hot, self.plain):
            app.state.chatrecord = chatrecord  # no lifespan: the two apps share the store, neither closes it
        self.clients = [TestClient(app, raise_server_exceptions=False) for app in (self.hot, self.plain)]

    def same(self, method: str, url: str, *, hot: bool = True, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        """Sends the request to both apps, hot first, each on its own conversation (the other app's request
        names OTHER: `other`); asserts they answer alike and that the hot path answered it (`hot`) or left
        it to FastAPI; returns the answer."""
        before = self.answered
        answers = []
        for client, swap in zip(self.clients, (False, True), strict=True):
            content = kwargs.get("content")
            content = content() if callable(content) else content  # a streamed body, made anew for each
            if swap and isinstance(content, bytes):
                content = other(content)
            headers = {name: other(value) if swap else value for name, value in (kwargs.get("headers") or {}).items()}
            response = client.request(method, other(url) if swap else url, content=content, headers=headers)
            body = response.content.replace(OTHER.encode(), CONV.encode()) if swap else response.content
            answers.append((response.status_code, list(response.headers.multi_items()), body))
        assert answers[0] == answers[1], (method, url)
        assert self.answered - before == (1 if hot else 0), (method, url, "hot path taken" if not hot else "not taken")
        status, headers, body = answers[0]
        return status, dict(headers), body


def other(text: Any) -> Any:
    """`text` naming OTHER for CONV (as sent, escaped in a path, in an Idempotency-Key)."""
    pairs = ((CONV, OTHER), (quote(CONV, safe=""), quote(OTHER, safe="")), ("key-7", "key-8"))
    for mine, theirs in pairs:
        text = text.replace(mine.encode(), theirs.encode()) if isinstance(text, bytes) else text.replace(mine, theirs)
    return text


def line(type_: str, **fields: Any) -> bytes:
    return orjson.dumps({"type": type_, "conversation": CONV, "at": AT} | fields)


STARTED = line("conversation_started", kind="chat", owner=7)
MESSAGE = line("user_message", message=1, text="Hallo", page=42)


def problem_of(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, str, str]:
    status, headers, body = answer
    return status, headers["content-type"], orjson.loads(body)["type"].removeprefix("urn:chatrecord:problem:")


def test_lines_and_their_errors_answer_as_fastapis_route(chatrecord: Chatrecord) -> None:
    apps = Apps(chatrecord)
    json = AUTH | {"Content-Type": "application/json"}

    # the token: none, a wrong one, a malformed scheme
    assert problem_of(apps.same("POST", "/v1/lines", content=STARTED))[:1] == (401,)
    assert apps.same("POST", "/v1/lines", content=STARTED)[1]["www-authenticate"] == 'Bearer realm="chatrecord"'
    assert apps.same("POST", "/v1/lines", content=STARTED, headers={"Authorization": "Bearer wrong-token-xxxxxxxx"})[0] == 401
    assert apps.same("POST", "/v1/lines", content=STARTED, headers={"Authorization": f"Bearer  {TOKEN}"})[0] == 401
    # the body: over the limit (declared and streamed), not JSON, not a line, a wrong media type or charset
    assert problem_of(apps.same("POST", "/v1/lines", content=b"x" * 5000, headers=json)) == (
        413,
        "application/problem+json",
        "body-too-large",
    )
    streamed = apps.same("POST", "/v1/lines", content=lambda: iter([b"x" * 3000, b"x" * 3000]), headers=json)
    assert problem_of(streamed)[0] == 413
    assert problem_of(apps.same("POST", "/v1/lines", content=b'{"type": ', headers=json)) == (
        400,
        "application/problem+json",
        "unreadable-json",
    )
    assert problem_of(apps.same("POST", "/v1/lines", content=b'{"type": "nonsense"}', headers=json))[0] == 422
    text = AUTH | {"Content-Type": "text/plain"}
    assert problem_of(apps.same("POST", "/v1/lines", content=STARTED, headers=text))[2] == "unsupported-media-type"
    latin = AUTH | {"Content-Type": "application/json; charset=latin-1"}
    assert problem_of(apps.same("POST", "/v1/lines", content=STARTED, headers=latin))[0] == 415
    # headers of the wrong form, a query parameter the operation does not take
    assert problem_of(apps.same("POST", "/v1/lines", content=STARTED, headers=json | {"If-Match": "7"}))[0] == 400
    assert problem_of(apps.same("POST", "/v1/lines", content=STARTED, headers=json | {"Idempotency-Key": "\x01key"}))[0] == 400
    assert problem_of(apps.same("POST", "/v1/lines?dry=1", content=STARTED, headers=json))[0] == 400

    # recorded: the hot app first, then the same line to the other (a repeat: the first result)
    status, headers, body = apps.same("POST", "/v1/lines", content=STARTED, headers=json)
    assert (status, headers["etag"], orjson.loads(body)["version"]) == (200, '"1"', 1)
    assert headers["content-type"] == "application/json"
    status, headers, body = apps.same("POST", "/v1/lines", content=MESSAGE, headers=json | {"If-Match": '"1"'})
    assert (status, headers["etag"]) == (200, '"2"')
    # a version mismatch; an idempotency key's kept response (the key first sent to the app without the
    # hot path), and the key reused with another body
    later = line("user_message", message=2, text="Weiter", page=42)
    assert problem_of(apps.same("POST", "/v1/lines", content=later, headers=json | {"If-Match": '"9"'}))[:3:2] == (
        412,
        "version-mismatch",
    )
    keyed = json | {"Idempotency-Key": "hot-key-7"}
    for content, headers in ((later, keyed), (other(later), {name: other(v) for name, v in keyed.items()})):
        assert apps.clients[1].post("/v1/lines", content=content, headers=headers).status_code == 200
    status, headers, body = apps.same("POST", "/v1/lines", content=later, headers=keyed)
    assert (status, headers["idempotent-replayed"], headers["etag"]) == (200, "true", '"3"')
    assert problem_of(apps.same("POST", "/v1/lines", content=MESSAGE, headers=keyed))[2] == "idempotency-key-reused"

    # other methods on the path are FastAPI's (405 with Allow)
    for method in ("GET", "PUT", "DELETE", "HEAD"):
        status, headers, _ = apps.same(method, "/v1/lines", hot=False, headers=AUTH)
        assert (status, headers["allow"]) == (405, "POST")


def test_a_waiting_client_gets_the_same_429(chatrecord: Chatrecord) -> None:
    apps = Apps(chatrecord, wrong_token_wait=30.0)
    wrong = {"Authorization": "Bearer wrong-token-xxxxxxxx"}
    assert apps.same("POST", "/v1/lines", content=STARTED, headers=wrong)[0] == 401
    status, headers, body = apps.same("GET", TURN, headers=wrong)
    assert (status, headers["retry-after"], orjson.loads(body)["type"]) == (
        429,
        "30",
        "urn:chatrecord:problem:too-many-wrong-tokens",
    )


def test_the_turn_read_and_its_errors_answer_as_fastapis_route(chatrecord: Chatrecord) -> None:
    apps = Apps(chatrecord)
    # an unknown conversation; without a token
    assert problem_of(apps.same("GET", TURN, headers=AUTH)) == (404, "application/problem+json", "unknown-conversation")
    assert apps.same("GET", TURN)[0] == 401
    chatrecord.record_lines([STARTED], "test")
    chatrecord.record_lines([other(STARTED)], "test")
    status, headers, body = apps.same("GET", TURN, headers=AUTH)  # no user message yet
    assert (status, headers["etag"]) == (200, '"1"')
    chatrecord.record_lines([MESSAGE], "test")
    chatrecord.record_lines([other(MESSAGE)], "test")

    status, headers, body = apps.same("GET", TURN, headers=AUTH)
    assert (status, headers["etag"], headers["content-type"]) == (200, '"2"', "application/json")
    assert orjson.loads(body) == chatrecord.turn_notes(CONV).to_json()
    # pages, the whole input: read by the hot path; the same id with its slashes unescaped
    assert apps.same("GET", TURN + "?visible_page=42&visible_page=7&hidden_page=0", headers=AUTH)[0] == 200
    full = apps.same("GET", TURN + "?messages=full", headers=AUTH)
    assert "messages" in orjson.loads(full[2])
    assert apps.same("GET", "/v1/conversations/tenant/7/hot-chat/turn", headers=AUTH)[2] == body
    # a Chatrecord-Read-After of the wrong form; an empty one is as none
    assert problem_of(apps.same("GET", TURN, headers=AUTH | {"Chatrecord-Read-After": "soon"}))[0] == 400
    assert apps.same("GET", TURN, headers=AUTH | {"Chatrecord-Read-After": ""})[2] == body

    # queries the hot path leaves to FastAPI: an unknown parameter, a page not a number, messages not full
    for query in ("?page=1", "?visible_page=x", "?visible_page=007", "?messages=some", "?messages=full&messages=full"):
        status, headers, answer = apps.same("GET", TURN + query, hot=False, headers=AUTH)
        assert status in (200, 400), query
    assert problem_of(apps.same("GET", TURN + "?visible_page=x", hot=False, headers=AUTH))[2] == "bad-request"
    # other methods, and paths the turn's pattern does not match, are FastAPI's
    assert apps.same("HEAD", TURN, hot=False, headers=AUTH)[0] == 405
    assert apps.same("POST", TURN, hot=False, headers=AUTH)[0] == 405
    assert apps.same("DELETE", TURN, hot=False, headers=AUTH)[0] == 405
    assert apps.same("GET", "/v1/conversations//turn", hot=False, headers=AUTH)[0] in (404, 409)
    assert apps.same("GET", "/v1/conversations/turn", hot=False, headers=AUTH)[0] == 404


def test_a_bug_on_the_hot_path_is_the_same_500(chatrecord: Chatrecord, monkeypatch: pytest.MonkeyPatch) -> None:
    apps = Apps(chatrecord)
    chatrecord.record_lines([STARTED, MESSAGE], "test")
    chatrecord.record_lines([other(STARTED), other(MESSAGE)], "test")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(chatrecord, "turn_notes", broken)
    assert problem_of(apps.same("GET", TURN, headers=AUTH)) == (500, "application/problem+json", "internal")


def test_a_body_that_does_not_arrive_in_time_is_the_same_408(chatrecord: Chatrecord) -> None:
    apps = Apps(chatrecord, body_timeout=0.2)

    async def call(app: FastAPI) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/lines",
            "raw_path": b"/v1/lines",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"authorization", AUTH["Authorization"].encode()), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
        }

        async def receive() -> dict[str, Any]:
            await asyncio.sleep(5)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent

    before = apps.answered
    answers = [asyncio.run(call(app)) for app in (apps.hot, apps.plain)]
    assert apps.answered == before + 1
    assert answers[0] == answers[1]
    assert answers[0][0]["status"] == 408 and (b"connection", b"close") in answers[0][0]["headers"]


def test_the_hot_path_reads_only_plain_page_numbers_and_messages_full() -> None:
    assert pages_of(b"") == (PageFilter(frozenset(), frozenset()), False)
    assert pages_of(b"visible_page=1&visible_page=20&hidden_page=0&messages=full") == (
        PageFilter(frozenset({1, 20}), frozenset({0})),
        True,
    )
    assert pages_of(b"visible%5Fpage=3") == (PageFilter(frozenset({3}), frozenset()), False)
    for other in (b"page=1", b"visible_page=", b"visible_page=-1", b"visible_page=01", b"messages=", b"visible_page=%EF%BC%91"):
        assert pages_of(other) is None, other


def test_offload_returns_raises_carries_the_context_and_runs_calls_at_once() -> None:
    import contextvars
    import threading

    from adapters.http.offload import offload

    name: contextvars.ContextVar[str] = contextvars.ContextVar("name", default="none")
    barrier = threading.Barrier(5, timeout=10)

    def meet() -> str:
        barrier.wait()  # five calls on five threads at once, or a BrokenBarrierError
        return threading.current_thread().name

    def fail() -> None:
        raise KeyError("k")

    async def main() -> None:
        name.set("request-1")
        assert await offload(lambda: (name.get(), threading.current_thread() is threading.main_thread())) == ("request-1", False)
        with pytest.raises(KeyError, match="k"):
            await offload(fail)
        assert len(set(await asyncio.gather(*(offload(meet) for _ in range(5))))) == 5
        # a request cancelled while its call runs: the call ends, its outcome is dropped
        started = threading.Event()
        release = threading.Event()

        def slow() -> int:
            started.set()
            release.wait(10)
            return 1

        task = asyncio.ensure_future(offload(slow))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await offload(lambda: 2) == 2

    asyncio.run(main())


def test_with_fastapis_own_tracing_on_fastapi_answers_and_traces_the_hot_requests(chatrecord: Chatrecord) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    apps = Apps(chatrecord)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for app in (apps.hot, apps.plain):
        telemetry = getattr(app, "_native_telemetry", None)
        if telemetry is None:  # FastAPI before its own tracing (0.16x); CI installs one with it
            if _in_ci():
                pytest.fail("this FastAPI has no tracing of its own; CI installs one that has", pytrace=False)
            pytest.skip("this FastAPI has no tracing of its own")
        telemetry.config["tracer_provider"] = provider  # this app's own, not the process's global provider

    json = AUTH | {"Content-Type": "application/json"}
    assert apps.same("POST", "/v1/lines", hot=False, content=STARTED, headers=json)[0] == 200
    assert apps.same("GET", TURN, hot=False, headers=AUTH)[0] == 200
    spans = exporter.get_finished_spans()
    routes = sorted(str((span.attributes or {}).get("http.route")) for span in spans if span.kind.name == "SERVER")
    assert routes == sorted(["/v1/lines"] * 2 + ["/v1/conversations/{conversation}/turn"] * 2), routes
