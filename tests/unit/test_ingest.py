"""The nr-llm ingestion: the chat's JSON Lines into commands (docs/input-format.md; docs/spec-map.md, D7)."""

from __future__ import annotations

from datetime import UTC, datetime
from hashlib import sha256
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.ingest import parse_line, read_file, read_lines
from adapters.ingest.names import NAME_MAX, reduce_id
from adapters.ingest.step_models import call_id_digest
from adapters.service.line_commands import fold_events, read_events
from domain.errors import InvalidInput
from domain.events import (
    CardDecided,
    ConversationStarted,
    LegacyRowImported,
    QuestionAnswered,
    SegmentReturned,
    SkillLoaded,
    TourEnded,
    TranscriptReplaced,
    UserMessagePosted,
)
from domain.values import (
    LegacyCardOutcome,
    ModelCall,
    RecordRef,
    RequestedCall,
    StepFact,
    TranscriptLine,
    WaitingCall,
)

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo_seo_tour.jsonl"
RUN = "3f6c2a9e-5b1d-4c1e-9a51-0c7d2e4b8a10"
AT = "2026-10-28T09:00:00Z"
OFFERED = ("update_page_metadata", "set_page_social_image", "ask_choice", "chat_set_progress", "get_page")
PRIVATE_STEP_KEYS = ("toolArguments", "toolResult", "content", "thinking", "messagesSent", "requestedToolCalls", "raw")


# ---------------------------------------------------------------- factories


def jl(**fields: Any) -> str:
    """Returns one JSON line of conversation `c` at AT with `fields`."""
    return orjson.dumps({"conversation": "c", "at": AT, **fields}).decode()


def started(kind: str = "chat") -> str:
    return jl(type="conversation_started", kind=kind, owner=7)


def typed(message: int = 1, skill: str | None = None) -> str:
    return jl(type="user_message", message=message, text="Bitte prüfen", page=42, skill=skill)


def segment(segment: str = "r/1", outcome: str = "completed", steps: list | None = None, **more: Any) -> str:
    return jl(
        type="segment_returned",
        segment=segment,
        run="r",
        trigger="turn",
        outcome=outcome,
        answer="Erledigt.",
        steps=[] if steps is None else steps,
        **more,
    )


def events_of(*lines: str) -> list:
    return list(fold_events(read_lines(lines, "t.jsonl")))


def returned(*lines: str) -> SegmentReturned:
    (event,) = [e for e in events_of(started(), typed(), *lines) if isinstance(e, SegmentReturned)]
    return event


def tool_write(**more: Any) -> dict:
    return {
        "kind": "tool_write",
        "round": 1,
        "durationMs": 0.0,
        "toolName": "t",
        "writeTargetTable": "pages",
        "writeTargetUid": 42,
        **more,
    }


# ---------------------------------------------------------------- the demo


def test_the_demo_parses_into_19_lines_and_20_events() -> None:
    lines = list(read_file(DEMO))
    events = read_events(DEMO)

    assert [line.line for line in lines] == list(range(1, 20))
    assert {line.source_name for line in lines} == {"demo_seo_tour.jsonl"}
    assert {line.conversation for line in lines} == {"conv-demo-seo"}
    assert len(events) == 20
    assert [e.originator_version for e in events] == list(range(1, 21))
    kinds = [type(e) for e in events]
    assert kinds[:5] == [ConversationStarted, SkillLoaded, UserMessagePosted, SegmentReturned, QuestionAnswered]
    assert kinds.count(SegmentReturned) == 8 and kinds.count(CardDecided) == 6
    assert kinds[-2:] == [TourEnded, UserMessagePosted]
    assert events[-1].timestamp == datetime(2026, 10, 31, 14, 5, tzinfo=UTC)


def test_every_event_carries_the_digest_of_its_line() -> None:
    lines = list(read_file(DEMO))
    events = read_events(DEMO)
    digests = [line.digest for line in lines]

    assert all(len(d) == 32 and int(d, 16) >= 0 for d in digests)
    assert len(set(digests)) == 19
    assert [e.source for e in events[:3]] == [digests[0], digests[1], digests[1]]  # SkillLoaded + message
    assert events[-1].source == digests[-1]


def test_a_tool_step_keeps_exactly_the_privacy_kept_facts() -> None:
    seg3 = next(e for e in read_events(DEMO) if isinstance(e, SegmentReturned) and e.segment == f"{RUN}/3")

    assert seg3.run == RUN and seg3.trigger == "approval" and seg3.outcome == "awaiting_approval"
    assert seg3.steps[0] == StepFact(
        kind="tool",
        round=3,
        duration_ms=38.0,
        tool_name="update_page_metadata",
        tool_is_error=False,
        tool_outcome="ok",
    )
    assert seg3.steps[1] == StepFact(
        kind="tool_write",
        round=3,
        duration_ms=0.0,
        tool_name="update_page_metadata",
        write_target=RecordRef(table="pages", uid=42),
        write_completeness="complete",
    )
    assert [s.kind for s in seg3.steps] == ["tool", "tool_write", "context", "request", "llm", "tool"]
    assert seg3.steps[3] == StepFact(kind="request", round=4, duration_ms=0.0, offered_tools=OFFERED)
    assert seg3.steps[4] == StepFact(
        kind="llm",
        round=4,
        duration_ms=2248.0,
        call=ModelCall(
            prompt_tokens=1800,
            completion_tokens=120,
            total_tokens=1920,
            estimated_cost=0.0041,
            finish_reason="tool_calls",
            requested=(
                RequestedCall(call_id=call_id_digest("call_4_0"), tool="chat_set_progress"),
                RequestedCall(call_id=call_id_digest("call_4_1"), tool="set_page_social_image"),
            ),
        ),
    )
    assert seg3.waiting == (
        WaitingCall(tool_name="set_page_social_image", target=RecordRef(table="pages", uid=42), fields=("og_image",)),
    )


def test_the_social_image_write_names_its_file_reference() -> None:
    seg4 = next(e for e in read_events(DEMO) if isinstance(e, SegmentReturned) and e.segment == f"{RUN}/4")

    write = seg4.steps[1]
    assert write.kind == "tool_write" and write.tool_name == "set_page_social_image"
    assert str(write.write_target) == "sys_file_reference:913"
    assert write.write_completeness == "complete" and write.hook_failed_after_write is False
    assert seg4.steps[0].duration_ms == 41.0 and seg4.steps[0].tool_outcome == "ok"


def test_the_first_segment_waits_on_a_question_without_a_target() -> None:
    first = next(e for e in read_events(DEMO) if isinstance(e, SegmentReturned))

    assert first.segment == f"{RUN}/1" and first.outcome == "awaiting_input"
    assert first.answer == "Womit sollen wir beginnen?" and first.nothing_saved is False
    assert first.waiting == (WaitingCall(tool_name="ask_choice"),)
    assert first.message == 1 and first.skill == "3:seo-optimieren"


# ---------------------------------------------------------------- privacy


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _demo_planted() -> tuple[set[str], set[str]]:
    """Returns (planted, transcript): the strings the demo plants in the private step keys, less
    the names it also sends as kept facts; and the transcript texts it sends."""
    planted: set[str] = set()
    transcript: set[str] = set()
    names: set[str] = set()
    for raw in DEMO.read_text(encoding="utf-8").splitlines():
        line = orjson.loads(raw)
        for step in line.get("steps", []):
            planted.update(_strings([step.get(key) for key in PRIVATE_STEP_KEYS]))
            names.update(_strings(step.get("toolName")))
        for call in line.get("pending", []):
            names.update(_strings([call["toolName"], call.get("fields", [])]))
        transcript.update(_strings([line.get("answer"), line.get("text")]))
    return {v for v in planted if len(v) >= 3 and v not in names}, transcript


def _json_without_transcript(event: Any) -> str:
    return event.model_dump_json(exclude={"answer", "text", "messages"})


def test_no_planted_private_value_reaches_an_event_outside_the_transcript() -> None:
    planted, _ = _demo_planted()
    dumped = "\n".join(_json_without_transcript(e) for e in read_events(DEMO))

    assert {
        "Unser Team – Beispiel GmbH in Musterstadt",
        "fileadmin/team/gruppenbild.jpg",
        "Lernen Sie unser Team kennen",
        "Updated sys_file_reference:913",
    } <= planted
    assert len(planted) >= 15
    assert sorted(v for v in planted if v in dumped) == []


def test_planted_values_the_chat_never_shows_are_absent_from_every_event() -> None:
    planted, transcript = _demo_planted()
    hidden = {v for v in planted if not any(v in text for text in transcript)}
    dumped = "\n".join(e.model_dump_json() for e in read_events(DEMO))

    assert {"Updated sys_file_reference:913", "Updated pages:42", "(prompt)", "The user picked: Alles der Reihe nach"} <= hidden
    assert sorted(v for v in hidden if v in dumped) == []
    for key in (*PRIVATE_STEP_KEYS, "contextBudget", "toolSpecs", "estimatedCost", "finishReason"):
        assert key not in dumped


_secret = st.text(min_size=1, max_size=40).map(lambda s: "SECRET" + s)
_unknown_key = st.text(min_size=1, max_size=12).map(lambda s: "x_" + s)


@settings(max_examples=60, deadline=None)
@given(secret=_secret, key=_unknown_key)
def test_values_planted_in_private_or_unknown_keys_never_reach_the_events(secret: str, key: str) -> None:
    steps = [
        {
            "kind": "llm",
            "round": 1,
            "durationMs": 9.5,
            "content": secret,
            "thinking": secret,
            "raw": {key: secret},
            "messagesSent": [{"role": "user", "content": secret}],
            "requestedToolCalls": [{"id": secret, "name": "t", "arguments": {key: secret}}],
            key: secret,
        },
        {
            "kind": "tool",
            "round": 1,
            "durationMs": 3.0,
            "toolName": "t",
            "toolIsError": False,
            "toolArguments": {key: secret, "nested": [secret, {key: secret}]},
            "toolResult": secret,
            key: secret,
        },
        tool_write(**{key: secret, "toolResult": secret}),
    ]
    pending = [{"toolName": "t", "table": "pages", "uid": 42, "fields": ["title"], key: secret}]
    line = segment(steps=steps, pending=pending, **{key: secret})
    plain = segment(
        steps=[
            {
                k: v
                for k, v in s.items()
                if k in ("kind", "round", "durationMs", "toolName", "toolIsError", "writeTargetTable", "writeTargetUid")
            }
            for s in steps
        ],
        pending=[{"toolName": "t", "table": "pages", "uid": 42, "fields": ["title"]}],
    )

    events = events_of(started(), typed(), line)
    dumped = "".join(e.model_dump_json() for e in events)

    assert "SECRET" not in dumped
    assert len(events[-1].steps) == 3
    assert parse_line(line, 1, "t").digest == parse_line(plain, 1, "t").digest


# ---------------------------------------------------------------- the facts of the model calls


def test_an_llm_step_keeps_its_usage_and_a_request_step_its_offered_tool_names() -> None:
    llm = {
        "kind": "llm",
        "round": 1,
        "durationMs": 812.5,
        "promptTokens": 1000,
        "completionTokens": 25,
        "totalTokens": 1025,
        "estimatedCost": 0.0125,
        "finishReason": "stop",
        "requestedToolCalls": [{"id": "call_9", "name": "get page", "arguments": {"pageUid": 1}}, {"name": "no_id"}, 7],
    }
    request = {"kind": "request", "round": 1, "durationMs": 0.0, "toolSpecs": ["get_page", {"name": "ask_choice"}, 3, {}]}
    event = returned(segment(steps=[request, llm], model="gpt-4o-mini", provider="openai"))

    assert event.model == "gpt-4o-mini" and event.provider == "openai"
    assert event.steps[0].offered_tools == ("get_page", "ask_choice") and event.steps[0].call is None
    assert event.steps[1].call == ModelCall(
        prompt_tokens=1000,
        completion_tokens=25,
        total_tokens=1025,
        estimated_cost=0.0125,
        finish_reason="stop",
        requested=(RequestedCall(call_id=call_id_digest("call_9"), tool="getpage"),),
    )
    assert event.steps[1].call.requested[0].call_id == "c" + sha256(b"call_9").hexdigest()[:16]
    assert event.steps[1].offered_tools is None


def test_usage_not_stated_is_unknown_not_zero() -> None:
    event = returned(
        segment(steps=[{"kind": "llm", "round": 1, "durationMs": 1.0}, {"kind": "request", "round": 1, "durationMs": 0.0}])
    )

    assert event.model is None and event.provider is None
    assert event.steps[0].call is None and event.steps[1].offered_tools is None
    partial = returned(segment(steps=[{"kind": "llm", "round": 1, "durationMs": 1.0, "promptTokens": 5}]))
    assert partial.steps[0].call == ModelCall(prompt_tokens=5)
    assert partial.steps[0].call.completion_tokens is None and partial.steps[0].call.estimated_cost is None


def test_usage_of_the_wrong_type_is_refused_with_its_field_and_expectation() -> None:
    bad = {"kind": "llm", "round": 1, "durationMs": 1.0, "promptTokens": "many"}
    with pytest.raises(InvalidInput) as raised:
        list(read_lines([segment(steps=[bad])], "t.jsonl"))
    assert "steps[0].promptTokens" in str(raised.value)
    with pytest.raises(InvalidInput) as raised:
        list(read_lines([segment(steps=[{"kind": "llm", "round": 1, "durationMs": 1.0, "estimatedCost": -1}])], "t.jsonl"))
    assert "steps[0].estimatedCost" in str(raised.value)


def test_a_private_field_of_another_shape_is_left_out_not_refused() -> None:
    steps = [
        {"kind": "llm", "round": 1, "durationMs": 1.0, "requestedToolCalls": "call_1"},
        {"kind": "request", "round": 1, "durationMs": 0.0, "toolSpecs": {"get_page": {}}},
    ]
    event = returned(segment(steps=steps))

    assert event.steps[0].call is None and event.steps[1].offered_tools is None


def test_the_usage_facts_leave_a_lines_digest_as_it_was() -> None:
    """The demo's lines carry usage; their digests are those stored before it was kept, so a
    file delivered again after the upgrade is taken as the same lines."""
    lines = list(read_file(DEMO))

    assert lines[2].digest == "a26d1a049e1018618dc7bd430b120093"
    assert lines[-2].digest == "ad7538e4ed90e5e6f0724c69041ba607"
    plain = segment(steps=[{"kind": "llm", "round": 1, "durationMs": 1.0}])
    usage = segment(
        steps=[{"kind": "llm", "round": 1, "durationMs": 1.0, "promptTokens": 3, "finishReason": "stop"}], model="m", provider="p"
    )
    assert parse_line(plain, 1, "t").digest == parse_line(usage, 1, "t").digest


def test_a_segment_returned_of_class_version_1_upcasts_its_usage_as_unknown() -> None:
    state: dict[str, Any] = {
        "steps": [{"kind": "llm", "round": 1, "duration_ms": 3.0}, {"kind": "request", "round": 1, "duration_ms": 0.0}]
    }
    SegmentReturned.upcast_v1_v2(state)

    assert state["model"] is None and state["provider"] is None
    assert [(s["call"], s["offered_tools"]) for s in state["steps"]] == [(None, None), (None, None)]
    assert SegmentReturned.class_version == 2


# ---------------------------------------------------------------- tolerant readings


def test_an_unknown_outcome_is_kept_as_unknown() -> None:
    assert returned(segment(outcome="exploded_politely")).outcome == "unknown"


def test_a_failed_segment_without_steps_is_unknown() -> None:
    assert returned(segment(outcome="failed")).outcome == "unknown"


def test_a_failed_segment_with_steps_stays_failed() -> None:
    step = {"kind": "llm", "round": 1, "durationMs": 1.0}
    assert returned(segment(outcome="failed", steps=[step])).outcome == "failed"


def test_a_step_of_an_unknown_kind_is_dropped_and_an_unknown_tool_outcome_kept_as_unknown() -> None:
    steps = [
        {
            "kind": "reflection",
            "round": 2,
            "durationMs": 1.5,
            "toolName": "secret_tool_name",
            "toolIsError": True,
            "writeTargetTable": "pages",
            "writeTargetUid": 9,
        },
        {"kind": "tool", "round": 2, "durationMs": 4.0, "toolName": "t", "toolIsError": True, "toolOutcome": "timed_out"},
    ]
    event = returned(segment(steps=steps))

    assert event.steps == (
        StepFact(kind="tool", round=2, duration_ms=4.0, tool_name="t", tool_is_error=True, tool_outcome="unknown"),
    )
    assert "secret_tool_name" not in event.model_dump_json() and "reflection" not in event.model_dump_json()


def test_a_segment_with_only_steps_of_unknown_kinds_equals_one_without_them() -> None:
    unknown = {"kind": "reflection", "round": 1, "durationMs": 1.5, "toolName": "t"}
    assert returned(segment(steps=[unknown])).steps == ()
    assert returned(segment(steps=[unknown])).source == returned(segment(steps=[])).source
    # nr-llm returned a step, so a failed turn stays failed (S3 is about a turn that returned none)
    assert returned(segment(outcome="failed", steps=[unknown])).outcome == "failed"


def test_a_write_without_stated_or_known_completeness_is_unconfirmed() -> None:
    steps = [
        tool_write(),
        tool_write(writeCompleteness="mostly"),
        tool_write(writeCompleteness=None),
        tool_write(writeCompleteness="partial", hookFailedAfterWrite=True),
    ]
    facts = returned(segment(steps=steps)).steps

    assert [f.write_completeness for f in facts] == ["unconfirmed", "unconfirmed", "unconfirmed", "partial"]
    assert [f.hook_failed_after_write for f in facts] == [False, False, False, True]


def test_unknown_keys_of_a_line_a_step_and_a_pending_call_are_ignored() -> None:
    step = {
        "kind": "tool",
        "round": 1,
        "durationMs": 2.0,
        "toolName": "t",
        "toolIsError": False,
        "toolResultLength": 12,
        "newNrLlmField": {"a": 1},
    }
    event = returned(segment(steps=[step], pending=[{"toolName": "t", "priority": "high"}], futureField=[1, 2]))

    assert event.steps == (StepFact(kind="tool", round=1, duration_ms=2.0, tool_name="t", tool_is_error=False),)
    assert event.waiting == (WaitingCall(tool_name="t"),)


def test_the_nothing_saved_flag_becomes_a_bool() -> None:
    assert returned(segment(flag="nothingSaved")).nothing_saved is True
    assert returned(segment()).nothing_saved is False


# ---------------------------------------------------------------- identifiers


def test_a_name_longer_than_128_is_cut_with_the_hash_of_the_whole_so_two_never_read_as_one() -> None:
    from adapters.ingest.names import reduce_name

    first, second = reduce_name("a" * 10_000, "tool name"), reduce_name("a" * 9_999 + "b", "tool name")

    assert len(first) == len(second) == 128
    assert first == "a" * 110 + ":h" + sha256(("a" * 10_000).encode()).hexdigest()[:16]
    assert first != second
    assert reduce_name("get_page", "tool name") == "get_page"


def test_identifiers_with_brackets_newlines_and_spaces_are_reduced() -> None:
    step = {"kind": "tool", "round": 1, "durationMs": 1.0, "toolName": "update_page[0]\n meta data"}
    pending = [{"toolName": "<b>set image</b>", "table": "pages", "uid": 42, "fields": ["og title", "x[1]"]}]
    event = returned(segment(steps=[step], pending=pending))

    assert event.steps[0].tool_name == "update_page0metadata"
    assert event.waiting == (
        WaitingCall(tool_name="bsetimageb", target=RecordRef(table="pages", uid=42), fields=("ogtitle", "x1")),
    )


def test_a_skill_is_reduced_like_any_name() -> None:
    (*_, posted) = events_of(started(), typed(skill="3: seo optimieren!"))
    assert posted.skill == "3:seooptimieren"


def test_a_long_name_is_cut_at_128_with_the_hash_of_the_whole() -> None:
    step = {"kind": "tool", "round": 1, "durationMs": 1.0, "toolName": "t" * 300}
    name = returned(segment(steps=[step])).steps[0].tool_name
    assert name == "t" * (NAME_MAX - 18) + ":h" + sha256(("t" * 300).encode()).hexdigest()[:16]
    assert len(name) == NAME_MAX


def test_segment_ids_keep_their_slash_and_stay_unchanged_when_clean() -> None:
    assert reduce_id(f"{RUN}/1") == f"{RUN}/1"
    assert reduce_id("conv-demo-seo") == "conv-demo-seo"


def test_two_ids_that_reduce_alike_do_not_collide() -> None:
    keys = {reduce_id(raw) for raw in ("run 1/2", "run1/2", "run\n1/2", "run[1]/2", "run1]/2")}
    assert len(keys) == 5
    assert reduce_id("run 1/2") == reduce_id("run 1/2")
    assert reduce_id("run 1/2").startswith("run1/2:h")
    assert len(reduce_id("x" * 500)) <= NAME_MAX and reduce_id("x" * 500) != reduce_id("x" * 501)


def test_a_stored_form_reduces_to_itself_so_an_export_keeps_its_key() -> None:
    reduced = reduce_id("chat 17")
    assert reduced == "chat17:h9a90eaf363ff759f"
    assert reduce_id(reduced) == reduced  # a stored form is kept as it is: reducing is idempotent
    assert reduce_id("chat17:h0000000000000000") == "chat17:h0000000000000000"  # the hash of no id: its own key
    assert (
        reduce_id("chat17:h0000000000000000 ")
        == "chat17:h0000000000000000:h" + sha256(b"chat17:h0000000000000000 ").hexdigest()[:16]
    )
    # ids that only resemble the marker stay as they are
    assert reduce_id("chat17:h9a90eaf363ff759") == "chat17:h9a90eaf363ff759"
    assert reduce_id("chat17:H9A90EAF363FF759F") == "chat17:H9A90EAF363FF759F"
    assert reduce_id("chat17:h9a90eaf363ff759f/1") == "chat17:h9a90eaf363ff759f/1"


def test_a_card_decision_finds_a_segment_whose_id_was_reduced() -> None:
    waiting = segment(
        segment="run 7/2",
        outcome="awaiting_approval",
        pending=[{"toolName": "t", "table": "pages", "uid": 1, "fields": ["title"]}],
    )
    decided = jl(type="card_decided", segment="run 7/2", approved=False, answer="Behalten")
    *_, seg, card = events_of(started(), typed(), waiting, decided)

    assert seg.segment == card.segment == reduce_id("run 7/2")
    assert card.approved is False and card.answer == "Behalten"


# ---------------------------------------------------------------- the other line types


def test_times_are_made_aware_utc() -> None:
    local = parse_line(jl(type="tour_ended", at="2026-10-28T11:00:00+02:00"), 1, "t")
    naive = parse_line(jl(type="tour_ended", at="2026-10-28T09:00:00"), 1, "t")
    expected = datetime(2026, 10, 28, 9, 0, tzinfo=UTC)

    assert local.at == naive.at == expected and local.at.utcoffset().total_seconds() == 0


def test_a_card_answer_appended_to_the_transcript_carries_message_and_text() -> None:
    waiting = segment(outcome="awaiting_approval", pending=[{"toolName": "t"}])
    decided = jl(type="card_decided", segment="r/1", approved=True, answer="Übernehmen", message=2, text="Übernehmen")
    card = events_of(started(), typed(), waiting, decided)[-1]

    assert (card.approved, card.answer, card.message, card.text) == (True, "Übernehmen", 2, "Übernehmen")


def test_a_legacy_row_keeps_its_transcript_and_card_outcomes() -> None:
    row = jl(
        type="legacy_row",
        messages=[{"role": "user", "text": "SEO"}, {"role": "assistant", "text": "Ok."}],
        card_outcomes=[
            {"outcome": "applied", "after": 2, "tool": "update_page_metadata", "table": "pages", "uid": 42, "fields": ["title"]},
            {"outcome": "skipped", "after": 3, "tool": "create_content", "table": "", "uid": 0, "fields": []},
        ],
    )
    (*_, imported) = events_of(started(), row)

    assert isinstance(imported, LegacyRowImported)
    assert imported.messages == (TranscriptLine(role="user", text="SEO"), TranscriptLine(role="assistant", text="Ok."))
    assert imported.card_outcomes == (
        LegacyCardOutcome(
            outcome="applied", after=2, tool="update_page_metadata", target=RecordRef(table="pages", uid=42), fields=("title",)
        ),
        LegacyCardOutcome(outcome="skipped", after=3, tool="create_content"),
    )


def test_an_alt_text_conversation_replaces_its_transcript() -> None:
    replaced = jl(type="transcript_replaced", messages=[{"role": "assistant", "text": "Alt-Text gesetzt."}])
    (*_, event) = events_of(started("alt_text"), replaced)

    assert isinstance(event, TranscriptReplaced)
    assert event.messages == (TranscriptLine(role="assistant", text="Alt-Text gesetzt."),)


def test_retry_edit_and_question_lines_reach_their_commands() -> None:
    question = segment(outcome="awaiting_input", pending=[{"toolName": "ask_choice"}])
    answered = jl(type="question_answered", segment="r/1", message=2, text="Alles")
    retried = jl(type="turn_retried", message=2)
    edited = jl(type="message_edited", message=1, text="Nur Social Media")
    names = [type(e).__name__ for e in events_of(started(), typed(), question, answered, retried, edited)]

    assert names[-4:] == ["QuestionAnswered", "TurnRetried", "MessageEdited", "TurnsTruncated"]


# ---------------------------------------------------------------- idempotency and the digest


def test_the_same_line_delivered_twice_is_recorded_once() -> None:
    events = events_of(started(), typed(), segment(), segment())
    assert [type(e).__name__ for e in events] == ["ConversationStarted", "UserMessagePosted", "SegmentReturned"]


def test_the_digest_ignores_key_order_spacing_and_unknown_keys() -> None:
    line = segment()
    shuffled = orjson.dumps(dict(reversed(list(orjson.loads(line).items())))).decode()
    spaced = line.replace(",", ", ").replace("}", ', "later": true}', 1)

    assert parse_line(line, 1, "a").digest == parse_line(shuffled, 9, "b").digest == parse_line(spaced, 3, "c").digest
    assert parse_line(line, 1, "a").digest != parse_line(segment(outcome="failed"), 1, "a").digest


def test_blank_lines_are_skipped_but_counted() -> None:
    lines = list(read_lines([started(), "", "   \n", typed()], "t.jsonl"))
    assert [line.line for line in lines] == [1, 4]


@pytest.mark.parametrize("conversation", ["conv-1", "conv-2"])
def test_each_conversation_folds_its_own_state(conversation: str) -> None:
    other = "conv-2" if conversation == "conv-1" else "conv-1"
    lines = [started().replace('"c"', f'"{c}"') for c in (conversation, other)]
    lines += [typed().replace('"c"', f'"{c}"') for c in (other, conversation)]
    events = events_of(*lines)

    assert [e.originator_version for e in events] == [1, 1, 2, 2]
