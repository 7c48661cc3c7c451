"""The JSON bodies of one conversation's rows read back as models: transcript messages
(`message_of_row`, `decode_messages`, each text opened where it is sealed) and run record
entries, each decoded when first asked for (`LazyEntries`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import orjson
from pydantic import TypeAdapter

from adapters.store.crypto import ERASED, ViewTexts
from adapters.views.caches import KEPT_INPUT, MessagesCache, NotesCache
from domain.values import assembled
from projections.card_outcomes import CardOutcome
from projections.run_record import Entry
from projections.transcript import Message

_ENTRIES = TypeAdapter(tuple[Entry, ...])
_OUTCOMES = TypeAdapter(tuple[CardOutcome, ...])


def only_erased(text: str) -> bool:
    """Says whether `text` holds nothing but ERASED and whitespace: what the log reads as a
    message whose texts were erased, one answer or several joined (`projections.transcript.JOIN`,
    each answer's end in `ends`). Such a text is kept as it is, so the rows read as the log's
    fold does; any other is kept as ERASED."""
    return not text.replace(ERASED, "").strip()


def message_of_row(fields: dict[str, Any]) -> Message:
    """Returns the transcript message of a row body's fields (`SQLRows._message_body`, its text
    opened): the model pydantic's validation of the same JSON makes (its fields in order, the
    JSON arrays as tuples, the fields the body names as the fields set), without validating
    again what the fold validated when it wrote the row (docs/benchmarks.md, "Figures moved
    from docstrings"). Raises KeyError for a body without `role` or
    `text`; a field the body lacks takes its default."""
    segments, ends = fields.get("segments", ()), fields.get("ends", ())
    return assembled(
        Message,
        {
            "role": fields["role"],
            "text": fields["text"],
            "number": fields.get("number"),
            "segments": segments if type(segments) is tuple else tuple(segments),
            "ends": ends if type(ends) is tuple else tuple(ends),
        },
        set(fields),
    )


def decode_messages(bodies: Sequence[str], texts: ViewTexts | None, cid: str) -> tuple[Message, ...]:
    """Returns the transcript messages of row bodies of conversation `cid` (its UUID's string),
    in order, each text opened where it is sealed (`texts`: the conversation's key looked up
    once for the rows). The bodies are the fold's own writes, validated when it made them
    (`SQLRows._message_body`): each is read back as the model it was (`message_of_row`), not
    validated again. Raises ValueError for a sealed body where `texts` is None, InvalidTag for
    a sealed text that does not open with the conversation's key."""
    decoded = []
    open_text: Callable[[str], str] | None = None
    loads, made = orjson.loads, message_of_row
    for body in bodies:
        fields = loads(body)
        sealed = fields.pop("sealed", None)
        if sealed is not None:
            if open_text is None:
                if texts is None:
                    raise ValueError("a transcript row holds a sealed text, but the store has no data keys")
                open_text = texts.opener(cid)  # the key looked up once for the rows
            fields["text"] = open_text(sealed)
        decoded.append(made(fields))
    return tuple(decoded)


def decode_kept_messages(bodies: Sequence[str], texts: ViewTexts | None, cid: str, kept: MessagesCache) -> tuple[Message, ...]:
    """As `decode_messages`, but a body decoded before (kept in `kept` under `cid`) is not
    again, nor its text opened, while the conversation's texts are readable (once its key is
    erased every kept message of it is decoded afresh, so reads as erased); the bodies
    decoded here are kept there. Raises as `decode_messages`."""
    found = [kept.get(cid, body) for body in bodies]
    if (
        texts is not None
        and any(m is not None and '"sealed":' in b for m, b in zip(found, bodies, strict=True))
        and not texts.readable(cid)
    ):
        found = [None] * len(bodies)  # erased: the kept texts are not to be read any more
    missing = [i for i, message in enumerate(found) if message is None]
    if missing:
        for i, message in zip(missing, decode_messages([bodies[i] for i in missing], texts, cid), strict=True):
            found[i] = message
            kept.put(cid, bodies[i], message)
    return cast("tuple[Message, ...]", tuple(found))  # every None was filled above


def decode_turn_bodies(
    messages: Sequence[str],
    entries: Sequence[str],
    outcomes: Sequence[str],
    texts: ViewTexts | None,
    cid: str,
    kept: MessagesCache | None = None,
    rendered: NotesCache | None = None,
) -> tuple[tuple[Message, ...], tuple[Entry, ...], tuple[CardOutcome, ...]]:
    """Returns what a turn read's row bodies of conversation `cid` hold (each kind in order):
    its transcript messages, run record entries and card outcomes. With the process's caches
    (`kept`, `rendered`), each body is decoded once per process, up to KEPT_INPUT messages or
    card outcomes (a longer list is decoded in one call, so it does not push out what the turn
    reads keep); without, every kind in one call. Raises as `decode_messages`."""
    if kept is not None and len(messages) <= KEPT_INPUT:
        decoded = decode_kept_messages(messages, texts, cid, kept)
    else:
        decoded = decode_messages(messages, texts, cid)
    if rendered is None:
        return decoded, _ENTRIES.validate_json(f"[{','.join(entries)}]"), _OUTCOMES.validate_json(f"[{','.join(outcomes)}]")
    if len(outcomes) > KEPT_INPUT:
        return decoded, tuple(map(rendered.entry, entries)), _OUTCOMES.validate_json(f"[{','.join(outcomes)}]")
    return decoded, tuple(map(rendered.entry, entries)), tuple(map(rendered.outcome, outcomes))


class LazyEntries(Sequence[Entry]):
    """Run record entries from their JSON bodies, each decoded (by `decode`, default pydantic's
    `Entry.model_validate_json`) on first access. With `total`, `bodies` are only the newest of
    `total` entries: the first access to an older one asks `older()` for the bodies of all the
    older ones, oldest first, once."""

    def __init__(
        self,
        bodies: list[str],
        decode: Callable[[str], Entry] | None = None,
        total: int | None = None,
        older: Callable[[], list[str]] | None = None,
    ) -> None:
        self._bodies = bodies
        self._decode = decode or Entry.model_validate_json
        self._decoded: dict[int, Entry] = {}
        self._total = len(bodies) if total is None else total
        self._missing = self._total - len(bodies)  # the oldest entries, not read yet
        self._older = older

    def __len__(self) -> int:
        return self._total

    def __getitem__(self, index: int) -> Entry:  # type: ignore[override]  # an index, no slice: read one by one
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError(index)
        entry = self._decoded.get(index)
        if entry is None:
            if index < self._missing:
                assert self._older is not None
                self._bodies = [*self._older(), *self._bodies]
                self._missing = 0
            entry = self._decoded[index] = self._decode(self._bodies[index - self._missing])
        return entry
