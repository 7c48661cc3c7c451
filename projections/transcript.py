"""The transcript read model: the messages the model is sent, without notes.

State: the conversation's `kind` (`chat`, `alt_text`) and `messages` with role, text and number.
User messages: typed ones, answers to questions and appended card answers. Assistant messages:
segment answers; consecutive answers join with a blank line. An edit replaces the text and cuts the
transcript after it. Notes are never stored here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache, singledispatch
from typing import Any, Literal

from pydantic import ModelWrapValidatorHandler, PrivateAttr, TypeAdapter, computed_field, model_validator

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
from domain.values import Immutable, TranscriptLine, assembled, trusted
from projections.dispatch import by_class
from projections.label_guard import disarm, has_forged_label
from projections.prefix_list import extended, taken
from projections.rules import RuleSet, resolve

__all__ = ["JOIN", "Message", "Transcript", "apply", "disarm", "index_of_user", "initial"]

JOIN = "\n\n"


class Message(Immutable):
    """One transcript message; `number` is the user message number (None for the assistant). A joined
    assistant message names its `segments`, with `ends` each answer's end offset in `text`."""

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
    """The transcript of one conversation: `Transcript(kind=…, messages=…)`. It validates, dumps
    (`{"kind", "messages"}`) and compares as those two fields. Appending costs O(1) amortised: the
    fold's transcripts share one list (`_done[:_n]`). The last message is apart (`_last`), so a
    joined answer replaces it without a copy. `messages` builds its tuple once."""

    kind: Literal["chat", "alt_text"] = "chat"
    """The conversation's kind: `chat`, or `alt_text` (no notes)."""
    _done: list[Message] | None = PrivateAttr(
        default=None
    )  # set by every constructor: a default_factory costs pydantic an inspect.signature per model
    _n: int = PrivateAttr(default=0)
    _last: Message | None = PrivateAttr(default=None)
    _tuple: tuple[Message, ...] | None = PrivateAttr(default=None)

    def __init__(self, *, kind: Literal["chat", "alt_text"] = "chat", messages: Sequence[Message] = ()) -> None:
        given: dict[str, Any] = {"kind": kind, "messages": messages}  # `messages` taken by `_given_messages`
        super().__init__(**given)

    @model_validator(mode="wrap")
    @classmethod
    def _given_messages(cls, data: Any, handler: ModelWrapValidatorHandler[Transcript]) -> Transcript:
        """Takes `messages` (a sequence of messages or their dicts) beside the model's fields."""
        data, given = taken(data, "messages")
        made = handler(data)
        messages = _MESSAGES.validate_python(given) if given else ()
        made.__pydantic_private__ = {"_done": list(messages), "_n": len(messages), "_last": None, "_tuple": messages}
        return made

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented way: a property under it
    @property
    def messages(self) -> tuple[Message, ...]:
        """The messages, oldest first."""
        held = self.__pydantic_private__
        assert held is not None  # set by validation and by `_held`
        built: tuple[Message, ...] | None = held["_tuple"]
        if built is None:
            last = held["_last"]
            built = held["_tuple"] = (*held["_done"][: held["_n"]], *(() if last is None else (last,)))
        return built

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Transcript):
            return NotImplemented
        return self.kind == other.kind and self.messages == other.messages

    def __hash__(self) -> int:
        return hash((self.kind, self.messages))


_MESSAGES = TypeAdapter(tuple[Message, ...])


def _held(state: Transcript, done: list[Message], n: int, last: Message | None, kind: str | None = None) -> Transcript:
    """Returns a transcript of `state`'s kind (or `kind`) holding `done[:n]` and then `last`."""
    made = assembled(Transcript, {"kind": kind or state.kind}, set(state.__pydantic_fields_set__))
    object.__setattr__(made, "__pydantic_private__", {"_done": done, "_n": n, "_last": last, "_tuple": None})
    return made


def _of(state: Transcript) -> tuple[list[Message], int, Message | None]:
    held = state.__pydantic_private__
    assert held is not None
    return held["_done"], held["_n"], held["_last"]


def held_messages(state: Transcript) -> tuple[list[Message], int, Message | None]:
    """Returns the shared list, `n` (its first `n` precede the last message) and the last message. The
    last is None when it is in the list."""
    return _of(state)


def _append(state: Transcript, message: Message) -> Transcript:
    """Returns `state` with `message` appended, in O(1) amortised."""
    done, n, last = _of(state)
    if last is not None:
        done, n = extended(done, n, (last,)), n + 1
    return _held(state, done, n, message)


def _replaced(state: Transcript, messages: tuple[Message, ...]) -> Transcript:
    """Returns a transcript of `state`'s kind holding `messages` (in a list of its own)."""
    made = _held(state, list(messages), len(messages), None)
    assert made.__pydantic_private__ is not None
    made.__pydantic_private__["_tuple"] = messages
    return made


def initial() -> Transcript:
    """Returns the transcript of a conversation before its first event."""
    return Transcript()


def apply(state: Transcript, event: ConversationEvent, rules: RuleSet | str) -> Transcript:
    """Returns the transcript after `event`. Under a rule set with notes, a forged label opening is
    disarmed (`projections.label_guard`)."""
    return applied(state, event, disarms(event, resolve(rules)))


def applied(state: Transcript, event: ConversationEvent, disarmed: bool) -> Transcript:
    """Returns the transcript after `event`, what it adds or changes disarmed when `disarmed`
    (`disarms`): rule sets folded side by side share one transcript until they disarm apart."""
    after = _APPLY(event, state)
    if disarmed:
        return _replaced(after, tuple(m.model_copy(update={"text": disarm(m.text)}) for m in after.messages))
    return after


def reading(rules: RuleSet) -> bool:
    """Returns what of `rules` `disarms` reads (whether the rule set has notes)."""
    return rules.notes


def disarms(event: ConversationEvent, rules: RuleSet) -> bool:
    """Returns True when `event` brings a label opening in under a rule set with notes."""
    return rules.notes and any(has_forged_label(text) for text in _texts(event))


def _texts(event: ConversationEvent) -> Iterator[str]:
    """Yields the texts an event brings into the transcript; most events have none."""
    text, answer, messages = _text_fields(type(event))
    for name in (text, answer):
        value = getattr(event, name) if name else None
        if isinstance(value, str):
            yield value
    if messages:
        yield from (line.text for line in getattr(event, messages))


@cache
def _text_fields(cls: type) -> tuple[str | None, str | None, str | None]:
    """Returns which of `text`, `answer` and `messages` an event class has; None for none."""
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
    return _append(state, Message(role="user", text=text, number=number))


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
    done, n, last = _of(state)
    return _held(state, done, n, last, event.kind)


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
    done, n, held = _of(state)
    newest = held if held is not None else (done[n - 1] if n else None)
    last = newest if newest is not None and newest.role == "assistant" else None
    message = answered(last, event.segment, event.answer)
    if last is None:
        return _append(state, message)
    return _held(state, done, n, message) if held is not None else _held(state, done, n - 1, message)


def answered(last: Message | None, segment: str, answer: str) -> Message:
    """Returns the assistant message a segment's `answer` makes. It joins `last` when that is an
    assistant's message, else it is a message of its own."""
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
    return _replaced(state, (*state.messages[:index], edited, *state.messages[index + 1 :]))


@_apply.register
def _(event: TurnsTruncated, state: Transcript) -> Transcript:
    index = index_of_user(state.messages, event.after_message)
    if index is None:
        return state
    return _replaced(state, state.messages[: index + 1])


@_apply.register
def _(event: TranscriptReplaced, state: Transcript) -> Transcript:
    return _replaced(state, from_lines(event.messages))


@_apply.register
def _(event: LegacyRowImported, state: Transcript) -> Transcript:
    return _replaced(state, from_lines(event.messages))


_APPLY = by_class(_apply)
"""The dispatch the fold calls (`projections.dispatch`), made after every branch above is registered."""
