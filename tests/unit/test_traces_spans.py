"""The span mapping (`adapters.traces.spans`): stored facts to GenAI spans, one trace per user
turn, a pure function."""

from __future__ import annotations

from adapters.ingest.step_models import call_id_digest
from adapters.traces.spans import conversation_spans, span_id_of, trace_id_of
from domain.values import WaitingCall
from tests.unit.factories import Chat, model_round, refusal, seo_tour, tool

RULES = "2026-11-02"


def by_op(spans, op):
    return [s for s in spans if s.attributes.get("gen_ai.operation.name") == op]


def roots(spans):
    return [s for s in spans if s.parent_id is None]


def test_one_trace_per_user_turn_its_root_over_its_segments_and_decisions():
    chat = Chat()
    seo_tour(chat, ["Übernehmen"] * 2)
    chat.user("Danke")

    spans = conversation_spans("conv-test", chat.events, RULES)

    turns = roots(spans)
    assert [t.name for t in turns] == ["turn 1 (completed)", "turn 2 (no_answer)"]
    assert len({s.trace_id for s in spans}) == 2 and [t.trace_id for t in turns] == [
        trace_id_of("conv-test", 1),
        trace_id_of("conv-test", 2),
    ]
    first = [s for s in spans if s.trace_id == turns[0].trace_id]
    agents = by_op(spans, "invoke_agent")
    assert [a.name for a in agents] == [
        "invoke_agent nr-llm (turn → awaiting_approval)",
        "invoke_agent nr-llm (approval → awaiting_approval)",
        "invoke_agent nr-llm (approval → completed)",
    ]
    assert {a.parent_id for a in agents} == {turns[0].span_id}
    assert [s.name for s in first if s.parent_id == turns[0].span_id] == [
        agents[0].name,
        "card approved (Übernehmen)",
        agents[1].name,
        "card approved (Übernehmen)",
        agents[2].name,
    ]
    assert [a.attributes["chatrecord.records_written"] for a in agents] == [(), ("pages:42",), ("sys_file_reference:913",)]
    children = {a.span_id: [s.name for s in spans if s.parent_id == a.span_id] for a in agents}
    assert list(children.values())[0] == ["chat unknown", "execute_tool get_page", "execute_tool chat_set_progress"]
    assert turns[0].start_ns <= min(s.start_ns for s in first) and turns[0].end_ns == max(s.end_ns for s in first)
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {"conv-test"}


def test_model_rounds_are_chat_spans_with_the_provider_and_no_invented_model():
    chat = Chat()
    chat.user("hallo")
    chat.segment("turn", "completed", "ok", [*model_round(1, ms=2100.0), tool("get_page", 1), *model_round(2, ms=900.0)])

    spans = conversation_spans("conv-test", chat.events, RULES, provider="openai")

    chats = by_op(spans, "chat")
    assert [(c.name, c.kind, c.attributes["chatrecord.round"], c.end_ns - c.start_ns) for c in chats] == [
        ("chat unknown", "client", 1, 2_100_000_000),
        ("chat unknown", "client", 2, 900_000_000),
    ]
    assert "gen_ai.request.model" not in chats[0].attributes
    assert {s.attributes["gen_ai.provider.name"] for s in [*chats, *by_op(spans, "invoke_agent"), *roots(spans)]} == {"openai"}
    assert conversation_spans("conv-test", chat.events, RULES)[0].attributes["gen_ai.provider.name"] == "unknown"


def test_a_segments_model_and_provider_name_its_chat_spans_and_usage_is_set_only_where_stated():
    chat = Chat()
    chat.user("hallo")
    stated = {"promptTokens": 90, "completionTokens": 10, "estimatedCost": 0.002, "finishReason": "stop"}
    first, second = model_round(1, ms=10.0), model_round(2, ms=10.0)
    first[-1] = {**first[-1], **stated, "requestedToolCalls": [{"id": "call_a", "name": "get_page", "arguments": {"x": 1}}]}
    second[-1] = {"kind": "llm", "round": 2, "durationMs": 10.0}  # states nothing: unknown
    chat.segment("turn", "completed", "ok", [*first, tool("get_page", 1), *second], model="gpt-4o-mini", provider="openai")

    spans = conversation_spans("conv-test", chat.events, RULES, provider="anthropic")

    chats = by_op(spans, "chat")
    assert [c.name for c in chats] == ["chat gpt-4o-mini"] * 2
    assert {c.attributes["gen_ai.request.model"] for c in chats} == {"gpt-4o-mini"}
    assert {s.attributes["gen_ai.provider.name"] for s in [*chats, *by_op(spans, "invoke_agent")]} == {"openai"}
    usage = {k: v for k, v in chats[0].attributes.items() if "token" in k or "cost" in k or "finish" in k}
    assert usage == {
        "gen_ai.usage.input_tokens": 90,
        "gen_ai.usage.output_tokens": 10,
        "llm.token_count.prompt": 90,
        "llm.token_count.completion": 10,
        "chatrecord.cost": 0.002,
        "llm.cost.total": 0.002,
        "gen_ai.response.finish_reasons": ("stop",),
    }
    assert not [k for k in chats[1].attributes if "token" in k or "cost" in k or "finish" in k]
    (ran,) = by_op(spans, "execute_tool")
    assert ran.attributes["gen_ai.tool.call.id"] == call_id_digest("call_a")


def test_a_call_asked_for_before_a_pause_gets_its_id_in_the_continuation():
    chat = Chat()
    chat.user("hallo")
    asked = model_round(1, ms=10.0)
    asked[-1] = {**asked[-1], "requestedToolCalls": [{"id": "call_w", "name": "update_page_metadata"}]}
    chat.segment("turn", "awaiting_approval", "Vorschlag", asked, [WaitingCall(tool_name="update_page_metadata")])
    chat.decide()
    chat.segment("approval", "completed", "ok", [tool("update_page_metadata", 1)])

    (ran,) = by_op(conversation_spans("conv-test", chat.events, RULES), "execute_tool")
    assert ran.attributes["gen_ai.tool.call.id"] == call_id_digest("call_w")


def test_times_come_from_the_segment_event_and_the_steps_durations():
    chat = Chat()
    chat.user("hallo")
    chat.segment("turn", "completed", "ok", [*model_round(1, ms=2100.0), tool("get_page", 1, ms=31.7)])
    returned = chat.events[-1]

    root, agent, model, call = conversation_spans("conv-test", chat.events, RULES)

    end = int(returned.timestamp.timestamp() * 1_000_000) * 1000
    assert agent.end_ns == end == root.end_ns
    assert agent.start_ns == end - 2_100_000_000 - 31_700_000
    assert (model.start_ns, model.end_ns) == (agent.start_ns, end - 31_700_000)
    assert (call.start_ns, call.end_ns) == (end - 31_700_000, end)
    assert call.parent_id == agent.span_id == model.parent_id and agent.parent_id == root.span_id


def test_failed_held_and_declined_calls_are_marked_in_name_attribute_and_status():
    chat = Chat()
    chat.user("hallo", page=42)
    chat.segment(
        "turn",
        "awaiting_approval",
        "Vorschlag",
        [*model_round(1), tool("get_page", 1, error=True, ms=12.0), refusal("update_page_metadata", 1)],
    )
    declined = Chat()
    seo_tour(declined, ["Behalten"])

    spans = [
        s
        for events in (chat.events, declined.events)
        for s in by_op(conversation_spans("conv-test", events, RULES), "execute_tool")
        if s.attributes["chatrecord.tool.reading"] != "ran"
    ]

    marks = [
        (
            s.name,
            s.attributes["chatrecord.tool.reading"],
            s.attributes["chatrecord.tool.refused"],
            s.attributes.get("chatrecord.tool.label"),
            s.attributes.get("error.type"),
            s.error,
            s.attributes["gen_ai.tool.type"],
        )
        for s in spans
    ]
    assert marks == [
        ("execute_tool get_page (failed)", "failed", False, "fehlgeschlagen", "tool_error", True, "function"),
        ("execute_tool update_page_metadata (held)", "held", True, "noch nicht ausgeführt", None, False, "function"),
        ("execute_tool update_page_metadata (declined)", "declined", True, "abgelehnt", None, False, "function"),
    ]


def test_a_failed_segment_has_error_type_on_it_and_its_turn():
    chat = Chat()
    chat.user("hallo")
    chat.segment("turn", "failed", None, [*model_round(1)])

    root, agent, _ = conversation_spans("conv-test", chat.events, RULES)

    assert (agent.name, agent.error, agent.attributes["error.type"]) == ("invoke_agent nr-llm (turn → failed)", True, "failed")
    assert (root.name, root.error, root.attributes["error.type"]) == ("turn 1 (failed)", True, "failed")


def test_under_the_rule_set_before_the_amendment_the_held_call_reads_failed():
    chat = Chat()
    chat.user("hallo", page=42)
    chat.segment("turn", "awaiting_approval", "Vorschlag", [*model_round(1), refusal("update_page_metadata", 1)])

    (call,) = by_op(conversation_spans("conv-test", chat.events, "2026-11-01"), "execute_tool")

    assert call.attributes["chatrecord.tool.reading"] == "failed"


def test_decisions_and_undecided_cards_are_spans_at_their_own_times_and_edits_events_of_a_new_turn():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten"])
    chat.user("Noch etwas", page=42)
    chat.segment("turn", "awaiting_approval", "Vorschlag", [*model_round(9)])
    chat.user("Doch nicht")  # leaves the card undecided
    chat.edit(1, "SEO bitte")  # cuts everything after message 1

    spans = conversation_spans("conv-test", chat.events, RULES)

    decisions = [s for s in spans if "chatrecord.decision" in s.attributes]
    assert [(s.name, s.attributes["chatrecord.decision"]) for s in decisions] == [
        ("card approved (Übernehmen)", "approved"),
        ("card declined (Behalten)", "declined"),
        ("card left undecided (new_message)", "undecided"),
    ]
    agents = {s.attributes["chatrecord.segment"]: s for s in by_op(spans, "invoke_agent")}
    for decision in decisions:
        asked = agents[decision.attributes["chatrecord.segment"]]
        assert decision.start_ns == asked.end_ns < decision.end_ns
        assert decision.parent_id == asked.parent_id
    turns = roots(spans)
    assert [t.name for t in turns] == [
        "turn 1 (completed)",
        "turn 3 (awaiting_approval)",
        "turn 4 (no_answer)",
        "turn 1 (no_answer)",
    ]
    assert [e.name for e in turns[3].events] == ["chatrecord.message_edited", "chatrecord.turns_truncated"]
    assert [a.attributes["chatrecord.cut"] for a in agents.values()] == [True, True, True, True]


def test_ids_derive_from_the_conversation_its_turns_and_segments():
    chat = Chat()
    seo_tour(chat, ["Übernehmen"])

    first = conversation_spans("conv-test", chat.events, RULES)
    again = conversation_spans("conv-test", chat.events, RULES)

    assert [(s.trace_id, s.span_id, s.parent_id) for s in first] == [(s.trace_id, s.span_id, s.parent_id) for s in again]
    assert first[0].trace_id == trace_id_of("conv-test", 1) != trace_id_of("conv-other", 1)
    assert first[0].span_id == span_id_of("conv-test", "turn", 1)
    assert first[1].span_id == span_id_of("conv-test", "run/1")
    assert len({s.span_id for s in first}) == len(first)


def test_texts_only_with_with_texts_on_turns_and_segments_and_never_tool_arguments_or_results():
    chat = Chat()
    chat.user("geheime Frage", page=42)
    chat.segment("turn", "completed", "geheime Antwort", [*model_round(1), tool("get_page", 1)])

    without = conversation_spans("conv-test", chat.events, RULES)
    with_texts = conversation_spans("conv-test", chat.events, RULES, with_texts=True)

    assert "geheim" not in repr(without)
    root, agent = with_texts[:2]
    for span in (root, agent):
        assert (span.attributes["input.value"], span.attributes["output.value"]) == ("geheime Frage", "geheime Antwort")
        assert "geheime Frage" in span.attributes["gen_ai.input.messages"]
        assert '"finish_reason": "stop"' in span.attributes["gen_ai.output.messages"]
    for spans in (without, with_texts):  # the factory's step carries {"secret": "argument"} and "result text"
        assert "secret" not in repr(spans) and "result text" not in repr(spans)
