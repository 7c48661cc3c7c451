"""The transcript read model: the messages the model is sent, without notes.

State: `kind` of the conversation (`chat` / `alt_text`) and `messages`, each with its role,
text and, for a user message, its number. User messages: typed (`UserMessagePosted`), answers
to questions (`QuestionAnswered`) and appended card answers (`CardDecided.message/text`).
Assistant messages: segment answers; answers with no user message between them join into one
message (joined with a blank line), as the chat joins a tour's text. An edit replaces the text
and cuts the transcript after the edited message. Notes are never stored here.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache, singledispatch
from typing import Literal

from domain.events import (
    CardDecided,
    ConversationEvent,
    ConversationStarted,
    LegacyRowImported,
    MessageEdited,
    QuestionAnswered,
    SegmentReturned,
    TranscriptReplaced,
    TurnsTruncated,
    UserMessagePosted,
)
from domain.values import Immutable, TranscriptLine, trusted
from projections.label_guard import disarm, has_forged_label
from projections.rules import RuleSet, resolve

__all__ = ["JOIN", "Message", "Transcript", "apply", "disarm", "index_of_user", "initial"]

JOIN = "\n\n"


class Message(Immutable):
    """One transcript message; `number` is the user message number (None for the assistant).

    An assistant message joined from segment answers names them in `segments`, with `ends`
    the character offset in `text` where each one's answer ends (so a note can stand beside
    its own segment's answer).
    """

    role: Literal["user", "assistant"]
    """`user` or `assistant`."""
    text: str
    """The message's text, as the model is sent it."""
    number: int | None = None
    """The user message number; None for an assistant message."""
    segments: tuple[str, ...] = ()
    """The segments whose answers an assistant message joins, in order."""
    ends: tuple[int, ...] = ()
    """For each of `segments`, the character offset in `text` where its answer ends."""


class Transcript(Immutable):
    """The transcript of one conversation."""

    kind: Literal["chat", "alt_text"] = "chat"
    """The conversation's kind: `chat`, or `alt_text` (no notes)."""
    messages: tuple[Message, ...] = ()
    """The messages, oldest first."""


def initial() -> Transcript:
    """Returns the transcript of a conversation before its first event."""
    return Transcript()


def apply(state: Transcript, event: ConversationEvent, rules: RuleSet | str) -> Transcript:
    """Returns the transcript after `event`. Under a rule set with notes, a label's opening
    that a user or an answer wrote, or one that reads as it, is disarmed (see
    `projections.label_guard`)."""
    after = _apply(event, state)
    if disarms(event, resolve(rules)):
        messages = tuple(m.model_copy(update={"text": disarm(m.text)}) for m in after.messages)
        return after.model_copy(update={"messages": messages})
    return after


def disarms(event: ConversationEvent, rules: RuleSet) -> bool:
    """Returns True when `event` brings a label's opening into the transcript under a rule set
    with notes: then the messages it adds or changes are disarmed."""
    return rules.notes and any(has_forged_label(text) for text in _texts(event))


def _texts(event: ConversationEvent) -> Iterator[str]:
    """Yields the texts an event brings into the transcript (only those are searched), one by
    one: the fold asks of every event, and most have none."""
    text, answer, messages = _text_fields(type(event))
    for name in (text, answer):
        value = getattr(event, name) if name else None
        if isinstance(value, str):
            yield value
    if messages:
        yield from (line.text for line in getattr(event, messages))


@cache
def _text_fields(cls: type) -> tuple[str | None, str | None, str | None]:
    """Returns which of `text`, `answer` and `messages` an event class has (None: not a field):
    asking an event for a field it lacks costs pydantic an AttributeError, once per event."""
    fields = getattr(cls, "model_fields", {})
    text, answer, messages = (name if name in fields else None for name in ("text", "answer", "messages"))
    return text, answer, messages


def index_of_user(messages: tuple[Message, ...], number: int) -> int | None:
    """Returns the index of user message `number`, searching from the end; None if absent."""
    for index in range(len(messages) - 1, -1, -1):
        found = messages[index].number
        if found is not None and found <= number:
            return index if found == number else None
    return None


def _append_user(state: Transcript, number: int, text: str) -> Transcript:
    message = Message(role="user", text=text, number=number)
    return state.model_copy(update={"messages": (*state.messages, message)})


def from_lines(lines: tuple[TranscriptLine, ...]) -> tuple[Message, ...]:
    out: list[Message] = []
    users = 0
    for line in lines:
        if line.role == "user":
            users += 1
        out.append(Message(role=line.role, text=line.text, number=users if line.role == "user" else None))
    return tuple(out)


@singledispatch
def _apply(event: ConversationEvent, state: Transcript) -> Transcript:
    return state


@_apply.register
def _(event: ConversationStarted, state: Transcript) -> Transcript:
    return state.model_copy(update={"kind": event.kind})


@_apply.register
def _(event: UserMessagePosted, state: Transcript) -> Transcript:
    return _append_user(state, event.message, event.text)


@_apply.register
def _(event: QuestionAnswered, state: Transcript) -> Transcript:
    return _append_user(state, event.message, event.text)


@_apply.register
def _(event: CardDecided, state: Transcript) -> Transcript:
    if event.message is None or event.text is None:
        return state
    return _append_user(state, event.message, event.text)


@_apply.register
def _(event: SegmentReturned, state: Transcript) -> Transcript:
    if event.answer is None:
        return state
    messages = state.messages
    last = messages[-1] if messages and messages[-1].role == "assistant" else None
    message = answered(last, event.segment, event.answer)
    return state.model_copy(update={"messages": (*messages[: -1 if last else None], message)})


def answered(last: Message | None, segment: str, answer: str) -> Message:
    """Returns the assistant message a segment's `answer` makes: joined to `last`, the
    transcript's last message when it is an assistant's, else a message of its own."""
    if last is None:  # from a validated event's fields: not validated again (`domain.values.trusted`)
        return trusted(Message, role="assistant", text=answer, segments=(segment,), ends=(len(answer),))
    text = last.text + JOIN + answer
    return trusted(Message, role="assistant", text=text, segments=(*last.segments, segment), ends=(*last.ends, len(text)))


@_apply.register
def _(event: MessageEdited, state: Transcript) -> Transcript:
    index = index_of_user(state.messages, event.message)
    if index is None:
        return state
    edited = state.messages[index].model_copy(update={"text": event.text})
    messages = (*state.messages[:index], edited, *state.messages[index + 1 :])
    return state.model_copy(update={"messages": messages})


@_apply.register
def _(event: TurnsTruncated, state: Transcript) -> Transcript:
    index = index_of_user(state.messages, event.after_message)
    if index is None:
        return state
    return state.model_copy(update={"messages": state.messages[: index + 1]})


@_apply.register
def _(event: TranscriptReplaced, state: Transcript) -> Transcript:
    return state.model_copy(update={"messages": from_lines(event.messages)})


@_apply.register
def _(event: LegacyRowImported, state: Transcript) -> Transcript:
    return state.model_copy(update={"messages": from_lines(event.messages)})
