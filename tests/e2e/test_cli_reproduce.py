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
        ["transcript-only", "5", "2", "3"],
        ["2026-11-02", "5", "0", "5"],
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
