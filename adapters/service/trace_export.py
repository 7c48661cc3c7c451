"""Traces of stored conversations: their facts read from the store through the service layer,
mapped by `adapters.traces.spans`, written as OTLP/JSON or sent over OTLP/HTTP
(`adapters.traces.otlp`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from adapters.store.application import ConversationStore
from adapters.traces import otlp
from adapters.traces.spans import Span, conversation_spans
from domain.events import ConversationEvent


class Chatrecord(Protocol):
    """What the traces read of a store with its read models (`adapters.api.Chatrecord`, which
    calls the service layer, not the other way round)."""

    @property
    def store(self) -> ConversationStore: ...

    def events(self, conversation: str) -> list[ConversationEvent]: ...

    def active_rules(self) -> str: ...


def spans_of(chatrecord: Chatrecord, conversation: str, rules: str | None = None, with_texts: bool = False) -> list[Span]:
    """Returns the spans of a stored conversation, read under `rules` (default: the live rule
    set). Raises UnknownConversation for an id the store does not hold."""
    events = chatrecord.events(conversation)
    return conversation_spans(conversation, events, rules or chatrecord.active_rules(), with_texts)


def otlp_json(chatrecord: Chatrecord, conversation: str, rules: str | None = None, with_texts: bool = False) -> str:
    """Returns a stored conversation's spans as OTLP/JSON (one ExportTraceServiceRequest)."""
    return otlp.otlp_json(spans_of(chatrecord, conversation, rules, with_texts))


def push(
    chatrecord: Chatrecord, conversations: Sequence[str], endpoint: str, rules: str | None = None, with_texts: bool = False
) -> list[tuple[str, int]]:
    """Sends the spans of `conversations` (every stored one if empty) over OTLP/HTTP to
    `endpoint`, one batch per conversation; returns (conversation, spans sent) per conversation.
    Raises UnknownConversation before anything is sent, PushFailed when the endpoint refuses."""
    names = list(conversations) or chatrecord.store.conversation_ids()
    batches = [(name, spans_of(chatrecord, name, rules, with_texts)) for name in names]
    for _name, spans in batches:
        otlp.push(spans, endpoint)
    return [(name, len(spans)) for name, spans in batches]
