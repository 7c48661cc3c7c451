"""`POST` and `GET /v1/conversations/{id}/reproductions` (issue 40) in process, against the
scripted model server of tests/model_server.py: the answers are what the document's models say,
field for field; a server without a model configured answers 409 model-not-set, an endpoint that
fails 502 model-unavailable with nothing half-stored."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter

from adapters.api import Chatrecord, demo_lines
from adapters.bootstrap import open_store
from adapters.http import schemas
from adapters.http.app import HttpSettings, create_app
from tests.model_server import ModelServer, Scripted

with warnings.catch_warnings():  # starlette's TestClient warns, at import, that it prefers httpx2
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

PATH = "/v1/conversations/conv-demo-seo/reproductions"


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as started:
        yield started


@pytest.fixture
def client(model: ModelServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    model.script.clear()
    model.default = Scripted()
    monkeypatch.setenv("CHATRECORD_MODEL_URL", model.url)
    monkeypatch.setenv("CHATRECORD_MODEL", model.MODEL)
    monkeypatch.setenv("CHATRECORD_MODEL_KEY", model.KEY)

    def opened() -> Chatrecord:
        chatrecord = Chatrecord(open_store(memory=True))
        chatrecord.ingest(demo_lines(), "demo")
        return chatrecord

    with TestClient(create_app(opened, HttpSettings(token=None))) as started:
        yield started


def strictly(model: Any, body: bytes) -> Any:
    """Validates `body` strictly against `model` and checks the model writes it back as sent."""
    adapter = TypeAdapter(model)
    parsed = adapter.validate_json(body, strict=True)
    assert orjson.loads(adapter.dump_json(parsed)) == orjson.loads(body)
    return parsed


def test_a_reproduction_answers_the_table_as_the_document_says_and_is_listed(client: TestClient, model: ModelServer) -> None:
    model.script = [Scripted(text="Es wurde nichts gespeichert.")]

    done = client.post(PATH, json={"rules": ["transcript-only"], "n": 2})

    assert done.status_code == 201, done.text
    report = strictly(schemas.ReproductionReport, done.content)
    assert report.summary == "1 of 2 answers deny the saves under transcript-only"
    assert [(row.rules, row.answers, row.denials) for row in report.table] == [("transcript-only", 2, 1)]
    listed = strictly(list[schemas.Reproduction], client.get(PATH).content)
    assert [(r.rules, len(r.answers), r.chain_ok) for r in listed] == [("transcript-only", 2, True)]
    assert sorted(a.text for a in listed[0].answers) == sorted(a.text for a in report.reproductions[0].answers)


def test_without_a_model_configured_the_answer_is_409_model_not_set(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATRECORD_MODEL_URL")

    refused = client.post(PATH, json={})

    assert (refused.status_code, refused.json()["type"]) == (409, "urn:chatrecord:problem:model-not-set")
    assert client.get(PATH).json() == []


def test_an_endpoint_that_fails_is_502_and_keeps_nothing_half(client: TestClient, model: ModelServer) -> None:
    model.default = Scripted(malformed=True)

    failed = client.post(PATH, json={"n": 1})

    assert (failed.status_code, failed.json()["type"]) == (502, "urn:chatrecord:problem:model-unavailable")
    assert failed.json()["detail"].endswith("; no answer was kept")
    assert model.url not in failed.text  # the endpoint the server is configured with is for the operator's log
    assert client.get(PATH).json() == []


def test_an_unknown_conversation_is_404_and_a_bad_count_400(client: TestClient) -> None:
    assert client.post("/v1/conversations/nope/reproductions", json={}).status_code == 404
    assert client.get("/v1/conversations/nope/reproductions").status_code == 404
    assert client.post(PATH, json={"n": 0}).status_code == 400
    assert client.post(PATH, json={"rules": ["2099-01-01"]}).status_code == 400


def test_a_method_the_path_does_not_take_names_both_of_its_methods(client: TestClient) -> None:
    refused = client.request("OPTIONS", PATH)
    assert (refused.status_code, refused.headers["allow"]) == (405, "GET, POST")
    assert client.request("PUT", "/v1/lines").headers["allow"] == "POST"


def test_the_conversations_page_has_a_line_per_run_in_the_specs_form(client: TestClient, model: ModelServer) -> None:
    model.script = [Scripted(text="Nothing was saved."), Scripted(text="Nothing was saved.")]
    assert client.post(PATH, json={"n": 3}).status_code == 201

    page = client.get("/ui/conversations/conv-demo-seo")

    assert page.status_code == 200, page.text[:300]
    lines = [line for line in page.text.splitlines() if "reproduced" in line]
    assert len(lines) == 1 and "Nothing was saved." not in page.text
    # the two scripted denials go to whichever requests come first; the requests run at once
    counted = re.search(
        r"test-model · the turn of message 3: (\d) of 3 answers deny the saves under transcript-only; (\d) of 3 under 2026-11-02",
        lines[0],
    )
    assert counted is not None, lines[0]
    assert int(counted[1]) + int(counted[2]) == 2


def test_the_export_carries_the_reproductions_after_its_lines_when_asked(client: TestClient, model: ModelServer) -> None:
    model.script = [Scripted(text="Es wurde nichts gespeichert.")]
    assert client.post(PATH, json={"rules": ["transcript-only"], "n": 2}).status_code == 201
    export = "/v1/conversations/conv-demo-seo/export"

    plain = client.get(export)
    full = client.get(export, params={"with_reproductions": "true"})

    assert plain.status_code == full.status_code == 200
    assert full.content.startswith(plain.content)
    records = [orjson.loads(line) for line in full.content[len(plain.content) :].splitlines()]
    assert [(r["type"], r["rules"], r["message"]) for r in records] == [("reproduction", "transcript-only", 3)]
    assert sorted(a["text"] for a in records[0]["answers"]) == sorted(
        a.text for a in strictly(list[schemas.Reproduction], client.get(PATH).content)[0].answers
    )
