"""`chatrecord replay FILE`: every turn's model input read from a file in memory, time travel
with --at, pages the user may not see, and the --json contract against its expected file."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.service.line_commands import read_events
from projections.turn import replay_json, replay_turns
from tests.e2e.conftest import DATA, DEMO, Run, json_lines, runner

EXPECTED = DATA / "expected_demo_replay.json"
REGENERATE = "python -m adapters.cli replay tests/data/demo_seo_tour.jsonl --json > tests/data/expected_demo_replay.json"


def test_replay_json_of_the_demo_is_the_contract_and_writes_nothing(sqlite_run: Run, tmp_path: Path):
    replayed = sqlite_run("replay", DEMO, "--json")

    assert (replayed.returncode, replayed.stderr) == (0, "")
    [document] = json_lines(replayed.stdout)
    assert document == replay_json("conv-demo-seo", "2026-11-02", replay_turns(read_events(DEMO)))
    assert list(document) == ["conversation", "rules", "turns"]
    assert [list(turn) for turn in document["turns"]] == [
        ["message", "at", "view_context", "messages", "notes", "record", "card_outcomes"]
    ] * 2
    assert replayed.stdout == EXPECTED.read_text(encoding="utf-8"), f"contract changed? if meant: {REGENERATE}"
    assert not (tmp_path / "store.sqlite").exists()


def test_at_1_travels_back_to_the_first_turn_as_the_model_saw_it(sqlite_run: Run):
    replayed = sqlite_run("replay", DEMO, "--at", "1", "--json")

    [document] = json_lines(replayed.stdout)
    [turn] = document["turns"]
    assert (turn["message"], turn["notes"], turn["record"], turn["card_outcomes"]) == (1, [], [], [])
    assert turn["view_context"] == {"pageId": 42, "lastPageId": 42}
    assert turn["messages"] == [
        {"role": "system", "content": "The selected page is page 42."},
        {"role": "user", "content": "SEO optimieren"},
    ]


def test_a_page_the_user_may_not_see_is_never_named(sqlite_run: Run):
    shown = sqlite_run("replay", DEMO, "--deny-page", "42")
    sent = sqlite_run("replay", DEMO, "--deny-page", "42", "--json")

    assert shown.returncode == 0
    assert "42" not in shown.stdout
    assert "a page not named here" in " ".join(shown.stdout.split())
    prompts = [(m["content"], turn["notes"]) for turn in json_lines(sent.stdout)[0]["turns"] for m in turn["messages"]]
    assert "42" not in json.dumps(prompts)


def usage_error(stderr: str) -> str:
    """Returns the words of the boxed error a usage error prints, its lines joined."""
    inside = [line.strip("│ ") for line in stderr.splitlines() if line.startswith("│")]
    return " ".join(inside)


def test_a_denied_page_beyond_a_page_id_is_a_usage_error_as_list_owner_is(sqlite_run: Run):
    """Found by a fresh user: `--deny-page 99999999999999999999` exited 0, the page id no page can have."""
    assert sqlite_run("ingest", DEMO).returncode == 0

    denied = sqlite_run("replay", DEMO, "--deny-page", "99999999999999999999")
    owner = sqlite_run("list", "--owner", "99999999999999999999")
    largest = sqlite_run("replay", DEMO, "--deny-page", "2147483647", "--json")

    assert (denied.returncode, denied.stdout) == (2, "")
    assert usage_error(denied.stderr) == (
        "Invalid value for '--deny-page': 99999999999999999999 is not in the range 1<=x<=2147483647."
    )
    assert (owner.returncode, usage_error(owner.stderr)) == (
        2,
        "Invalid value for '--owner': 99999999999999999999 is not in the range 0<=x<=2147483647.",
    )
    assert (largest.returncode, largest.stdout) == (0, sqlite_run("replay", DEMO, "--json").stdout)


def test_replay_text_shows_each_turn_with_its_notes_boxed(sqlite_run: Run):
    shown = sqlite_run("replay", DEMO, "--at", "3")

    lines = shown.stdout.splitlines()
    assert lines[0].startswith("conv-demo-seo · message 3 · 2026-10-31 14:05:00 UTC · rules 2026-11-02 ─")
    assert lines[1:4] == [
        "╭─ system ─────────────────────────────────────────────────────────────────────╮",
        "│ No page is selected now. The page last selected in this conversation is page │",
        "│ 42. The transcript and the chat records say which pages earlier steps worked │",
    ]
    assert "│ ┏━ chat record · 1 note ━" in shown.stdout
    assert "│ ┃ • The run of a user message paused for a question. Tools run: get_page   ┃ │" in lines
    assert '6 messages sent, 14 notes among them; each is sent as "[Chat record — written by' in lines


ESCAPES = "\u001b[2J\u001b[31mRED \u001b]0;TITLE\u0007 \u009b2J\r"


def escape_file(folder: Path) -> Path:
    """Writes a conversation whose user message holds terminal escape sequences."""
    lines = [
        {
            "type": "conversation_started",
            "at": "2026-10-28T09:00:00Z",
            "kind": "chat",
            "owner": 7,
            "conversation": "conv-escapes",
        },
        {
            "type": "user_message",
            "at": "2026-10-28T09:00:05Z",
            "message": 1,
            "text": ESCAPES,
            "page": 42,
            "conversation": "conv-escapes",
        },
    ]
    path = folder / "escapes.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_control_characters_in_chat_text_are_shown_never_sent_to_the_terminal(sqlite_run: Run, tmp_path: Path):
    path = escape_file(tmp_path)
    sqlite_run("ingest", path)

    for shown in (sqlite_run("replay", path), sqlite_run("replay", "--conversation", "conv-escapes")):
        assert shown.returncode == 0
        assert not any(character in shown.stdout for character in "\x1b\x07\x9b\r")
        assert r"│ \x1b[2J\x1b[31mRED \x1b]0;TITLE\x07 \x9b2J\x0d " in shown.stdout


def test_replay_json_keeps_control_characters_escaped_by_json(sqlite_run: Run, tmp_path: Path):
    sent = sqlite_run("replay", escape_file(tmp_path), "--json")

    assert "\x1b" not in sent.stdout and "\\u001b[2J" in sent.stdout
    assert json_lines(sent.stdout)[0]["turns"][0]["messages"][1] == {"role": "user", "content": ESCAPES}


def test_a_conversation_with_no_user_messages_says_so_plainly(tmp_path: Path) -> None:
    """Found by a fresh user: replay printed nothing, `--at 1` said "turns start at messages
    none" and `export --upto 1` "the user messages are none"."""
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    started = '{"type":"conversation_started","conversation":"empty1","at":"2026-11-02T10:00:00Z","kind":"chat","owner":7}\n'
    (tmp_path / "empty.jsonl").write_text(started)
    assert run("ingest", "empty.jsonl").returncode == 0
    whole = run("replay", "--conversation", "empty1")
    at = run("replay", "--conversation", "empty1", "--at", "1")
    upto = run("export", "empty1", "--upto", "1")
    assert (whole.returncode, whole.stdout, whole.stderr) == (
        0,
        "",
        "empty1: no turns to replay: the conversation has no user messages yet\n",
    )
    assert (at.returncode, at.stderr) == (1, "error: --at 1: no turn starts at user message 1: there are no user messages yet\n")
    assert (upto.returncode, upto.stderr) == (
        1,
        "error: --upto 1: no user message 1; the conversation has no user messages yet\n",
    )
