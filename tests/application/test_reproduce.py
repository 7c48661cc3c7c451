"""`Chatrecord.reproduce` (issue 40) against the scripted OpenAI-compatible server of
tests/model_server.py: the input sent is the replay's, byte for byte; each complete answer is
kept in a reproduction stream of its own, sealed with the conversation's data key, on memory,
SQLite and PostgreSQL; the server's faults end in one clear line with nothing half-stored; erase
leaves no answer readable."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from adapters.api import Chatrecord, ModelNotSet, ModelSettings, ModelUnusable, demo_lines
from adapters.backends.settings import postgres_env, sqlite_env
from adapters.bootstrap import build_store, open_store
from adapters.service.model_endpoint import shown_url
from adapters.service.reproduce import Report, reproduction_rows, stream_chains
from adapters.store.reproductions import ANSWER, GENESIS, STARTED, StreamConflict, new_row, verify_rows
from domain.errors import InvalidInput
from domain.events import conversation_uuid
from tests.model_server import ModelServer, Scripted

DEMO = "conv-demo-seo"
DENIAL = "Hier wurde nichts geprüft oder geändert, es wurde nichts gespeichert."


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as started:
        yield started


@pytest.fixture
def model(server: ModelServer) -> ModelSettings:
    server.script.clear()
    server.requests.clear()
    server.default = Scripted()
    return ModelSettings(url=server.url, model=server.MODEL, key=server.KEY, retries=1, timeout=2.0, concurrency=3)


def open_chat(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Chatrecord:
    if backend == "memory":
        store = open_store(memory=True)
    elif backend == "sqlite":
        store = build_store(sqlite_env(tmp_path / "store.sqlite"))
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        store = build_store({**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "2"})
    chat = Chatrecord(store)
    chat.ingest(demo_lines(), "demo")
    return chat


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def chat(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chatrecord]:
    chatrecord = open_chat(request.param, tmp_path, request)
    yield chatrecord
    chatrecord.close()


@pytest.fixture
def memory_chat(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chatrecord]:
    chatrecord = open_chat("memory", tmp_path, request)
    yield chatrecord
    chatrecord.close()


def test_ten_answers_under_two_rule_sets_are_kept_apart_from_the_log_and_erase_leaves_none_readable(
    chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    log_before = len(chat.events(DEMO))
    server.script = [Scripted(text=DENIAL), Scripted(text="Nothing was saved.")]

    report = chat.reproduce(DEMO, n=5, model=model)

    assert [(row["rules"], row["answers"]) for row in report.rows()] == [("transcript-only", 5), ("2026-11-02", 5)]
    assert sum(row["denials"] for row in report.rows()) == 2
    assert len(server.requests) == 10
    kept = chat.reproductions(DEMO)
    assert [(r.rules, r.message, len(r.answers)) for r in kept] == [("transcript-only", 3, 5), ("2026-11-02", 3, 5)]
    for done in kept:  # what was sent is the replay's input, byte for byte, and its hash is kept
        shown = chat.replay(DEMO, done.rules, at=3).to_json()["turns"][-1]["messages"]
        assert shown in [request["messages"] for request in server.requests]
        assert (
            done.input_sha256 == hashlib.sha256(json.dumps(shown, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
        )
        assert done.log_version == log_before
        assert done.model == ModelServer.MODEL and done.chain_broken_at is None
        assert all(a.usage["prompt_tokens"] == 120 and a.latency_ms >= 0 for a in done.answers)
    texts = sorted(a.text for r in kept for a in r.answers)
    assert DENIAL in texts and "Nothing was saved." in texts
    assert len(chat.events(DEMO)) == log_before  # the chat's record is not written

    chat.erase(DEMO)

    assert {a.text for r in chat.reproductions(DEMO) for a in r.answers} == {"[erased]"}
    assert len(chat.reproductions(DEMO)) == 2  # the facts stay: what was sent, when, the verdicts


def test_the_denial_is_counted_under_transcript_only_in_the_specs_form(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    model = ModelSettings(**{**model.__dict__, "concurrency": 1})
    server.script = [Scripted(text=DENIAL), Scripted(text=DENIAL)]

    report = memory_chat.reproduce(DEMO, n=5, model=model)

    assert report.sentence() == "2 of 5 answers deny the saves under transcript-only; 0 of 5 under 2026-11-02"
    rows = report.rows()
    assert rows[0]["naming_writes"] == 3 and rows[1]["naming_writes"] == 5  # the default names "Seite 42"
    assert report.to_json()["rubric"] == "denial-rules-2026-12-07"


def test_an_answer_cut_off_at_the_token_limit_is_kept_and_counted_apart(
    chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    model = ModelSettings(**{**model.__dict__, "concurrency": 1})
    server.script = [Scripted(text=DENIAL + " Weil", finish_reason="length"), Scripted(text=DENIAL)]

    report = chat.reproduce(DEMO, n=3, model=model)

    assert report.sentence() == (
        "2 of 3 answers deny the saves under transcript-only (1 cut off at the token limit); 0 of 3 under 2026-11-02"
    )
    assert [(row["rules"], row["cut_off"]) for row in report.rows()] == [("transcript-only", 1), ("2026-11-02", 0)]
    kept = chat.reproductions(DEMO)  # read back from the store, not the run's own objects
    assert [[a.finish_reason for a in r.answers] for r in kept] == [["length", "stop", "stop"], ["stop"] * 3]
    assert [r.to_json()["cut_off"] for r in kept] == [1, 0]
    assert Report(DEMO, tuple(kept)).sentence() == report.sentence()


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (Scripted(malformed=True), "answered a body that is not JSON"),
        (Scripted(drop=True), "broke the connection off before an answer was whole"),
        (Scripted(status=500), "answered HTTP 500"),
        (Scripted(status=429), "too many requests (HTTP 429"),
        (Scripted(delay=5), "did not answer within 0.5 s"),
        (Scripted(text="Titel " * 40_000), "answered 240,000 characters, more than the 200,000 an answer may hold (not kept)"),
    ],
)
def test_a_fault_of_the_server_is_one_line_and_stores_nothing_half(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings, fault: Scripted, said: str
) -> None:
    model = ModelSettings(**{**model.__dict__, "timeout": 0.5, "concurrency": 1})
    server.default = fault

    with pytest.raises(ModelUnusable) as raised:
        memory_chat.reproduce(DEMO, n=2, model=model)

    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert str(raised.value).endswith("no answer was kept")
    assert memory_chat.reproductions(DEMO) == []


def test_a_run_broken_off_keeps_the_answers_completed_before_it(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    model = ModelSettings(**{**model.__dict__, "concurrency": 1})
    server.script = [Scripted(text=DENIAL), Scripted(text="Titel gespeichert.")]
    server.default = Scripted(malformed=True)

    with pytest.raises(ModelUnusable, match="2 complete answer"):
        memory_chat.reproduce(DEMO, n=5, model=model)

    kept = memory_chat.reproductions(DEMO)
    assert [(r.rules, [a.text for a in r.answers]) for r in kept] == [("transcript-only", [DENIAL, "Titel gespeichert."])]


def test_a_retried_429_is_not_a_fault(memory_chat: Chatrecord, server: ModelServer, model: ModelSettings) -> None:
    server.script = [Scripted(status=429)]
    report = memory_chat.reproduce(DEMO, rules=["2026-11-02"], n=1, model=ModelSettings(**{**model.__dict__, "concurrency": 1}))
    assert [row["answers"] for row in report.rows()] == [1]
    assert len(server.requests) == 2


def test_an_endpoints_usage_that_is_no_count_is_left_out_and_the_answer_kept(
    chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    usage = {
        "prompt_tokens": -5,
        "completion_tokens": 10**30,
        "total_tokens": "a",
        "cached": True,
        "completion_tokens_details": {"reasoning_tokens": 7, "audio_tokens": 1.5},
        "prompt_tokens_details": {"cached_tokens": -1},
    }
    server.script = [Scripted(text=DENIAL, usage=usage)]

    report = chat.reproduce(DEMO, rules=["2026-11-02"], n=1, model=model)

    assert [row["answers"] for row in report.rows()] == [1]
    [kept] = chat.reproductions(DEMO)
    assert [(a.text, a.usage) for a in kept.answers] == [(DENIAL, {"completion_tokens_details": {"reasoning_tokens": 7}})]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"key": "wrong"}, "refused the key (HTTP 401); set CHATRECORD_MODEL_KEY"),
        (
            {"model": "no-such-model"},
            "does not know the model 'no-such-model' (HTTP 404); set CHATRECORD_MODEL to a model it serves",
        ),
        ({"url": "http://127.0.0.1:9/"}, "does not answer (ConnectError)"),
        ({"url": "http://127.0.0.1:9/v1"}, "does not answer (ConnectError); start the server or set CHATRECORD_MODEL_URL"),
    ],
)
def test_a_refused_key_an_unknown_model_and_an_endpoint_that_is_down_are_said_in_one_line(
    memory_chat: Chatrecord, model: ModelSettings, change: dict[str, str], said: str
) -> None:
    with pytest.raises(ModelUnusable, match="no answer was kept") as raised:
        memory_chat.reproduce(DEMO, n=1, model=ModelSettings(**{**model.__dict__, **change}))
    assert said in str(raised.value)
    assert memory_chat.reproductions(DEMO) == []


def test_no_model_configured_names_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHATRECORD_MODEL_URL", raising=False)
    monkeypatch.setenv("CHATRECORD_MODEL", "m")
    with pytest.raises(ModelNotSet, match="^set CHATRECORD_MODEL_URL: the OpenAI-compatible endpoint"):
        ModelSettings.from_env()


@pytest.mark.parametrize("url", ["notaurl", "127.0.0.1:8000/v1", "ftp://127.0.0.1/v1", "http:///v1"])
def test_an_endpoint_url_that_is_no_http_url_is_said_before_any_request(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings, url: str
) -> None:
    with pytest.raises(ModelNotSet) as raised:
        memory_chat.reproduce(DEMO, n=1, model=ModelSettings(**{**model.__dict__, "url": url}))

    assert str(raised.value) == (
        f"CHATRECORD_MODEL_URL {url!r} is not an http:// or https:// URL; set it to the endpoint's base URL, "
        "e.g. http://127.0.0.1:8000/v1"
    )
    assert server.requests == [] and memory_chat.reproductions(DEMO) == []


def test_a_changed_answer_row_breaks_its_streams_chain_and_a_moved_text_does_not_open(
    tmp_path: Path, request: pytest.FixtureRequest, server: ModelServer, model: ModelSettings
) -> None:
    chat = open_chat("sqlite", tmp_path, request)
    try:
        chat.reproduce(DEMO, rules=["transcript-only"], n=2, model=model)
        rows = reproduction_rows(chat.store).of_conversation(str(conversation_uuid(DEMO)))
        assert verify_rows(rows) is None
        with sqlite3.connect(tmp_path / "store.sqlite") as conn:
            conn.execute(
                "UPDATE chatrecord_reproductions SET body = replace(body, '\"latency_ms\":', '\"latency_ms\":1') WHERE seq = 2"
            )
        assert chat.reproductions(DEMO)[0].chain_broken_at == 2
    finally:
        chat.close()


def test_a_judge_model_answers_under_its_rubric_and_its_verdicts_are_counted(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    model = ModelSettings(**{**model.__dict__, "concurrency": 1, "judge": ModelServer.JUDGE})
    server.script = [Scripted(text="Es wurde nichts gespeichert.")]

    report = memory_chat.reproduce(DEMO, rules=["transcript-only"], n=2, model=model)

    assert report.sentence() == "1 of 2 answers deny the saves under transcript-only"
    assert report.to_json()["rubric"] == "denial-model-2026-12-07"
    answers = memory_chat.reproductions(DEMO)[0].answers
    assert [(a.judged.judge, a.judged.names_writes) for a in answers if a.judged] == [("judge-model", True)] * 2
    assert [a.verdict.rubric for a in answers] == ["denial-rules-2026-12-07"] * 2  # the rules' verdict is kept too

    server.judge_replies = ["I think it denies."]
    with pytest.raises(ModelUnusable, match="answered no verdict in the rubric's JSON"):
        memory_chat.reproduce(DEMO, rules=["transcript-only"], n=1, model=model)
    assert [len(r.answers) for r in memory_chat.reproductions(DEMO)] == [2]  # the answer whose verdict failed is not kept


def test_a_streams_first_event_and_answer_are_stored_together_or_not_at_all(chat: Chatrecord) -> None:
    rows = reproduction_rows(chat.store)
    cid = str(conversation_uuid(DEMO))
    stream = "00000000-0000-4000-8000-000000000001"
    started = new_row(stream, 0, cid, STARTED, {"at": "2026-12-07T00:00:00Z"}, GENESIS)
    answer = new_row(stream, 1, cid, ANSWER, {"text": "x"}, started.hash)
    rows.append(started)

    with pytest.raises(StreamConflict):
        rows.append(answer, new_row(stream, 0, cid, STARTED, {"at": "again"}, GENESIS))

    assert [(row.seq, row.body) for row in rows.of_conversation(cid)] == [(0, started.body)]  # the answer was rolled back
    rows.append(answer)
    assert verify_rows(rows.of_conversation(cid)) is None


def test_a_password_in_the_endpoints_url_is_neither_kept_nor_said(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    assert shown_url("http://user:secret@10.0.0.5:8000/v1") == "http://10.0.0.5:8000/v1"  # what a reproduction keeps
    assert shown_url(model.url) == model.url
    down = ModelSettings(**{**model.__dict__, "url": "http://user:secret@127.0.0.1:9/v1", "retries": 0})
    with pytest.raises(ModelUnusable) as raised:
        memory_chat.reproduce(DEMO, n=1, model=down)
    assert "secret" not in str(raised.value) and "http://127.0.0.1:9/v1" in str(raised.value)


def empty_store_beside(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Chatrecord:
    """Returns an empty store of `backend`: another SQLite file, another PostgreSQL schema."""
    if backend == "memory":
        return Chatrecord(open_store(memory=True))
    if backend == "sqlite":
        return Chatrecord(build_store(sqlite_env(tmp_path / "other.sqlite")))
    import psycopg
    from psycopg import sql

    url, schema = request.getfixturevalue("postgres_url"), f"chatrecord_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))

    def drop() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    request.addfinalizer(drop)
    return Chatrecord(build_store({**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "2"}))


def written(records: tuple[dict[str, object], ...]) -> list[bytes]:
    """Returns the records as `chatrecord export` writes them, one JSON line each."""
    return [orjson.dumps(record) + b"\n" for record in records]


def test_export_carries_the_reproductions_after_unchanged_lines_and_ingest_keeps_them_in_another_store(
    chat: Chatrecord, server: ModelServer, model: ModelSettings, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    server.script = [Scripted(text=DENIAL)]
    chat.reproduce(DEMO, n=2, model=model)
    plain = chat.export(DEMO)

    full = chat.export(DEMO, with_reproductions=True)

    assert full.lines == plain.lines and full.broken is None  # the chat's lines as without the option
    assert [(r["type"], r["rules"], len(r["answers"])) for r in full.reproductions] == [  # type: ignore[arg-type]
        ("reproduction", "transcript-only", 2),
        ("reproduction", "2026-11-02", 2),
    ]
    assert chat.export(DEMO, upto=2, with_reproductions=True).reproductions == ()  # both are of message 3
    other = empty_store_beside(request.node.callspec.params["chat"], tmp_path, request)
    try:
        report = other.ingest(written(full.records()), "full.jsonl")
        assert (report.stopped, report.appended, report.reproductions) == (None, len(chat.events(DEMO)), 2)
        assert [r.to_json() for r in other.reproductions(DEMO)] == [r.to_json() for r in chat.reproductions(DEMO)]
        assert DENIAL in {a.text for r in other.reproductions(DEMO) for a in r.answers}
        assert stream_chains(other.store, DEMO).to_json() == {"reproductions_of": DEMO, "streams": 2, "ok": True, "broken": {}}
        assert other.export(DEMO, with_reproductions=True).records() == full.records()

        again = other.ingest(written(full.records()), "full.jsonl")

        assert (again.appended, again.reproductions, again.repeated) == (0, 0, len(full.lines) + 2)
        assert len(other.reproductions(DEMO)) == 2
    finally:
        other.close()


def test_an_erased_conversations_reproductions_are_exported_without_their_texts(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    server.script = [Scripted(text=DENIAL)]
    memory_chat.reproduce(DEMO, rules=["transcript-only"], n=2, model=model)
    memory_chat.erase(DEMO)

    done = memory_chat.export(DEMO, with_reproductions=True)

    answers = [a for r in done.reproductions for a in r["answers"]]  # type: ignore[attr-defined]
    assert [a["text"] for a in answers] == ["[erased]", "[erased]"]
    assert sorted(a["verdict"]["denies"] for a in answers) == [False, True]  # the verdicts are facts, kept
    data = b"".join(written(done.records()))
    assert DENIAL.encode() not in data and "geprüft".encode() not in data


def test_a_reproduction_record_is_refused_before_its_conversation_and_by_the_chats_line_endpoint(
    memory_chat: Chatrecord, server: ModelServer, model: ModelSettings
) -> None:
    memory_chat.reproduce(DEMO, rules=["2026-11-02"], n=1, model=model)
    record = written(memory_chat.export(DEMO, with_reproductions=True).reproductions)
    empty = Chatrecord(open_store(memory=True))

    report = empty.ingest(record, "only.jsonl")

    assert str(report.stopped) == (
        f"only.jsonl: line 1: reproduction {orjson.loads(record[0])['reproduction']} is of conversation 'conv-demo-seo', "
        "which the store does not hold; ingest the conversation's lines before it (export writes them first)"
    )
    assert empty.ingest([b'{"type": "reproduction", "conversation": "c", "answers": []}\n'], "bad.jsonl").stopped is not None
    with pytest.raises(InvalidInput, match=r"type: a reproduction record is read by `chatrecord ingest`"):
        empty.record(record[0])
    empty.close()
