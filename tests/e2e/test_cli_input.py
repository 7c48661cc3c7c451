"""The command line's habits around input (issue 8, items 6 and 8): ids found as the chat names
them, standard input, versions, JSON summaries, escapes, and no store made by a reading command."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

from adapters.cli.render import visible
from adapters.cli.stdio import json_bytes
from tests.e2e.conftest import DEMO, ROOT, Run, cli_env, runner

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
    # named as the store keeps it, as list, export and turn print it (the README's promise; it printed
    # the id as typed, a fresh user found)
    assert json.loads(replay.stdout)["conversation"] == "chat17:h9a90eaf363ff759f"
    assert sqlite_run("audit", "chat 17").stdout.splitlines()[0].strip().startswith("Audit of chat17:h9a90eaf363ff759f ·")


def run_with_stdin(cwd: Path, stdin: str, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=cwd,
        input=stdin,
        env=cli_env(**settings),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_ingest_reads_standard_input_and_prints_a_json_summary(tmp_path: Path) -> None:
    store = str(tmp_path / "store.sqlite")
    first = run_with_stdin(tmp_path, DEMO.read_text(encoding="utf-8"), "ingest", "-", "--json", CHATRECORD_DB=store)
    again = run_with_stdin(tmp_path, DEMO.read_text(encoding="utf-8"), "ingest", "-", CHATRECORD_DB=store)
    assert (first.returncode, first.stderr) == (0, "")
    assert json.loads(first.stdout) == {
        "source": "stdin",
        "appended": 20,
        "repeated": 0,
        "reproductions": 0,
        "rejected": [],
        "stopped_at": None,
        "error": None,
        "last_line": 19,
        "interrupted": False,
    }
    assert again.stdout == "stdin: 0 events appended, 19 lines already recorded\n"


def test_ingest_json_names_where_a_file_stopped(sqlite_run: Run) -> None:
    result = sqlite_run("ingest", "--json", str(DEMO.parent / "bad_table_mid_file.jsonl"))
    error = (
        'bad_table_mid_file.jsonl: line 4, steps[3].writeTargetTable: "tt content" is not a table name; use 1–64 of A-Za-z0-9_'
    )
    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "source": "bad_table_mid_file.jsonl",
        "appended": 4,
        "repeated": 0,
        "reproductions": 0,
        "rejected": [],
        "stopped_at": 4,
        "error": error,
        "last_line": 3,
        "interrupted": False,
    }
    assert result.stderr == f"error: {error}\n"


def test_replay_reads_standard_input_as_it_reads_a_file(sqlite_run: Run, tmp_path: Path) -> None:
    from_file = sqlite_run("replay", str(DEMO), "--at", "1")
    from_stdin = run_with_stdin(tmp_path, DEMO.read_text(encoding="utf-8"), "replay", "-", "--at", "1")
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout


def test_version_prints_the_packages_version(sqlite_run: Run) -> None:
    result = sqlite_run("--version")
    expected = next(
        line.split('"')[1] for line in (ROOT / "pyproject.toml").read_text().splitlines() if line.startswith("version = ")
    )
    assert (result.returncode, result.stdout) == (0, f"chatrecord {expected}\n")


def test_rebuild_diff_json_lists_what_would_change(sqlite_run: Run) -> None:
    sqlite_run("ingest", str(DEMO))
    result = sqlite_run("rebuild", "--rules", "transcript-only", "--diff", "--json")
    diff = json.loads(result.stdout)
    assert (diff["from"], diff["to"], diff["switched"]) == ("2026-11-02", "transcript-only", False)
    [conversation] = diff["conversations"]
    assert (
        conversation["conversation"],
        len(conversation["notes_removed"]),
        conversation["notes_added"],
        conversation["records_changed"],
    ) == ("conv-demo-seo", 14, [], [])
    rebuilt = json.loads(sqlite_run("rebuild", "--rules", "2026-11-01", "--json").stdout)
    assert rebuilt == {
        "from": "2026-11-02",
        "to": "2026-11-01",
        "switched": True,
        "conversations": 1,
        "events": 20,
        "unreadable": [],
        "errors": [],
        "workers": 1,
    }


def test_rebuild_refuses_more_worker_processes_than_it_folds_in(sqlite_run: Run) -> None:
    sqlite_run("ingest", str(DEMO))
    for value in ("33", "99999999999999999999", "0"):
        result = sqlite_run("rebuild", "--workers", value)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr and "Invalid value for '--workers'" in result.stderr
    assert json.loads(sqlite_run("rebuild", "--workers", "32", "--json").stdout)["workers"] == 1  # SQLite: one writer


HIDDEN = "a\u202eb\u2066c\u2069d\u200ee\u2028f\u200bg\x9bh"


def test_bidi_zero_width_and_separator_characters_are_shown_as_escapes(sqlite_run: Run, tmp_path: Path) -> None:
    (tmp_path / "hidden.jsonl").write_text(
        lines(
            {"type": "conversation_started", "conversation": "h", "at": AT, "kind": "chat", "owner": 7},
            {"type": "user_message", "conversation": "h", "at": AT, "message": 1, "text": HIDDEN, "page": 0},
        ),
        encoding="utf-8",
    )
    text = sqlite_run("replay", "hidden.jsonl")
    as_json = sqlite_run("replay", "hidden.jsonl", "--json")
    assert "a\\u202eb\\u2066c\\u2069d\\u200ee\\u2028f\\u200bg\\x9bh" in text.stdout
    assert not any(c in text.stdout for c in "\u202e\u2066\u2069\u200e\u2028\u200b\x9b")
    assert "a\\u202eb\\u2066c\\u2069d\\u200ee\\u2028f\\u200bg\\u009bh" in as_json.stdout
    assert json.loads(as_json.stdout)["turns"][0]["messages"][1]["content"] == HIDDEN


def test_a_soft_hyphen_and_every_other_format_character_is_escaped_in_text_and_json(sqlite_run: Run, tmp_path: Path) -> None:
    hidden = "soft\u00adhyphen tag\U000e0041 sign\u0600 mark\u061c"
    (tmp_path / "soft.jsonl").write_text(
        lines(
            {"type": "conversation_started", "conversation": "s", "at": AT, "kind": "chat", "owner": 7},
            {"type": "user_message", "conversation": "s", "at": AT, "message": 1, "text": hidden, "page": 0},
        ),
        encoding="utf-8",
    )
    text = sqlite_run("replay", "soft.jsonl").stdout
    as_json = sqlite_run("replay", "soft.jsonl", "--json").stdout
    assert "soft\\xadhyphen tag\\U000e0041 sign\\u0600 mark\\u061c" in text
    assert "soft\\u00adhyphen tag\\udb40\\udc41 sign\\u0600 mark\\u061c" in as_json
    assert json.loads(as_json)["turns"][0]["messages"][1]["content"] == hidden
    for shown in (text, as_json):
        assert not any(unicodedata.category(c) == "Cf" for c in shown)
    every = "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf")
    assert not any(unicodedata.category(c) == "Cf" for c in visible(every) + json_bytes(every).decode())
    assert json.loads(json_bytes(every)) == every


def test_a_reading_command_on_a_mistyped_store_says_so_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "chatrecrod.sqlite"
    run = runner(tmp_path, CHATRECORD_DB=str(missing))
    for args in (["audit", "conv-demo-seo"], ["replay", "--conversation", "conv-demo-seo"], ["rebuild", "--diff"]):
        result = run(*args)
        assert (result.returncode, result.stdout) == (1, ""), args
        assert result.stderr == (
            f"error: no store at {missing}; check CHATRECORD_DB, or ingest into it first (chatrecord ingest FILE)\n"
        ), args
    assert not missing.exists()


def test_a_line_nested_255_levels_deep_is_one_error_line_on_each_backend(store_run: Run, tmp_path: Path) -> None:
    # issue 20, item 3: a traceback (TypeError: Recursion limit reached) before
    deep = '{"x": ' * 254 + "1" + "}" * 254
    line = (
        '{"type": "conversation_started", "conversation": "deep", "at": "' + AT + '", "kind": "chat", '
        '"owner": 7, "extra": ' + deep + "}\n"
    )
    (tmp_path / "deep.jsonl").write_text(line, encoding="utf-8")
    done = store_run("ingest", "deep.jsonl")
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "deep.jsonl: 0 events appended, 0 lines already recorded; stopped at line 1\n",
        "error: deep.jsonl: line 1, (a dropped key): is nested more than 64 levels deep, the most a line may "
        'be (README, "Input limits")\n',
    )
    assert store_run("audit", "deep").stderr.startswith("error: no conversation 'deep'")


def test_two_files_of_one_name_and_a_descriptor_are_reported_by_the_path_given(sqlite_run: Run, tmp_path: Path) -> None:
    # a new user ingested a/x.jsonl and b/x.jsonl: the error named "x.jsonl: line 2", not which of the two
    for folder, text in (("a", DEMO.read_text(encoding="utf-8")), ("b", CHAT_17 + '{"type": "user_mess\n')):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.jsonl").write_text(text, encoding="utf-8")

    done = sqlite_run("ingest", "a/x.jsonl", "b/x.jsonl")

    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "a/x.jsonl: 20 events appended, 0 lines already recorded",
        "b/x.jsonl: 2 events appended, 0 lines already recorded; stopped at line 3",
    ]
    assert done.stderr.startswith("error: b/x.jsonl: line 3, (line): not valid JSON")
    assert sqlite_run("ingest", "a/x.jsonl").stdout == "x.jsonl: 0 events appended, 19 lines already recorded\n"


def test_a_file_named_by_a_descriptor_is_reported_by_its_path(tmp_path: Path) -> None:
    # `chatrecord ingest <(zcat export.jsonl.gz)` was reported as "63: 20 events appended"
    with DEMO.open("rb") as demo:
        descriptor = demo.fileno()
        done = subprocess.run(
            [sys.executable, "-m", "adapters.cli", "ingest", f"/dev/fd/{descriptor}"],
            pass_fds=(descriptor,),
            cwd=tmp_path,
            env=cli_env(CHATRECORD_DB=str(tmp_path / "store.sqlite")),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
        )
    assert done.stdout == f"/dev/fd/{descriptor}: 20 events appended, 0 lines already recorded\n", done.stderr


def test_a_device_is_reported_by_the_path_given_not_its_stem(sqlite_run: Run) -> None:
    # `ingest /dev/null` said "null: 0 events appended" and "error: null holds no line"
    done = sqlite_run("ingest", "/dev/null")

    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "/dev/null: 0 events appended, 0 lines already recorded\n",
        "error: /dev/null holds no line; ingest a JSON Lines file the chat wrote\n",
    )


def test_standard_input_named_twice_is_wrong_usage_and_stores_nothing(tmp_path: Path) -> None:
    # `ingest - -` stored standard input, then failed on the second - as "stdin holds no line"
    store = tmp_path / "store.sqlite"
    done = run_with_stdin(tmp_path, DEMO.read_text(encoding="utf-8"), "ingest", "-", "-", CHATRECORD_DB=str(store))
    assert (done.returncode, done.stdout) == (2, "")
    said = " ".join(done.stderr.replace("│", " ").split())
    assert "Invalid value for 'FILE...': - (standard input) can be read once; give it once" in said
    assert not store.exists()
