"""`chatrecord list` and `chatrecord export`, run as the user runs them: the bug-report round
trip (export on the server, ingest and replay on another machine), an erased conversation, and
the ids as list prints them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.e2e.conftest import Run, json_lines, runner

DEMO = Path(__file__).parent.parent / "data" / "demo_seo_tour.jsonl"


def test_an_export_ingested_on_another_machine_replays_the_same_turns(store_run: Run, tmp_path: Path) -> None:
    store_run("ingest", DEMO)
    listed = store_run("list")
    exported = store_run("export", "conv-demo-seo", "-o", "bug.jsonl")
    other = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "other.sqlite"))
    ingested = other("ingest", "bug.jsonl")

    assert listed.stdout == (
        "conversation   kind  owner  messages  segments  events  first activity        last activity         erased  status\n"
        "conv-demo-seo  chat      7         3         8      20  2026-10-28T09:00:00Z  2026-10-31T14:05:00Z\n"
    )
    size = (tmp_path / "bug.jsonl").stat().st_size
    assert (exported.returncode, exported.stdout) == (0, "")
    assert exported.stderr == f"bug.jsonl: 19 lines of conv-demo-seo, {size:,} bytes\n"  # it said nothing
    assert ingested.stdout == "bug.jsonl: 20 events appended, 0 lines already recorded\n"
    for args in (["replay", "--conversation", "conv-demo-seo", "--at", "3", "--json"], ["audit", "conv-demo-seo", "--json"]):
        assert other(*args).stdout == store_run(*args).stdout, args
    assert other("replay", "bug.jsonl", "--json").stdout == store_run("replay", "-c", "conv-demo-seo", "--json").stdout
    assert other("verify").returncode == 0
    # the other store keys the lines' digests with its own data key, and finds them again
    assert other("ingest", "bug.jsonl").stdout == "bug.jsonl: 0 events appended, 19 lines already recorded\n"
    assert other("ingest", DEMO).stdout.endswith(": 0 events appended, 19 lines already recorded\n")


def test_an_erased_conversation_exports_its_facts_and_says_so(sqlite_run: Run) -> None:
    sqlite_run("ingest", DEMO)
    sqlite_run("erase", "conv-demo-seo", "--yes")
    exported = sqlite_run("export", "conv-demo-seo", "--upto", "1")
    listed = json_lines(sqlite_run("list", "--json").stdout)
    shown = sqlite_run("list").stdout.splitlines()[1].split()

    assert exported.stderr == (
        "note: conversation conv-demo-seo was erased; its texts are exported as [erased]; the file carries no erasure: "
        "an ingest of it stores [erased] as the texts of a conversation not erased\n"
    )  # found by a fresh user: the copy is not marked erased
    lines = json_lines(exported.stdout)
    assert [line["type"] for line in lines] == ["conversation_started", "user_message", "segment_returned"]
    assert (lines[1]["text"], lines[2]["answer"]) == ("[erased]", "[erased]")
    assert [(c["conversation"], c["erased"], c["events"]) for c in listed[0]["conversations"]] == [("conv-demo-seo", True, 21)]
    # the last activity is the chat's last time, not the erasure's (it was the erasure's, now)
    assert shown == [
        "conv-demo-seo",
        "chat",
        "7",
        "3",
        "8",
        "21",
        "2026-10-28T09:00:00Z",
        "2026-10-31T14:05:00Z",
        "erased",
        "erased",
    ]
    assert listed[0]["conversations"][0]["last_at"] == "2026-10-31T14:05:00Z"


def test_an_erasure_does_not_move_a_conversation_to_the_front_of_the_list(store_run: Run) -> None:
    store_run("ingest", DEMO, DEMO.parent / "behalten_tour.jsonl")
    store_run("erase", "conv-behalten", "--yes")  # the older conversation

    listed = store_run("list")
    since = store_run("list", "--since", "2026-10-30T00:00:00Z")

    assert listed.stdout == (
        "conversation   kind  owner  messages  segments  events  first activity        last activity         erased  status\n"
        "conv-demo-seo  chat      7         3         8      20  2026-10-28T09:00:00Z  2026-10-31T14:05:00Z\n"
        "conv-behalten  chat      7         5         4      13  2026-10-28T09:00:00Z  2026-10-28T09:10:00Z  erased  erased\n"
    )
    assert [line.split()[0] for line in since.stdout.splitlines()] == ["conversation", "conv-demo-seo"]


def test_a_conversation_whose_chain_is_broken_exports_with_a_warning_and_exit_1(tmp_path: Path) -> None:
    # A changed event would otherwise be carried into a store that chains it anew and verifies.
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    run("ingest", DEMO)
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute(
            "UPDATE stored_events SET state = replace(state, '\"uid\":42}', '\"uid\":7}') "
            "WHERE originator_id = ? AND originator_version = 8",
            ("5d91b7e3ea14590fbbd7a5f872bc7e3d",),  # conversation_uuid("conv-demo-seo").hex
        )
    exported = run("export", "conv-demo-seo", "-o", "bug.jsonl")

    assert (exported.returncode, exported.stdout) == (1, "")
    assert exported.stderr.split("\n", 1)[1] == (
        "warning: the hash chain of conversation conv-demo-seo does not verify, broken at version 8 (changed): "
        "the event's stored bytes were changed after it was appended; the export holds the events as the store "
        "holds them now, the changed one among them, and a store it is ingested into chains them anew "
        "(chatrecord verify names the break)\n"
    )
    assert len(json_lines((tmp_path / "bug.jsonl").read_text())) == 19  # written all the same, as the store holds it


def test_export_upto_a_number_that_is_no_user_message_is_an_error_naming_the_valid_ones(sqlite_run: Run) -> None:
    sqlite_run("ingest", DEMO)  # user messages 1, 2 (a question's answer) and 3
    past, after_last, last = (sqlite_run("export", "conv-demo-seo", "--upto", n) for n in ("99", "4", "3"))

    for wrong, number in ((past, 99), (after_last, 4)):
        assert (wrong.returncode, wrong.stdout) == (1, "")
        assert wrong.stderr == (
            f"error: --upto {number}: no user message {number}; the conversation's user messages are 1, 2, 3\n"
        )
    assert last.returncode == 0 and len(json_lines(last.stdout)) == 19


def test_list_pages_and_its_mistakes_are_one_line(sqlite_run: Run) -> None:
    sqlite_run("ingest", DEMO)
    bad_cursor = sqlite_run("list", "--cursor", "nonsense")
    bad_since = sqlite_run("list", "--since", "2026-10-28")
    unknown = sqlite_run("export", "nope")

    # a value that is no cursor is wrong usage, as a --since that is no time (exit 2; a fresh user
    # found the one exiting 1, the other 2)
    assert bad_cursor.returncode == 2 and "Invalid value for '--cursor': 'nonsense' is not a cursor" in bad_cursor.stderr
    assert bad_since.returncode == 2 and "is a date without a time of day" in bad_since.stderr
    assert unknown.returncode == 1 and unknown.stderr.startswith("error: no conversation 'nope' in")
    assert sqlite_run("list", "--since", "2026-11-01T00:00:00Z").stdout == "no conversations since 2026-11-01T00:00:00Z\n"


def test_dash_as_the_output_file_is_standard_output(sqlite_run: Run, tmp_path: Path) -> None:
    sqlite_run("ingest", DEMO)
    exported, page = sqlite_run("export", "conv-demo-seo", "-o", "-"), sqlite_run("timeline", "conv-demo-seo", "-o", "-")

    assert (exported.returncode, len(json_lines(exported.stdout))) == (0, 19)
    assert (page.returncode, page.stdout[:15]) == (0, "<!DOCTYPE html>")
    assert not (tmp_path / "-").exists()
