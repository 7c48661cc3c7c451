"""The three jobs on a real store, once per backend: the demo, replay of the stored log, the
audit, and rebuilding the projections under another rule set."""

from __future__ import annotations

from pathlib import Path

from adapters.service.line_commands import read_events
from projections.turn import replay_json, replay_turns
from tests.e2e.conftest import DEMO, Run, json_lines

CONV = "conv-demo-seo"
SEGMENTS = 8


def test_the_demo_prints_the_question_with_its_notes_and_a_second_run_stores_nothing(store_run: Run):
    first = store_run("demo")
    again = store_run("demo")

    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout.splitlines()[0].startswith("demo_seo_tour.jsonl: 20 events appended, 0 lines already recorded (")
    assert "conv-demo-seo · message 3 · 2026-10-31 14:05:00 UTC · rules 2026-11-02" in first.stdout
    assert "│ was ist hier passiert?" in first.stdout
    assert first.stdout.count("chat record · ") == 8
    assert "6 messages sent, 14 notes among them" in first.stdout
    assert again.returncode == 0
    assert again.stdout.splitlines()[0].startswith("demo_seo_tour.jsonl: 0 events appended, 19 lines already recorded (")
    assert again.stdout.splitlines()[1:] == first.stdout.splitlines()[1:]


def test_the_demo_under_transcript_only_shows_the_turn_without_any_record_after_it(sqlite_run: Run):
    shown = sqlite_run("demo", "--rules", "transcript-only")

    assert shown.returncode == 0
    default, _, before = shown.stdout.partition("rules transcript-only")
    assert "14 notes among them" in default
    assert "6 messages sent, no notes." in before
    assert "│ No page is selected.  " in before
    assert "The same turn under each rule set" in before


def test_replay_of_the_stored_log_is_the_turn_input_replay_turns_gives(store_run: Run):
    assert store_run("ingest", DEMO).returncode == 0

    replayed = store_run("replay", "--conversation", CONV, "--json")

    assert (replayed.returncode, replayed.stderr) == (0, "")
    assert json_lines(replayed.stdout) == [replay_json(CONV, "2026-11-02", replay_turns(read_events(DEMO)))]


def test_the_audit_lists_every_segment_and_decision_with_the_records_written(store_run: Run):
    assert store_run("ingest", DEMO).returncode == 0

    audited = store_run("audit", CONV, "--json")

    assert (audited.returncode, audited.stderr) == (0, "")
    [rows] = json_lines(audited.stdout)
    segments = [r for r in rows if r["kind"] == "segment"]
    decisions = [r for r in rows if r["kind"] == "decision"]
    assert len(segments) == SEGMENTS
    assert [(d["approved"], d["answer"]) for d in decisions] == [(True, "Übernehmen")] * 6
    written = [(w["record"], w["completeness"]) for s in segments for w in s["written"]]
    assert written.count(("pages:42", "complete")) == 5
    assert written.count(("sys_file_reference:913", "complete")) == 1
    assert [r["at"] for r in rows] == sorted(r["at"] for r in rows)
    assert "Ich schlage" not in audited.stdout


def test_the_audit_table_names_each_segment_with_its_time(sqlite_run: Run):
    sqlite_run("ingest", DEMO)

    table = sqlite_run("audit", CONV)

    assert table.returncode == 0
    assert "Audit of conv-demo-seo · rule set 2026-11-02 · 26 rows, 8 segments" in table.stdout
    assert "2026-10-28 09:06:55   segment        3f6c2a9e…/8 (approval, after" in table.stdout


def test_rebuild_switches_the_rule_set_the_store_reads_under(store_run: Run):
    store_run("ingest", DEMO)

    rebuilt = store_run("rebuild", "--rules", "2026-11-01")
    replayed = store_run("replay", "--conversation", CONV, "--at", "3", "--json")

    assert (rebuilt.returncode, rebuilt.stdout) == (0, "rebuilt under 2026-11-01 (was 2026-11-02): 1 conversation, 20 events\n")
    assert json_lines(replayed.stdout)[0]["rules"] == "2026-11-01"


# ---------------------------------------------------------------- three times "Behalten"


BEHALTEN_TOUR = Path(__file__).parents[1] / "data" / "behalten_tour.jsonl"
"""An SEO tour on page 42 whose three cards are all declined with Behalten: nr-llm refuses each
declined card's call with an error step of exactly 0.0 ms at the continuation's start."""


def test_rebuild_diff_names_the_records_the_amendment_changes_and_switches_nothing(store_run: Run):
    assert store_run("ingest", BEHALTEN_TOUR).stdout == "behalten_tour.jsonl: 12 events appended, 0 lines already recorded\n"
    store_run("rebuild", "--rules", "2026-11-01")

    diff = store_run("rebuild", "--rules", "2026-11-02", "--diff")
    after = store_run("replay", "--conversation", "conv-behalten", "--at", "5", "--json")

    assert (diff.returncode, diff.stderr) == (0, "")
    assert diff.stdout.splitlines()[0] == "2026-11-01 → 2026-11-02: 1 conversation would change (nothing switched)"
    assert "conv-behalten: 3 record entries change" in diff.stdout
    words = " ".join(diff.stdout.split())
    assert words.count("- The continuation after a card decision") == 3
    assert words.count("Tools run: update_page_metadata (1 call, 1 failed).") == 3
    assert words.count("+ The continuation after a card decision") == 3
    assert json_lines(after.stdout)[0]["rules"] == "2026-11-01"


def test_the_audit_table_labels_the_event_version_v_and_ends_no_line_with_a_space(sqlite_run: Run):
    sqlite_run("ingest", DEMO)

    table = sqlite_run("audit", CONV)

    lines = table.stdout.splitlines()
    assert lines[2].split() == ["v", "time", "(UTC)", "event", "facts"]
    assert lines[4].startswith("   1   2026-10-28 09:00:00   started ")
    assert "v: the event's version in the log." in table.stdout
    assert [line for line in lines if line != line.rstrip()] == []


def test_text_output_ends_no_line_with_a_space(sqlite_run: Run):
    shown = sqlite_run("demo", "--rules", "transcript-only")

    assert shown.returncode == 0
    assert [line for line in shown.stdout.splitlines() if line != line.rstrip()] == []
