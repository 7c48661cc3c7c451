"""The spans handed to the official OpenTelemetry SDK, with their deterministic ids and times.

They are written as OTLP/JSON through `opentelemetry-proto` or sent by `OTLPSpanExporter`. The SDK
reads the OpenTelemetry environment: `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, and, without
`--endpoint`, the exporter's endpoint, headers, timeout and compression. The default `service.name`
is chatrecord."""

from __future__ import annotations

import os
from collections.abc import Sequence

from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from adapters import version
from adapters.traces.spans import Span
from domain.errors import ChatrecordError

SERVICE_NAME = "chatrecord"
TRACES_PATH = "/v1/traces"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""Where the exporter finds its endpoint when no --endpoint is given, in this order."""
KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


class PushFailed(ChatrecordError):
    """The OTLP endpoint did not take the spans."""


def readable_spans(spans: Sequence[Span]) -> list[ReadableSpan]:
    """Returns `spans` as the SDK's ReadableSpans (sampled, resource `service.name` chatrecord
    or OTEL_SERVICE_NAME, with OTEL_RESOURCE_ATTRIBUTES, scope `chatrecord`)."""
    # only the environment's detector: no random instance id, the same bytes every time
    resource = Resource({"service.name": SERVICE_NAME, "service.version": version()}).merge(OTELResourceDetector().detect())
    scope = InstrumentationScope("chatrecord", version())
    out = []
    for span in spans:
        context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        parent = (
            SpanContext(span.trace_id, span.parent_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
            if span.parent_id is not None
            else None
        )
        out.append(
            ReadableSpan(
                name=span.name,
                context=context,
                parent=parent,
                resource=resource,
                attributes=dict(span.attributes),
                events=[Event(e.name, dict(e.attributes), timestamp=e.time_ns) for e in span.events],
                kind=KINDS[span.kind],
                instrumentation_scope=scope,
                status=Status(StatusCode.ERROR) if span.error else Status(StatusCode.UNSET),
                start_time=span.start_ns,
                end_time=span.end_ns,
            )
        )
    return out


def otlp_json(spans: Sequence[Span]) -> str:
    """Returns `spans` as OTLP/JSON (an `ExportTraceServiceRequest`, protobuf's JSON mapping,
    ids in hex as OTLP/JSON has them)."""
    message = encode_spans(readable_spans(spans))
    text = MessageToJson(message, indent=2)
    return _hex_ids(text)


def _hex_ids(text: str) -> str:
    """OTLP/JSON spells trace and span ids as hex, where protobuf's JSON mapping gives base64."""
    import base64
    import json

    data = json.loads(text)
    for resource in data.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(data, indent=2, ensure_ascii=False)


def export(spans: Sequence[Span], exporter: SpanExporter, where: str = "the exporter") -> None:
    """Hands `spans` to `exporter` in one batch. Raises PushFailed, naming `where`, if it
    reports failure."""
    if not spans:
        return
    result = exporter.export(readable_spans(spans))
    if result is not SpanExportResult.SUCCESS:
        raise PushFailed(f"{where} did not take the spans (the exporter's warnings above say why)")


def endpoint_given(endpoint: str | None) -> bool:
    """Returns whether `endpoint` or the environment names where to push."""
    return bool(endpoint) or any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


def traces_url(endpoint: str | None) -> str | None:
    """Returns the …/v1/traces URL of `endpoint`, a base or full URL. Returns None to leave it to the
    exporter's environment."""
    if not endpoint:
        return None
    url = endpoint.rstrip("/")
    return url if url.endswith(TRACES_PATH) else url + TRACES_PATH


def push(spans: Sequence[Span], endpoint: str | None) -> str:
    """Sends `spans` over OTLP/HTTP (protobuf) to `endpoint` (see `traces_url`; None: where the
    environment says). Returns the URL sent to. Raises PushFailed."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=traces_url(endpoint))
    url = str(exporter._endpoint)  # the SDK's own resolution of the environment
    try:
        export(spans, exporter, url)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]  # the SDK's shutdown is unannotated
    return url
