"""`chatrecord traces push` over the wire: the official OTLP/HTTP exporter sends to an OTLP
receiver on a loopback port in this test (protobuf `ExportTraceServiceRequest` bodies on
POST /v1/traces, parsed with opentelemetry-proto), so CI checks what a collector or Phoenix
receives without installing Phoenix (tests/traces/test_phoenix.py, by hand): 8 `invoke_agent`
spans of the demo with their `execute_tool` children, the failed and held calls marked, the
same ids after a second push, no planted secret; a receiver that refuses is one line `error: …`."""

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
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "store.sqlite"))
    planted = tmp_path / "planted.jsonl"
    planted.write_text("\n".join(planted_lines()) + "\n", encoding="utf-8")
    assert run("ingest", DEMO).returncode == 0 and run("ingest", planted).returncode == 0
    return run


def test_a_receiver_gets_the_demo_as_genai_spans_and_the_same_ids_after_a_second_push(run, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    pushed = run("traces", "push", "conv-demo-seo", PLANTED_CONVERSATION, "--endpoint", receiver.url)
    again = run("traces", "push", "conv-demo-seo", PLANTED_CONVERSATION, "--endpoint", receiver.url)

    assert (pushed.returncode, pushed.stderr) == (0, "")
    assert pushed.stdout.splitlines() == [
        f"conv-demo-seo: 24 spans sent to {receiver.url}",
        f"{PLANTED_CONVERSATION}: 25 spans sent to {receiver.url}",
    ]
    assert again.returncode == 0, again.stderr
    assert [(path, kind) for path, kind, _ in receiver.requests] == [("/v1/traces", "application/x-protobuf")] * 4
    first = [s for _, _, request in receiver.requests[:2] for s in spans_of(request)]
    second = [s for _, _, request in receiver.requests[2:] for s in spans_of(request)]
    ids = [(s.trace_id, s.span_id) for s in first]
    assert len(set(ids)) == 49 and [(s.trace_id, s.span_id) for s in second] == ids
    assert [s.SerializeToString(deterministic=True) for s in second] == [s.SerializeToString(deterministic=True) for s in first]
    resource = {a.key: a.value.string_value for a in receiver.requests[0][2].resource_spans[0].resource.attributes}
    assert resource["service.name"] == "chatrecord"

    demo = [s for s in first if attributes(s)["gen_ai.conversation.id"] == "conv-demo-seo"]
    agents = [s for s in demo if attributes(s)["gen_ai.operation.name"] == "invoke_agent"]
    assert len(demo) == 24 and len(agents) == 8 and {s.trace_id for s in demo} == {agents[0].trace_id}
    assert {s.kind for s in agents} == {Span.SPAN_KIND_INTERNAL}
    assert all(s.start_time_unix_nano < s.end_time_unix_nano for s in agents)
    children = [s for s in demo if s.parent_span_id in {a.span_id for a in agents}]
    assert len(children) == 16 and {attributes(s)["gen_ai.operation.name"] for s in children} == {"execute_tool"}
    assert Counter(attributes(s)["gen_ai.tool.name"] for s in children) == Counter(
        {"chat_set_progress": 8, "update_page_metadata": 5, "get_page": 1, "ask_choice": 1, "set_page_social_image": 1}
    )
    assert [e.name for a in agents for e in a.events] == ["chatrecord.question_answered", *["chatrecord.card_decided"] * 6]

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
