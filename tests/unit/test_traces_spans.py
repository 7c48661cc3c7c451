"""The span mapping (`adapters.traces.spans`): stored facts to GenAI spans, a pure function."""

from __future__ import annotations

from adapters.traces.spans import conversation_spans, span_id_of, trace_id_of
from tests.unit.factories import Chat, model_round, refusal, seo_tour, tool

RULES = "2026-11-02"


def by_op(spans, op):
    return [s for s in spans if s.attributes["gen_ai.operation.name"] == op]


def test_one_invoke_agent_span_per_segment_with_its_tool_calls_as_children():
    chat = Chat()
    seo_tour(chat, ["Übernehmen"] * 2)

    spans = conversation_spans("conv-test", chat.events, RULES)

    agents = by_op(spans, "invoke_agent")
    assert [a.attributes["chatrecord.trigger"] for a in agents] == ["turn", "approval", "approval"]
    assert [a.attributes["chatrecord.outcome"] for a in agents] == ["awaiting_approval", "awaiting_approval", "completed"]
    assert {a.attributes["gen_ai.conversation.id"] for a in agents} == {"conv-test"}
    assert [a.attributes["chatrecord.records_written"] for a in agents] == [(), ("pages:42",), ("sys_file_reference:913",)]
    children = {a.span_id: [s.attributes["gen_ai.tool.name"] for s in spans if s.parent_id == a.span_id] for a in agents}
    assert list(children.values()) == [
        ["get_page", "chat_set_progress"],
        ["update_page_metadata", "chat_set_progress"],
        ["set_page_social_image", "chat_set_progress"],
    ]
    assert all(a.parent_id is None for a in agents)
    assert len({s.trace_id for s in spans}) == 1


def test_times_come_from_the_segment_event_and_the_steps_durations():
    chat = Chat()
    chat.user("hallo")
    chat.segment("turn", "completed", "ok", [*model_round(1, ms=2100.0), tool("get_page", 1, ms=31.7)])
    returned = chat.events[-1]

    agent, call = conversation_spans("conv-test", chat.events, RULES)

    end = int(returned.timestamp.timestamp() * 1_000_000) * 1000
    assert agent.end_ns == end
    assert agent.start_ns == end - 2_100_000_000 - 31_700_000
    assert (call.start_ns, call.end_ns) == (end - 31_700_000, end)
    assert call.parent_id == agent.span_id


def test_failed_and_held_calls_are_marked_as_the_activity_list_reads_them():
    chat = Chat()
    chat.user("hallo", page=42)
    chat.segment(
        "turn",
        "awaiting_approval",
        "Vorschlag",
        [*model_round(1), tool("get_page", 1, error=True, ms=12.0), refusal("update_page_metadata", 1)],
    )

    spans = conversation_spans("conv-test", chat.events, RULES)

    calls = {s.attributes["gen_ai.tool.name"]: s for s in by_op(spans, "execute_tool")}
    failed, held = calls["get_page"], calls["update_page_metadata"]
    assert (failed.attributes["chatrecord.tool.reading"], failed.attributes["error.type"], failed.error) == (
        "failed",
        "tool_error",
        True,
    )
    assert (held.attributes["chatrecord.tool.reading"], held.attributes["chatrecord.tool.label"], held.error) == (
        "held",
        "noch nicht ausgeführt",
        False,
    )
    assert "error.type" not in held.attributes


def test_under_the_rule_set_before_the_amendment_the_held_call_reads_failed():
    chat = Chat()
    chat.user("hallo", page=42)
    chat.segment("turn", "awaiting_approval", "Vorschlag", [*model_round(1), refusal("update_page_metadata", 1)])

    (call,) = by_op(conversation_spans("conv-test", chat.events, "2026-11-01"), "execute_tool")

    assert call.attributes["chatrecord.tool.reading"] == "failed"


def test_decisions_undecided_cards_and_edits_are_span_events():
    chat = Chat()
    seo_tour(chat, ["Übernehmen", "Behalten"])
    chat.user("Noch etwas", page=42)
    chat.segment("turn", "awaiting_approval", "Vorschlag", [*model_round(9)])
    chat.user("Doch nicht")  # leaves the card undecided
    chat.edit(1, "SEO bitte")  # cuts everything after message 1

    spans = conversation_spans("conv-test", chat.events, RULES)

    agents = by_op(spans, "invoke_agent")
    events = [[e.name for e in a.events] for a in agents]
    assert events[0] == ["chatrecord.card_decided"]
    assert [e.attributes for e in agents[1].events] == [{"chatrecord.card.approved": False, "chatrecord.card.answer": "Behalten"}]
    assert events[3][:1] == ["chatrecord.card_undecided"]
    assert events[3][1:] == ["chatrecord.message_edited", "chatrecord.turns_truncated"]
    assert [a.attributes["chatrecord.cut"] for a in agents] == [True, True, True, True]


def test_ids_derive_from_the_conversation_and_its_segments():
    chat = Chat()
    seo_tour(chat, ["Übernehmen"])

    first = conversation_spans("conv-test", chat.events, RULES)
    again = conversation_spans("conv-test", chat.events, RULES)

    assert [(s.trace_id, s.span_id, s.parent_id) for s in first] == [(s.trace_id, s.span_id, s.parent_id) for s in again]
    assert first[0].trace_id == trace_id_of("conv-test") != trace_id_of("conv-other")
    assert first[0].span_id == span_id_of("conv-test", "run/1")
    assert len({s.span_id for s in first}) == len(first)


def test_texts_only_with_with_texts_and_never_tool_arguments_or_results():
    chat = Chat()
    chat.user("geheime Frage", page=42)
    chat.segment("turn", "completed", "geheime Antwort", [*model_round(1), tool("get_page", 1)])

    without = conversation_spans("conv-test", chat.events, RULES)
    with_texts = conversation_spans("conv-test", chat.events, RULES, with_texts=True)

    assert "geheim" not in repr(without)
    agent = with_texts[0]
    assert "geheime Frage" in agent.attributes["gen_ai.input.messages"]
    assert "geheime Antwort" in agent.attributes["gen_ai.output.messages"]
    for spans in (without, with_texts):  # the factory's step carries {"secret": "argument"} and "result text"
        assert "secret" not in repr(spans) and "result text" not in repr(spans)
