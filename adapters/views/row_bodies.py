"""The JSON bodies of one conversation's rows read back as models: transcript messages, texts opened where
sealed (`decode_messages`), and run record entries decoded on first access (`LazyEntries`)."""

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
    """Says whether `text` holds only ERASED and whitespace, one answer or several joined
    (`transcript.JOIN`; `ends`). Such a text is kept as it is; any other is kept as ERASED."""
    return not text.replace(ERASED, "").strip()


def message_of_row(fields: dict[str, Any]) -> Message:
    """Returns the transcript message of a row body's fields, its text opened. Equals what pydantic's
    validation of the same JSON makes, without validating again. Raises KeyError for a body without
    `role` or `text`. A missing field takes its default."""
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
    """Returns the transcript messages of `cid`'s row bodies, in order, texts opened where sealed. `texts`
    holds the conversation's key. Bodies are read back without validation (`message_of_row`). Raises
    ValueError for a sealed body where `texts` is None. Raises InvalidTag for a sealed text the key does
    not open."""
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
    """As `decode_messages`, but reuses messages kept in `kept` under `cid` while the texts are readable,
    and keeps the new ones. Raises as `decode_messages`."""
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
    """Returns a turn read's transcript messages, run record entries and card outcomes of `cid`, in order.
    With the caches `kept` and `rendered`, each body is decoded once per process, up to KEPT_INPUT items;
    a longer list is decoded in one call. Raises as `decode_messages`."""
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
    """Run record entries from their JSON bodies, each decoded by `decode` on first access. With `total`,
    `bodies` are the newest of `total`. The first access to an older one asks `older()` once for all the
    older bodies, oldest first."""

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
