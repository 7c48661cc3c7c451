"""The three jobs on a real store, once per backend: the demo, replay of the stored log, the
audit, and rebuilding the projections under another rule set."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.ingest import read_events
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


def behalten_tour(path: Path) -> Path:
    """Writes an SEO tour on page 42 whose three cards are all declined with Behalten: nr-llm
    refuses each declined card's call with an error step of exactly 0.0 ms."""
    conv, run, at = "conv-behalten", "7c1d0b5e-2f4a-4b8e-9c3d-5a6b7c8d9e01", iter(range(60))

    def line(line_type: str, **fields) -> str:
        return json.dumps({"type": line_type, "conversation": conv, "at": f"2026-10-28T09:{next(at):02d}:00Z", **fields})

    def model(r: int) -> list[dict]:
        return [{"kind": "context", "round": r, "durationMs": 0.0}, {"kind": "request", "round": r, "durationMs": 0.0},
                {"kind": "llm", "round": r, "durationMs": 2100.0, "content": "(model text)"}]

    def progress(r: int) -> dict:
        return {"kind": "tool", "round": r, "durationMs": 2.0, "toolName": "chat_set_progress",
                "toolIsError": False, "toolOutcome": "ok"}

    def card(field: str) -> list[dict]:
        return [{"toolName": "update_page_metadata", "table": "pages", "uid": 42, "fields": [field]}]

    refused = {"kind": "tool", "round": 1, "durationMs": 0.0, "toolName": "update_page_metadata",
               "toolResult": "Error: approval_denied", "toolIsError": True, "toolOutcome": "failed"}
    fields = ["title", "og_title", "og_description"]
    lines = [
        line("conversation_started", kind="chat", owner=7),
        line("user_message", message=1, text="SEO optimieren", page=42, skill="3:seo-optimieren"),
        line("segment_returned", segment=f"{run}/1", run=run, trigger="turn", outcome="awaiting_approval",
             answer="Ich schlage einen Titel vor.", steps=[*model(1), progress(1)], pending=card(fields[0])),
    ]
    for n in range(3):
        last = n == 2
        lines.append(line("card_decided", segment=f"{run}/{n + 1}", approved=False, answer="Behalten",
                          message=n + 2, text="Behalten"))
        lines.append(line("segment_returned", segment=f"{run}/{n + 2}", run=run, trigger="approval",
                          outcome="completed" if last else "awaiting_approval",
                          answer="Fertig." if last else "Ich schlage etwas anderes vor.",
                          steps=[{**refused, "round": n + 1}, *model(n + 2), progress(n + 2)],
                          pending=[] if last else card(fields[n + 1])))
    lines.append(line("tour_ended"))
    lines.append(line("user_message", message=5, text="was ist hier passiert?", page=0, skill=None))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_rebuild_diff_names_the_records_the_amendment_changes_and_switches_nothing(store_run: Run, tmp_path: Path):
    tour = behalten_tour(tmp_path / "behalten.jsonl")
    assert store_run("ingest", tour).stdout == "behalten.jsonl: 12 events appended, 0 lines already recorded\n"
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
