"""`chatrecord reproduce` (issue 40) on the command line, against the scripted server of
tests/model_server.py: ten answers under two rule sets and the table in the spec's form; the
answers listed by `--kept` and `audit` without their texts; an endpoint that is down is one
line with exit status 1; after `erase`, no answer is readable and none can be added."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import runner
from tests.model_server import ModelServer, Scripted

DENIAL = "Es wurde nichts gespeichert."


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as started:
        yield started


def test_reproduce_records_ten_answers_prints_the_table_and_erase_leaves_none_readable(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script = [Scripted(text=DENIAL), Scripted(text=DENIAL)]
    model = {"CHATRECORD_MODEL_URL": server.url, "CHATRECORD_MODEL": server.MODEL, "CHATRECORD_MODEL_KEY": server.KEY}
    run = runner(tmp_path, **model)
    assert run("demo").returncode == 0

    done = run("reproduce", "conv-demo-seo", "-n", "5", "--concurrency", "1")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "2 of 5 answers deny the saves under transcript-only; 0 of 5 under 2026-11-02"
    assert [line.split() for line in lines if line.startswith("  transcript-only") or line.startswith("  2026-11-02")] == [
        ["transcript-only", "5", "2", "3", "0"],
        ["2026-11-02", "5", "0", "5", "0"],
    ]
    kept = json.loads(run("reproduce", "conv-demo-seo", "--kept", "--json").stdout)
    assert sorted(len(r["answers"]) for r in kept) == [5, 5]
    assert DENIAL in {a["text"] for r in kept for a in r["answers"]}
    audit = run("audit", "conv-demo-seo").stdout
    assert audit.count("reproduced: ") == 2 and DENIAL not in audit
    assert "under transcript-only, model test-model: 5 answers, 2 deny the saves, 3 name the writes" in audit

    down = runner(tmp_path, **{**model, "CHATRECORD_MODEL_URL": "http://127.0.0.1:9/v1"})(
        "reproduce", "conv-demo-seo", "--retries", "0"
    )
    assert (down.returncode, down.stdout) == (1, "")
    assert down.stderr == (
        "error: the model endpoint http://127.0.0.1:9/v1 does not answer (ConnectError); "
        "start the server or set CHATRECORD_MODEL_URL; no answer was kept\n"
    )

    assert run("erase", "conv-demo-seo", "--yes").returncode == 0
    after = json.loads(run("reproduce", "conv-demo-seo", "--kept", "--json").stdout)
    assert {a["text"] for r in after for a in r["answers"]} == {"[erased]"}
    refused = run("reproduce", "conv-demo-seo", "-n", "1")
    assert (refused.returncode, refused.stderr) == (
        1,
        "error: conversation 'conv-demo-seo' was erased: no answer to it can be kept\n",
    )
    assert len(server.requests) == 10


def test_verify_holds_the_reproductions_chains_and_its_json_still_serves_as_heads(tmp_path: Path, server: ModelServer) -> None:
    model = {"CHATRECORD_MODEL_URL": server.url, "CHATRECORD_MODEL": server.MODEL, "CHATRECORD_MODEL_KEY": server.KEY}
    run = runner(tmp_path, **model)
    assert run("demo").returncode == 0
    assert run("reproduce", "conv-demo-seo", "-n", "2", "--rule-set", "2026-11-02").returncode == 0

    verified = run("verify")
    kept = run("verify", "--json")
    (tmp_path / "heads.json").write_text(kept.stdout)
    again = run("verify", "--against", "heads.json")

    assert verified.returncode == 0 and "reproductions of conv-demo-seo: 1 stream, ok" in verified.stdout.splitlines()
    assert {"reproductions_of": "conv-demo-seo", "streams": 1, "ok": True, "broken": {}} in [
        json.loads(x) for x in kept.stdout.splitlines()
    ]
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(tmp_path / "chatrecord.sqlite") as conn:
        conn.execute("DELETE FROM chatrecord_reproductions WHERE seq = 1")
    broken = run("verify")
    assert broken.returncode == 1
    assert "reproductions of conv-demo-seo: 1 stream, broken: " in broken.stderr and broken.stderr.rstrip().endswith(
        " at 2"
    )  # the row after the gap


def test_each_fault_of_the_server_ends_in_one_line_and_keeps_nothing_half(tmp_path: Path, server: ModelServer) -> None:
    model = {"CHATRECORD_MODEL_URL": server.url, "CHATRECORD_MODEL": server.MODEL, "CHATRECORD_MODEL_KEY": server.KEY}
    run = runner(tmp_path, **model)
    assert run("demo").returncode == 0
    server.script, server.default = [], Scripted()
    assert run("reproduce", "conv-demo-seo", "-n", "5").returncode == 0  # ten answers kept before the faults
    where = f"error: the model endpoint {server.url}"
    scripted = [
        (
            Scripted(status=429),
            f"{where} kept refusing for too many requests (HTTP 429, retried up to 1 time); lower --concurrency or wait",
        ),
        (Scripted(status=503), f"{where} answered HTTP 503 (retried up to 1 time): Error code: 503 - scripted 503"),
        (
            Scripted(malformed=True),
            f"{where} answered a body that is not JSON (Expecting value at character 37); check that CHATRECORD_MODEL_URL is an OpenAI-compatible API's base",
        ),
        (
            Scripted(drop=True),
            f"{where} broke the connection off before an answer was whole (RemoteProtocolError, retried up to 1 time)",
        ),
        (Scripted(delay=3), f"{where} did not answer within 0.5 s (retried up to 1 time); raise --timeout or check the server"),
    ]
    for fault, said in scripted:
        server.requests.clear()
        server.default = fault

        done = run("reproduce", "conv-demo-seo", "-n", "5", "--retries", "1", "--timeout", "0.5", "--concurrency", "1")

        assert (done.returncode, done.stdout, done.stderr) == (1, "", said + "; no answer was kept\n")
        assert len(server.requests) == (1 if fault.malformed else 2)  # the request and its one retry; a 200 is not retried
    server.default = Scripted()
    settings = [
        ({"CHATRECORD_MODEL_KEY": "wrong"}, f"{where} refused the key (HTTP 401); set CHATRECORD_MODEL_KEY to a key it accepts"),
        (
            {"CHATRECORD_MODEL": "nope"},
            f"{where} does not know the model 'nope' (HTTP 404); set CHATRECORD_MODEL to a model it serves",
        ),
        (
            {"CHATRECORD_MODEL_URL": server.url.removesuffix("/v1")},
            f"error: the model endpoint {server.url.removesuffix('/v1')} has no chat completions at "
            f"{server.url.removesuffix('/v1')}/chat/completions (HTTP 404); "
            "set CHATRECORD_MODEL_URL to the API's base, e.g. ending in /v1",
        ),
    ]
    for changed, said in settings:
        done = runner(tmp_path, **{**model, **changed})("reproduce", "conv-demo-seo", "-n", "5")
        assert (done.returncode, done.stdout, done.stderr) == (1, "", said + "; no answer was kept\n")

    kept = json.loads(run("reproduce", "conv-demo-seo", "--kept", "--json").stdout)
    assert [len(r["answers"]) for r in kept] == [5, 5]  # nothing of the failed runs
    assert run("verify").returncode == 0


def test_export_with_reproductions_is_read_back_by_ingest_into_another_store(tmp_path: Path, server: ModelServer) -> None:
    model = {"CHATRECORD_MODEL_URL": server.url, "CHATRECORD_MODEL": server.MODEL, "CHATRECORD_MODEL_KEY": server.KEY}
    run = runner(tmp_path, **model)
    assert run("demo").returncode == 0
    server.script, server.default = [Scripted(text=DENIAL)], Scripted()
    assert run("reproduce", "conv-demo-seo", "-n", "2").returncode == 0
    assert run("export", "conv-demo-seo", "-o", "plain.jsonl").returncode == 0

    done = run("export", "conv-demo-seo", "--with-reproductions", "-o", "full.jsonl")

    assert done.returncode == 0 and done.stderr.startswith("full.jsonl: 19 lines and 2 reproductions of conv-demo-seo, ")
    plain, full = (tmp_path / "plain.jsonl").read_bytes(), (tmp_path / "full.jsonl").read_bytes()
    assert full.startswith(plain) and len(full[len(plain) :].splitlines()) == 2
    other = runner(tmp_path, **model, CHATRECORD_DB=str(tmp_path / "other.sqlite"))
    ingested = other("ingest", "full.jsonl")
    assert (ingested.returncode, ingested.stdout) == (
        0,
        "full.jsonl: 20 events appended, 0 lines already recorded, 2 reproductions kept\n",
    )
    assert (
        other("reproduce", "conv-demo-seo", "--kept", "--json").stdout
        == run("reproduce", "conv-demo-seo", "--kept", "--json").stdout
    )
    assert other("ingest", "full.jsonl").stdout == "full.jsonl: 0 events appended, 21 lines already recorded\n"
    assert json.loads(run("replay", "full.jsonl", "--json").stdout)["conversation"] == "conv-demo-seo"
    refused = run("export", "conv-demo-seo", "--with-reproductions", "--format", "otlp")
    assert refused.returncode == 2 and "--with-reproductions" in refused.stderr
