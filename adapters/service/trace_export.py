"""Traces of stored conversations: facts read through the service layer, mapped by `adapters.traces.spans`,
written as OTLP/JSON or sent over OTLP/HTTP."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from adapters.store.application import ConversationStore
from adapters.traces import otlp
from adapters.traces.spans import DEFAULT_PROVIDER, Span, conversation_spans
from domain.events import ConversationEvent


class Chatrecord(Protocol):
    """What the traces read of a store with its read models (`adapters.api.Chatrecord`)."""

    @property
    def store(self) -> ConversationStore: ...

    def events(self, conversation: str) -> list[ConversationEvent]: ...

    def active_rules(self) -> str: ...


PROVIDER_VARIABLE = "CHATRECORD_GENAI_PROVIDER"
"""The setting for `gen_ai.provider.name` (e.g. `openai`, `anthropic`); default `unknown`."""


class NoEndpoint(otlp.PushFailed):
    """Neither --endpoint nor the OpenTelemetry environment names where to push."""


@dataclass(frozen=True)
class Sent:
    """What one push of a conversation sent: `spans` in `traces` traces (one per turn) to `url`."""

    conversation: str
    spans: int
    traces: int
    url: str


def genai_provider(environ: Mapping[str, str] | None = None) -> str:
    """Returns the `gen_ai.provider.name` set by CHATRECORD_GENAI_PROVIDER, else `unknown`."""
    environ = os.environ if environ is None else environ
    return environ.get(PROVIDER_VARIABLE, "").strip() or DEFAULT_PROVIDER


def spans_of(chatrecord: Chatrecord, conversation: str, rules: str | None = None, with_texts: bool = False) -> list[Span]:
    """Returns the spans of a stored conversation, one trace per user turn, read under `rules`
    (default: the live rule set). Raises UnknownConversation for an id the store does not hold."""
    events = chatrecord.events(conversation)
    return conversation_spans(conversation, events, rules or chatrecord.active_rules(), with_texts, genai_provider())


def otlp_json(chatrecord: Chatrecord, conversation: str, rules: str | None = None, with_texts: bool = False) -> str:
    """Returns a stored conversation's spans as OTLP/JSON (one ExportTraceServiceRequest)."""
    return otlp.otlp_json(spans_of(chatrecord, conversation, rules, with_texts))


def push(
    chatrecord: Chatrecord,
    conversations: Sequence[str],
    endpoint: str | None,
    rules: str | None = None,
    with_texts: bool = False,
) -> list[Sent]:
    """Sends the spans of `conversations` (all if empty) over OTLP/HTTP, one batch per conversation.
    `endpoint` defaults to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT. Raises
    NoEndpoint or UnknownConversation before sending. Raises PushFailed when the endpoint refuses."""
    if not otlp.endpoint_given(endpoint):
        raise NoEndpoint(f"no endpoint: give --endpoint or set {' or '.join(otlp.ENDPOINT_VARIABLES)}")
    if endpoint is not None:
        parts = urlsplit(endpoint.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise NoEndpoint(
                f"--endpoint {endpoint!r} is not an http(s) URL; give one such as http://127.0.0.1:6006 (nothing was sent)"
            )
    names = list(conversations) or chatrecord.store.conversation_ids()
    batches = [(name, spans_of(chatrecord, name, rules, with_texts)) for name in names]
    sent = []
    for name, spans in batches:
        url = otlp.push(spans, endpoint)
        sent.append(Sent(name, len(spans), len({s.trace_id for s in spans}), url))
    return sent
