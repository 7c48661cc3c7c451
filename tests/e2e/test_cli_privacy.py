"""No error of the CLI or the API quotes what the privacy filter drops (issue 35, item 9): the
lines of tests/unit/test_dropped_unquoted.py, each with a secret planted in a dropped field,
through `chatrecord ingest`, `chatrecord replay FILE --json` and `POST /v1/lines`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.http.app import HttpSettings, create_app
from tests.e2e.conftest import Run, runner
from tests.unit.test_dropped_unquoted import AT, PLANTED, SECRET

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "dropped-token-0123456789"
SHOWN = [text for name, text in PLANTED.items() if name.startswith(("toolArguments", "future", "a step", "an unknown"))]
"""The lines the CLI gets (two runs a line): one dropped field in each way, and the others."""


def test_the_cli_and_the_api_quote_no_dropped_secret(tmp_path: Path) -> None:
    run: Run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "store.sqlite"))
    start = json.dumps({"type": "conversation_started", "conversation": "c", "at": AT, "kind": "chat", "owner": 7})
    chatrecord = Chatrecord(open_store(memory=True))
    chatrecord.record(json.loads(start))
    app = create_app(lambda: chatrecord, HttpSettings(token=TOKEN))
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    said: list[str] = []
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for text in PLANTED.values():
            posted = client.post("/v1/lines", content=text, headers=headers)
            assert (posted.status_code, posted.json()["type"]) == (422, "urn:chatrecord:problem:bad-line"), text
            said.append(posted.text)
    for number, text in enumerate(SHOWN):
        (tmp_path / f"s{number}.jsonl").write_text(f"{start}\n{text}\n", encoding="utf-8")
        ingest, replay = run("ingest", f"s{number}.jsonl"), run("replay", f"s{number}.jsonl", "--json")
        assert (ingest.returncode, replay.returncode) == (1, 1), text
        assert ingest.stderr.startswith(f"error: s{number}.jsonl: line 2, ") and replay.stderr.startswith(
            f"error: s{number}.jsonl: line 2, "
        )
        said += [ingest.stdout, ingest.stderr, replay.stdout, replay.stderr]
    assert len(said) == len(PLANTED) + 4 * len(SHOWN) and len(SHOWN) >= 10
    assert [text for text in said if SECRET in text] == []
