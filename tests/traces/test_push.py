"""`chatrecord traces push` over the wire: the official OTLP/HTTP exporter sends to an OTLP
receiver on a loopback port in this test (protobuf `ExportTraceServiceRequest` bodies on
POST /v1/traces, parsed with opentelemetry-proto), so CI checks what a collector or Phoenix
receives without Phoenix (tests/traces/test_phoenix.py): the demo's turns as traces, its 8
`invoke_agent` spans with their `chat` and `execute_tool` children, the failed and held calls
marked, the same ids after a second push, no planted secret; the endpoint, headers and resource
from the OpenTelemetry environment; a receiver that refuses is one line `error: …`."""

from __future__ import annotations

import gzip
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.e2e.conftest import DEMO, runner
from tests.traces.lines import PLANTED, PLANTED_CONVERSATION, planted_lines


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: keeps each request it is sent; answers `status`."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, str, ExportTraceServiceRequest]] = []
        self.headers: list[dict[str, str]] = []
        self.status = 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append((self.path, self.headers["Content-Type"], request))
        self.server.headers.append({k.lower(): v for k, v in self.headers.items()})
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    return [span for resource in request.resource_spans for scope in resource.scope_spans for span in scope.spans]


def attributes(span: Span) -> dict[str, str]:
    return {a.key: a.value.string_value for a in span.attributes}


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Returns `run(*args, **settings)`: the CLI on a store holding the demo and the planted tour."""
    store = str(tmp_path / "store.sqlite")

    def go(*args: str, **settings: str):  # type: ignore[no-untyped-def]
        return runner(tmp_path, CHATRECORD_DB=store, **settings)(*args)

    planted = tmp_path / "planted.jsonl"
    planted.write_text("\n".join(planted_lines()) + "\n", encoding="utf-8")
    assert go("ingest", DEMO).returncode == 0 and go("ingest", planted).returncode == 0
    return go


def test_a_receiver_gets_the_demo_as_genai_spans_and_the_same_ids_after_a_second_push(run, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    pushed = run("traces", "push", "conv-demo-seo", PLANTED_CONVERSATION, "--endpoint", receiver.url)
    again = run("traces", "push", "conv-demo-seo", PLANTED_CONVERSATION, "--endpoint", receiver.url)

    assert (pushed.returncode, pushed.stderr) == (0, "")
    assert pushed.stdout.splitlines() == [
        f"conv-demo-seo: 43 spans in 2 traces sent to {receiver.url}",
        f"{PLANTED_CONVERSATION}: 44 spans in 2 traces sent to {receiver.url}",
    ]
    assert again.returncode == 0, again.stderr
    assert [(path, kind) for path, kind, _ in receiver.requests] == [("/v1/traces", "application/x-protobuf")] * 4
    first = [s for _, _, request in receiver.requests[:2] for s in spans_of(request)]
    second = [s for _, _, request in receiver.requests[2:] for s in spans_of(request)]
    ids = [(s.trace_id, s.span_id) for s in first]
    assert len(set(ids)) == 87 and [(s.trace_id, s.span_id) for s in second] == ids
    assert [s.SerializeToString(deterministic=True) for s in second] == [s.SerializeToString(deterministic=True) for s in first]
    resource = {a.key: a.value.string_value for a in receiver.requests[0][2].resource_spans[0].resource.attributes}
    assert resource["service.name"] == "chatrecord"

    demo = [s for s in first if attributes(s)["gen_ai.conversation.id"] == "conv-demo-seo"]
    roots = [s for s in demo if not s.parent_span_id]
    agents = [s for s in demo if attributes(s).get("gen_ai.operation.name") == "invoke_agent"]
    assert [r.name for r in roots] == ["turn 1 (completed)", "turn 3 (no_answer)"]
    assert len(demo) == 43 and len(agents) == 8 and {s.trace_id for s in demo} == {r.trace_id for r in roots}
    assert {s.parent_span_id for s in agents} == {roots[0].span_id}
    assert {s.kind for s in agents} == {Span.SPAN_KIND_INTERNAL}
    assert all(s.start_time_unix_nano < s.end_time_unix_nano for s in agents)
    children = [s for s in demo if s.parent_span_id in {a.span_id for a in agents}]
    assert Counter(attributes(s)["gen_ai.operation.name"] for s in children) == Counter({"execute_tool": 16, "chat": 10})
    assert {s.kind for s in children if attributes(s)["gen_ai.operation.name"] == "chat"} == {Span.SPAN_KIND_CLIENT}
    assert Counter(attributes(s)["gen_ai.tool.name"] for s in children if "gen_ai.tool.name" in attributes(s)) == Counter(
        {"chat_set_progress": 8, "update_page_metadata": 5, "get_page": 1, "ask_choice": 1, "set_page_social_image": 1}
    )
    assert [s.name for s in demo if s.parent_span_id == roots[0].span_id and s not in agents] == [
        "question answered",
        *["card approved (Übernehmen)"] * 6,
    ]

    planted = [s for s in first if attributes(s)["gen_ai.conversation.id"] == PLANTED_CONVERSATION]
    marked = [
        (
            attributes(s)["gen_ai.tool.name"],
            attributes(s)["chatrecord.tool.reading"],
            attributes(s).get("error.type"),
            s.status.code,
        )
        for s in planted
        if attributes(s).get("chatrecord.tool.reading") not in (None, "ran")
    ]
    assert marked == [
        ("get_page", "failed", "tool_error", Status.STATUS_CODE_ERROR),
        ("update_page_metadata", "held", None, Status.STATUS_CODE_UNSET),
    ]
    assert not any(PLANTED.encode() in request.SerializeToString() for _, _, request in receiver.requests)


def test_a_receiver_that_refuses_the_spans_is_one_line_error(run, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    receiver.status = 400  # not retried by the exporter

    done = run("traces", "push", "conv-demo-seo", "--endpoint", f"{receiver.url}/v1/traces")

    assert done.returncode == 1 and done.stdout == ""
    assert len(receiver.requests) == 1
    assert done.stderr.splitlines()[-1].startswith(f"error: {receiver.url}/v1/traces did not take the spans")


def test_the_endpoint_headers_and_resource_come_from_the_opentelemetry_environment(run, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    pushed = run(
        "traces",
        "push",
        "conv-demo-seo",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.url}/custom/traces",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9/not-this-one",
        OTEL_EXPORTER_OTLP_HEADERS="Authorization=Basic%20cGs6c2s=",
        OTEL_SERVICE_NAME="seo-chat",
        OTEL_RESOURCE_ATTRIBUTES="openinference.project.name=chatrecord-demo,deployment.environment=test",
    )
    base = run("traces", "push", "conv-demo-seo", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)

    assert (pushed.returncode, pushed.stderr) == (0, "")
    assert pushed.stdout == f"conv-demo-seo: 43 spans in 2 traces sent to {receiver.url}/custom/traces\n"
    assert base.stdout == f"conv-demo-seo: 43 spans in 2 traces sent to {receiver.url}/v1/traces\n"
    assert [path for path, _, _ in receiver.requests] == ["/custom/traces", "/v1/traces"]
    assert receiver.headers[0]["authorization"] == "Basic cGs6c2s="
    resource = {a.key: a.value.string_value for a in receiver.requests[0][2].resource_spans[0].resource.attributes}
    assert (resource["service.name"], resource["openinference.project.name"], resource["deployment.environment"]) == (
        "seo-chat",
        "chatrecord-demo",
        "test",
    )
    default = {a.key: a.value.string_value for a in receiver.requests[1][2].resource_spans[0].resource.attributes}
    assert default["service.name"] == "chatrecord" and "openinference.project.name" not in default


def test_no_endpoint_anywhere_is_one_line_error(run) -> None:  # type: ignore[no-untyped-def]
    done = run("traces", "push", "conv-demo-seo", OTEL_EXPORTER_OTLP_ENDPOINT="", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="")

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines()[-1] == (
        "error: no endpoint: give --endpoint or set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT"
    )


def test_the_provider_setting_names_every_model_span(run, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    run("traces", "push", "conv-demo-seo", "--endpoint", receiver.url, CHATRECORD_GENAI_PROVIDER="openai")

    spans = spans_of(receiver.requests[0][2])
    providers = {
        attributes(s).get("gen_ai.operation.name"): attributes(s)["gen_ai.provider.name"]
        for s in spans
        if not s.parent_span_id or attributes(s).get("gen_ai.operation.name") in ("chat", "invoke_agent")
    }
    assert providers == {None: "openai", "chat": "openai", "invoke_agent": "openai"}
