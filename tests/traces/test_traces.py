"""Traces of stored conversations through the service layer, on SQLite and PostgreSQL: the
spans the official SDK exporter receives (the SDK's in-memory exporter): one trace per user
turn of the demo and the Behalten tour, in the GenAI conventions' shape, the OTLP/JSON checked
against opentelemetry-proto's schema, the same ids twice, and no planted secret in either."""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.json_format import Parse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adapters.api import Chatrecord
from adapters.backends.settings import postgres_env, sqlite_env
from adapters.bootstrap import build_store
from adapters.ingest.step_models import call_id_digest
from adapters.service import trace_export as traces
from adapters.traces import otlp
from tests.traces.lines import BEHALTEN, PLANTED, PLANTED_CONVERSATION, TEXT_MARK, behalten_lines, demo_lines, planted_lines

DEMO = "conv-demo-seo"


@pytest.fixture(params=["sqlite", "postgres"])
def chatrecord(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chatrecord]:
    if request.param == "sqlite":
        env = sqlite_env(tmp_path / "store.sqlite")
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        env = {**postgres_env(url), "POSTGRES_SCHEMA": schema, "POSTGRES_POOL_SIZE": "1"}
    chatrecord = Chatrecord(build_store(env))
    chatrecord.ingest(demo_lines(), "demo")
    chatrecord.ingest(planted_lines(), "planted")
    chatrecord.ingest(behalten_lines(), "behalten")
    try:
        yield chatrecord
    finally:
        chatrecord.close()


def exported(chatrecord: Chatrecord, conversation: str, with_texts: bool = False):
    exporter = InMemorySpanExporter()
    otlp.export(traces.spans_of(chatrecord, conversation, with_texts=with_texts), exporter)
    return exporter.get_finished_spans()


def test_the_demo_exports_one_trace_per_user_turn_in_the_genai_shape(chatrecord: Chatrecord) -> None:
    spans = exported(chatrecord, DEMO)

    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == ["turn 1 (completed)", "turn 3 (no_answer)"]
    assert len({s.context.trace_id for s in spans}) == 2 == len(roots) and len(spans) == 43
    agents = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "invoke_agent"]
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert [a.name for a in agents] == [
        "invoke_agent nr-llm (turn → awaiting_input)",
        "invoke_agent nr-llm (answer → awaiting_approval)",
        *["invoke_agent nr-llm (approval → awaiting_approval)"] * 5,
        "invoke_agent nr-llm (approval → completed)",
    ]
    assert {a.parent.span_id for a in agents} == {roots[0].context.span_id}
    assert {s.kind.name for s in agents + tools} == {"INTERNAL"} and {s.kind.name for s in chats} == {"CLIENT"}
    assert len(chats) == 10 and {c.name for c in chats} == {"chat unknown"}
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {DEMO}
    assert {s.attributes["gen_ai.provider.name"] for s in agents + chats + roots} == {"unknown"}
    assert Counter(s.attributes["gen_ai.tool.name"] for s in tools) == Counter(
        {"chat_set_progress": 8, "update_page_metadata": 5, "get_page": 1, "ask_choice": 1, "set_page_social_image": 1}
    )
    assert {s.attributes["gen_ai.tool.type"] for s in tools} == {"function"}
    assert {s.parent.span_id for s in tools + chats} == {a.context.span_id for a in agents}
    decisions = [s for s in spans if "chatrecord.decision" in s.attributes]
    assert [d.name for d in decisions] == ["question answered", *["card approved (Übernehmen)"] * 6]
    assert all(d.parent.span_id == roots[0].context.span_id and d.start_time < d.end_time for d in decisions)
    assert sum(len(a.attributes["chatrecord.records_written"]) for a in agents) == 6
    assert all(s.start_time < s.end_time for s in agents)
    assert all(not s.events for s in agents)


def test_the_demos_model_calls_carry_the_usage_its_lines_state_and_its_tools_their_call_ids(chatrecord: Chatrecord) -> None:
    spans = exported(chatrecord, DEMO)
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    lines = [json.loads(line) for line in demo_lines()]
    llm = [step for line in lines if line["type"] == "segment_returned" for step in line["steps"] if step["kind"] == "llm"]

    assert len(chats) == len(llm) == 10
    assert [c.attributes["gen_ai.usage.input_tokens"] for c in chats] == [step["promptTokens"] for step in llm]
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == sum(step["completionTokens"] for step in llm) == 1200
    assert sum(c.attributes["llm.token_count.prompt"] for c in chats) == 18000
    assert sum(c.attributes["llm.token_count.total"] for c in chats) == sum(step["totalTokens"] for step in llm) == 19200
    assert sum(c.attributes["llm.cost.total"] for c in chats) == pytest.approx(sum(step["estimatedCost"] for step in llm))
    assert [c.attributes["chatrecord.cost"] for c in chats] == [0.0041] * 10
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [("tool_calls",)] * 9 + [("stop",)]
    asked = {call_id_digest(call["id"]) for step in llm for call in step["requestedToolCalls"]}
    given = [s.attributes.get("gen_ai.tool.call.id") for s in tools]
    assert len(asked) == 15 and set(given) - {None} == asked and len(given) == 16
    assert [s.name for s in tools if "gen_ai.tool.call.id" not in s.attributes] == ["execute_tool chat_set_progress"]


def test_the_behalten_tour_marks_its_declined_calls_with_their_label(chatrecord: Chatrecord) -> None:
    spans = exported(chatrecord, BEHALTEN)

    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == ["turn 1 (completed)", "turn 5 (no_answer)"] and len(spans) == 20
    declined = [s for s in spans if s.attributes.get("chatrecord.tool.reading") == "declined"]
    assert [(s.name, s.attributes["chatrecord.tool.refused"], s.attributes["chatrecord.tool.label"]) for s in declined] == [
        ("execute_tool update_page_metadata (declined)", True, "abgelehnt")
    ] * 3
    assert [s.name for s in spans if "chatrecord.decision" in s.attributes] == ["card declined (Behalten)"] * 3


def test_failed_and_held_calls_are_marked(chatrecord: Chatrecord) -> None:
    tools = [s for s in exported(chatrecord, PLANTED_CONVERSATION) if s.attributes.get("gen_ai.operation.name") == "execute_tool"]

    marked = [
        (
            s.attributes["gen_ai.tool.name"],
            s.attributes["chatrecord.tool.reading"],
            s.attributes.get("error.type"),
            s.status.status_code.name,
        )
        for s in tools
        if s.attributes["chatrecord.tool.reading"] != "ran"
    ]
    assert marked == [("get_page", "failed", "tool_error", "ERROR"), ("update_page_metadata", "held", None, "UNSET")]
    assert [s.name for s in tools if s.attributes["chatrecord.tool.reading"] != "ran"] == [
        "execute_tool get_page (failed)",
        "execute_tool update_page_metadata (held)",
    ]


def test_the_same_ids_every_time(chatrecord: Chatrecord) -> None:
    first = [(s.context.trace_id, s.context.span_id) for s in exported(chatrecord, DEMO)]
    again = [(s.context.trace_id, s.context.span_id) for s in exported(chatrecord, DEMO)]

    assert first == again and len(set(first)) == 43


def proto_of(text: str) -> ExportTraceServiceRequest:
    """Parses OTLP/JSON into opentelemetry-proto's message, unknown fields refused (the schema
    check); hex ids back to the bytes protobuf's JSON mapping reads as base64."""
    data = json.loads(text)
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return Parse(json.dumps(data), ExportTraceServiceRequest(), ignore_unknown_fields=False)


def test_the_otlp_json_holds_to_the_opentelemetry_proto_schema(chatrecord: Chatrecord) -> None:
    text = traces.otlp_json(chatrecord, DEMO)

    request = proto_of(text)
    spans = [s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans]
    assert len(spans) == 43
    assert {len(s.trace_id) for s in spans} == {16} and {len(s.span_id) for s in spans} == {8}
    assert sum(1 for s in spans if s.parent_span_id) == 41
    assert {a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes}["service.name"] == "chatrecord"
    assert text == traces.otlp_json(chatrecord, DEMO)  # byte for byte the same: no random resource id


def test_no_planted_secret_in_the_pushed_or_written_spans_and_texts_only_with_with_texts(chatrecord: Chatrecord) -> None:
    without = traces.otlp_json(chatrecord, PLANTED_CONVERSATION)
    with_texts = traces.otlp_json(chatrecord, PLANTED_CONVERSATION, with_texts=True)
    pushed = repr(
        [
            (s.name, dict(s.attributes), [(e.name, dict(e.attributes)) for e in s.events])
            for s in exported(chatrecord, PLANTED_CONVERSATION, with_texts=True)
        ]
    )

    assert PLANTED not in without and PLANTED not in with_texts and PLANTED not in pushed
    assert TEXT_MARK not in without
    assert TEXT_MARK in with_texts and TEXT_MARK in pushed
    assert "gen_ai.input.messages" in with_texts and "gen_ai.output.messages" in with_texts
    assert "finish_reason" in with_texts and "input.value" in with_texts and "output.value" in with_texts
