"""A user's mistake ends in one line on stderr: bad input and unknown names exit 1, wrong usage
exits 2, and neither prints a traceback."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import DATA, DEMO, Run, json_lines

BAD_TABLE = DATA / "bad_table_mid_file.jsonl"
LINE_4 = 'bad_table_mid_file.jsonl: line 4, steps[3].writeTargetTable: "tt content" is not a table name; use 1–64 of A-Za-z0-9_'


def test_a_bad_line_stops_the_ingestion_and_the_lines_before_it_stay_stored(sqlite_run: Run):
    stopped = sqlite_run("ingest", BAD_TABLE)
    audited = sqlite_run("audit", "conv-demo-seo", "--json")

    assert (stopped.returncode, stopped.stderr) == (1, f"error: {LINE_4}\n")
    assert stopped.stdout == "bad_table_mid_file.jsonl: 4 events appended, 0 lines already recorded; stopped at line 4\n"
    assert [row["kind"] for row in json_lines(audited.stdout)[0]] == ["started", "skill", "message", "segment"]


def test_skip_bad_rejects_the_bad_line_names_it_and_stores_the_rest(sqlite_run: Run):
    sqlite_run("ingest", BAD_TABLE)

    skipped = sqlite_run("ingest", "--skip-bad", BAD_TABLE)

    assert (skipped.returncode, skipped.stderr) == (0, f"rejected: {LINE_4}\n")
    assert skipped.stdout == "bad_table_mid_file.jsonl: 1 event appended, 3 lines already recorded, 1 line rejected\n"


def test_ingesting_the_same_file_twice_changes_nothing(sqlite_run: Run):
    first = sqlite_run("ingest", DEMO)
    again = sqlite_run("ingest", DEMO)
    audited = sqlite_run("audit", "conv-demo-seo", "--json")

    assert first.stdout == "demo_seo_tour.jsonl: 20 events appended, 0 lines already recorded\n"
    assert again.stdout == "demo_seo_tour.jsonl: 0 events appended, 19 lines already recorded\n"
    assert [row["version"] for row in json_lines(audited.stdout)[0] if row["kind"] != "card_outcome"] == list(range(1, 21))


def test_a_bad_line_in_a_replayed_file_names_file_line_and_field(sqlite_run: Run):
    failed = sqlite_run("replay", DATA / "bad_json_mid_file.jsonl")

    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr == (
        "error: bad_json_mid_file.jsonl: line 6, (line): not valid JSON (unexpected end of data at column 182); "
        "each line is one JSON object\n"
    )


def test_an_unknown_conversation_is_one_line_and_exit_1(sqlite_run: Run):
    sqlite_run("ingest", DEMO)

    unknown = sqlite_run("audit", "conv-nope")

    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr.startswith("error: no conversation 'conv-nope' in SQLite file ")
    assert unknown.stderr.endswith(" (stored: conv-demo-seo)\n")


def test_a_turn_that_never_started_is_one_line_and_exit_1(sqlite_run: Run):
    missing = sqlite_run("replay", DEMO, "--at", "2")

    assert (missing.returncode, missing.stderr) == (
        1,
        "error: --at 2: no turn starts at user message 2; turns start at messages 1, 3\n",
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["replay"], id="replay-without-file-or-conversation"),
        pytest.param(["replay", DEMO, "--rules", "2026-13-01"], id="unknown-rule-set"),
        pytest.param(["audit"], id="audit-without-id"),
    ],
)
def test_wrong_usage_exits_2_without_a_traceback(sqlite_run: Run, args):
    wrong = sqlite_run(*args)

    assert (wrong.returncode, wrong.stdout) == (2, "")
    assert "Usage: chatrecord" in wrong.stderr or "Usage: python -m adapters.cli" in wrong.stderr
    assert "Traceback" not in wrong.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--rules", "bogus"],
        ["rebuild", "--rules", "bogus"],
        ["replay", DEMO, "--rules", "bogus"],
        ["audit", "conv-demo-seo", "--rules", "bogus"],
        ["rebuild", "--diff", "--rules", "bogus"],
    ],
    ids=["demo", "rebuild", "replay", "audit", "diff"],
)
def test_an_unknown_rule_set_is_named_with_the_rule_sets_there_are(sqlite_run: Run, args) -> None:
    wrong = sqlite_run(*args)
    shown = " ".join(line.strip("│ ") for line in wrong.stderr.splitlines())
    assert (wrong.returncode, wrong.stdout) == (2, "")
    assert "Invalid value for '--rules': 'bogus' is not one of 'transcript-only', '2026-11-01', '2026-11-02'." in shown
    assert "Value error" not in wrong.stderr


@pytest.mark.parametrize("command", ["ingest", "replay"])
def test_a_missing_file_is_one_line_and_exit_1(sqlite_run: Run, tmp_path, command: str):
    missing = sqlite_run(command, "nofile.jsonl")

    assert (missing.returncode, missing.stdout, missing.stderr) == (1, "", "error: nofile.jsonl: no such file\n")
    assert not (tmp_path / "store.sqlite").exists()


def test_a_missing_file_after_a_good_one_stores_nothing(sqlite_run: Run, tmp_path):
    missing = sqlite_run("ingest", DEMO, "nofile.jsonl")

    assert (missing.returncode, missing.stdout, missing.stderr) == (1, "", "error: nofile.jsonl: no such file\n")
    assert not (tmp_path / "store.sqlite").exists()


@pytest.mark.parametrize("command", ["ingest", "replay"])
def test_a_folder_given_as_file_is_one_line_and_exit_1(sqlite_run: Run, tmp_path, command: str):
    (tmp_path / "folder.jsonl").mkdir()

    folder = sqlite_run(command, "folder.jsonl")

    assert (folder.returncode, folder.stderr) == (1, "error: folder.jsonl: is a folder, not a file\n")


@pytest.mark.parametrize("content", ["", "\n  \n"], ids=["no-lines", "blank-lines"])
def test_replaying_a_file_without_a_conversation_is_one_line_and_exit_1(sqlite_run: Run, tmp_path, content: str):
    (tmp_path / "empty.jsonl").write_text(content, encoding="utf-8")

    empty = sqlite_run("replay", "empty.jsonl")
    empty_json = sqlite_run("replay", "empty.jsonl", "--json")

    expected = "error: empty.jsonl holds no conversation; replay a JSON Lines file the chat wrote\n"
    assert (empty.returncode, empty.stdout, empty.stderr) == (1, "", expected)
    assert (empty_json.returncode, empty_json.stdout, empty_json.stderr) == (1, "", expected)
