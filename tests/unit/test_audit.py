"""The audit: the whole history, in order, read by the same step reading as the run record."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.service.line_commands import read_events
from domain.values import LegacyCardOutcome, RecordRef
from projections import run_record
from projections.audit import apply, audit, fold, initial
from projections.turn import build_turn_input
from tests.unit.factories import SKILL, Chat, call, model_round, refusal, seo_tour, tool


def kinds(rows, kind):
    return [r.to_json() for r in rows if r.kind == kind]


def test_the_audit_of_a_six_card_tour_lists_every_segment_decision_and_write():
    chat = Chat()
    seo_tour(chat, ["Übernehmen"] * 6)

    rows = audit(chat.events, "2026-11-02")

    assert len(kinds(rows, "segment")) == 7
    decisions = kinds(rows, "decision")
    assert [(d["approved"], d["answer"]) for d in decisions] == [(True, "Übernehmen")] * 6
    written = [w for s in kinds(rows, "segment") for w in s["written"]]
    assert {(w["record"], w["completeness"]) for w in written} == {
        ("pages:42", "complete"),
        ("sys_file_reference:913", "complete"),
    }
    assert [o["outcome"] for o in kinds(rows, "card_outcome")] == ["applied"] * 6
    assert rows[-1].kind == "tour_ended"


def test_rows_are_in_the_order_of_the_log_with_the_time_of_their_event():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten"])

    rows = audit(chat.events, "2026-11-02")

    assert [r.version for r in rows] == sorted(r.version for r in rows)
    by_version = {e.originator_version: e.timestamp for e in chat.events}
    assert all(r.at == by_version[r.version] for r in rows)


def test_after_behalten_the_refused_call_reads_declined_and_the_card_kept():
    chat = Chat()
    seo_tour(chat, ["Behalten"])

    rows = audit(chat.events, "2026-11-02")

    continuation = kinds(rows, "segment")[-1]
    assert continuation["follows"] == "declined"
    assert {"tool": "update_page_metadata", "reading": "declined", "count": 1} in continuation["calls"]
    assert [o["outcome"] for o in kinds(rows, "card_outcome")] == ["kept"]


def test_before_the_amendment_the_same_call_reads_failed():
    chat = Chat()
    seo_tour(chat, ["Behalten"])

    rows = audit(chat.events, "2026-11-01")

    assert {"tool": "update_page_metadata", "reading": "failed", "count": 1} in kinds(rows, "segment")[-1]["calls"]


def test_the_audit_keeps_what_the_run_record_evicts_past_200_entries():
    chat = Chat()
    chat.user("Hallo", page=42)
    for r in range(1, 206):
        chat.segment("turn", "completed", "ok", [*model_round(r), tool("get_page", r)])
        if r < 205:
            chat.user(f"weiter {r}", page=42)

    record = run_record.initial()
    for event in chat.events:
        record = run_record.apply(record, event, "2026-11-02")
    rows = audit(chat.events, "2026-11-02")

    assert len(record.entries) == 200
    assert len(kinds(rows, "segment")) == 205
    assert kinds(rows, "segment")[0]["segment"] == "run/1"


def test_the_tools_of_a_segment_row_agree_with_its_run_record_entry():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten", "Übernehmen"])

    record = run_record.initial()
    for event in chat.events:
        record = run_record.apply(record, event, "2026-11-02")
    rows = audit(chat.events, "2026-11-02")

    ignored = {"chat_set_progress", "chat_highlight_element", "ask_choice"}
    for entry, row in zip(record.entries, kinds(rows, "segment"), strict=True):
        counted: dict[str, list[int]] = {}
        for c in row["calls"]:
            if c["tool"] in ignored or c["reading"] in ("held", "declined"):
                continue
            count = counted.setdefault(c["tool"], [0, 0])
            count[0] += c["count"]
            count[1] += c["count"] if c["reading"] in ("failed", "not_permitted") else 0
        assert {t.name: [t.calls, t.failed] for t in entry.tools} == counted
        assert [(w.record, w.completeness) for w in entry.written] == [(w["record"], w["completeness"]) for w in row["written"]]


def test_a_card_left_undecided_by_a_new_message_is_a_row_of_its_own():
    chat = Chat()
    chat.user("Titel ändern", page=42)
    chat.segment("turn", "awaiting_approval", "Ich schlage vor.", [*model_round(1)], [call()])
    chat.user("Doch nicht", page=42)

    undecided = kinds(audit(chat.events, "2026-11-02"), "undecided")

    assert undecided == [
        {
            "version": undecided[0]["version"],
            "at": undecided[0]["at"],
            "kind": "undecided",
            "segment": "run/1",
            "waiting": "card",
            "reason": "new_message",
            "decidable_elsewhere": True,
            "cut": False,
        }
    ]


def test_an_edit_names_what_it_cut_and_marks_the_cut_rows():
    chat = Chat()
    chat.user("SEO optimieren", page=42, skill=SKILL)
    chat.segment("turn", "awaiting_approval", "Ich schlage vor.", [*model_round(1)], [call()])
    chat.decide(True, "Übernehmen")
    chat.segment("approval", "completed", "Gespeichert.", [*model_round(2)])
    chat.user("Danke", page=42)
    chat.edit(1, "SEO bitte nur prüfen")

    rows = audit(chat.events, "2026-11-02")

    cut = kinds(rows, "cut")[0]
    assert (cut["after_message"], cut["messages"], cut["segments"], cut["cards"]) == (1, [2], ["run/1", "run/2"], ["run/1"])
    assert all(r.cut for r in rows if r.kind in ("segment", "decision", "card_outcome"))
    assert len([r for r in rows if r.kind == "card_outcome"]) == 1
    assert [r.cut for r in rows if r.kind == "message"] == [False, True]
    assert kinds(rows, "edit")[0]["message"] == 1


def test_the_audit_holds_no_text_of_the_model_the_user_or_a_tool():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Andere Variante"])

    dumped = json.dumps([r.to_json() for r in audit(chat.events, "2026-11-02")], ensure_ascii=False)

    for text in ("Ich schlage", "Fertig", "SEO optimieren", "secret", "argument", "result text", "model text"):
        assert text not in dumped


def test_an_edit_cuts_a_legacy_rows_card_outcome_in_the_audit_as_in_the_card_outcomes():
    chat = Chat()
    chat.legacy(
        [("user", "SEO"), ("assistant", "Titel gespeichert."), ("user", "Danke")],
        [
            LegacyCardOutcome(
                outcome="applied",
                after=2,
                tool="update_page_metadata",
                target=RecordRef(table="pages", uid=42),
                fields=("title",),
            )
        ],
    )
    chat.edit(1, "SEO bitte")

    [row] = [r for r in audit(chat.events, "2026-11-02") if r.kind == "card_outcome"]
    assert row.cut is True
    assert build_turn_input(chat.events).card_outcomes == ()


def _logs():
    tour = Chat()
    seo_tour(tour, ["Übernehmen", "Andere Variante"])
    edited = Chat()
    edited.user("SEO optimieren", page=42, skill=SKILL)
    edited.segment("turn", "awaiting_approval", "Ich schlage vor.", [*model_round(1)], [call()])
    edited.decide(True, "Übernehmen")
    edited.segment("approval", "completed", "Gespeichert.", [*model_round(2)])
    edited.user("Danke", page=42)
    edited.edit(1, "SEO bitte nur prüfen")
    legacy = Chat()
    legacy.legacy(
        [("user", "SEO"), ("assistant", "Titel gespeichert."), ("user", "Danke")],
        [
            LegacyCardOutcome(
                outcome="applied",
                after=2,
                tool="update_page_metadata",
                target=RecordRef(table="pages", uid=42),
                fields=("title",),
            )
        ],
    )
    legacy.edit(1, "SEO bitte")
    return [tour.events, edited.events, legacy.events]


def test_the_whole_log_fold_one_event_at_a_time_and_in_pieces_give_the_same_audit():
    logs = _logs()
    assert [sum(r.cut for r in audit(events, "2026-11-02")) for events in logs] == [0, 5, 1]
    for events in logs:
        whole = audit(events, "2026-11-02")
        stepwise = initial()
        for event in events:
            stepwise = apply(stepwise, event, "2026-11-02")
        for split in range(len(events) + 1):
            head = fold(initial(), events[:split], "2026-11-02")
            kept = head.rows
            both = fold(head, events[split:], "2026-11-02")
            assert head.rows == kept  # the state folded from is not changed
            assert both == stepwise
        assert list(stepwise.rows) == whole


def test_a_fold_without_card_outcomes_has_every_other_row_cut_as_in_the_audit():
    for events in _logs():
        whole = audit(events, "2026-11-02")
        head = fold(initial(), events[:3], "2026-11-02", outcomes=False)
        light = fold(head, events[3:], "2026-11-02", outcomes=False)
        assert list(light.rows) == [r for r in whole if r.kind != "card_outcome"]
    assert sum(r.kind == "card_outcome" for events in _logs() for r in audit(events, "2026-11-02")) == 4


# ---------------------------------------------------------------- usage


def test_each_segment_row_shows_its_time_tokens_and_cost_as_the_demos_lines_say():
    demo = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
    lines = [json.loads(line) for line in demo.read_text(encoding="utf-8").splitlines()]
    segments = [line for line in lines if line["type"] == "segment_returned"]
    usages = [r["usage"] for r in kinds(audit(read_events(demo), "2026-11-02"), "segment")]

    assert len(usages) == len(segments) == 8
    assert [u["duration_ms"] for u in usages] == [sum(step["durationMs"] for step in s["steps"]) for s in segments]
    llm = [[step for step in s["steps"] if step["kind"] == "llm"] for s in segments]
    assert [u["model_calls"] for u in usages] == [len(steps) for steps in llm] == [2, 1, 1, 1, 1, 1, 1, 2]
    assert [u["input_tokens"] for u in usages] == [sum(step["promptTokens"] for step in steps) for steps in llm]
    assert sum(u["output_tokens"] for u in usages) == 1200 and sum(u["total_tokens"] for u in usages) == 19200
    assert [u["cost"] for u in usages] == [0.0082, *[0.0041] * 6, 0.0082]
    assert {u["calls_without_usage"] for u in usages} == {0} and {u["model"] for u in usages} == {None}
    assert sum(u["tool_calls"] for u in usages) == 16 and {u["failed_calls"] + u["refused_calls"] for u in usages} == {0}


def test_usage_no_step_stated_is_unknown_and_failed_and_refused_calls_are_counted():
    chat = Chat()
    chat.user("hallo")
    chat.segment("turn", "failed", None, [*model_round(1, ms=100.0), tool("get_page", 1, ms=5.0, error=True)])
    chat.user("noch einmal")
    chat.segment("turn", "awaiting_approval", "Vorschlag", [*model_round(1, ms=100.0)], [call()], model="m-1", provider="p")
    chat.decide(False, "Behalten")
    chat.segment("approval", "completed", "ok", [refusal("update_page_metadata", 1)])

    first, second, third = [r["usage"] for r in kinds(audit(chat.events, "2026-11-02"), "segment")]
    assert first["model_calls"] == 1 and first["calls_without_usage"] == 1
    assert (first["input_tokens"], first["output_tokens"], first["total_tokens"], first["cost"]) == (None, None, None, None)
    assert (first["tool_calls"], first["failed_calls"], first["refused_calls"], first["duration_ms"]) == (1, 1, 0, 105.0)
    assert (second["model"], second["provider"], second["refused_calls"]) == ("m-1", "p", 0)
    assert (third["model_calls"], third["tool_calls"], third["refused_calls"], third["failed_calls"]) == (0, 1, 1, 0)
