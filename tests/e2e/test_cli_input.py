"""The command line's habits around input (issue 8, items 6 and 8): ids found as the chat names
them, standard input, versions, JSON summaries, escapes, and no store made by a reading command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import DEMO, ROOT, Run, cli_env, runner

AT = "2026-10-28T09:00:00Z"


def lines(*data: dict) -> str:
    return "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in data)


CHAT_17 = lines(
    {"type": "conversation_started", "conversation": "chat 17", "at": AT, "kind": "chat", "owner": 7},
    {"type": "user_message", "conversation": "chat 17", "at": AT, "message": 1, "text": "Hallo", "page": 0},
)


def test_a_conversation_id_with_a_space_is_found_by_audit_and_replay(sqlite_run: Run, tmp_path: Path) -> None:
    (tmp_path / "chat17.jsonl").write_text(CHAT_17, encoding="utf-8")
    assert sqlite_run("ingest", "chat17.jsonl").returncode == 0
    audit = sqlite_run("audit", "chat 17", "--json")
    replay = sqlite_run("replay", "--conversation", "chat 17", "--json")
    assert (audit.returncode, replay.returncode) == (0, 0), audit.stderr + replay.stderr
    assert [row["kind"] for row in json.loads(audit.stdout)] == ["started", "message"]
    assert json.loads(replay.stdout)["conversation"] == "chat 17"
