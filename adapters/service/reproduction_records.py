"""A conversation's reproductions as records of the export. `records` writes each kept stream as one
reproduction record (`adapters.ingest.reproduction_line`), texts opened (`[erased]` once erased).
`store_record` keeps a record `chatrecord ingest` read back as a stream under its own id, sealed with the
data key there, its hash chain made anew."""

from __future__ import annotations

from typing import Any

from adapters.ingest.reproduction_line import REPRODUCTION, ReproductionLine
from adapters.service.data_keys import data_keys
from adapters.service.reproduce import ConversationErased, Reproduction, reproduction_rows, reproductions
from adapters.store.application import ConversationStore
from adapters.store.reproductions import ANSWER, GENESIS, STARTED, ReproductionRow, StreamConflict, new_row, seal_answer
from domain.errors import ChatrecordError
from domain.events import conversation_uuid


class ReproductionTooEarly(ChatrecordError):
    """Raised when a reproduction record names a conversation the store does not hold yet."""


def record_of(done: Reproduction) -> dict[str, Any]:
    """Returns the reproduction record of a kept stream: its first event's facts, its id and its answers
    with their opened texts."""
    return {
        "type": REPRODUCTION,
        "conversation": done.conversation,
        "at": done.started_at,
        "reproduction": done.id,
        "place": done.place,
        "rules": done.rules,
        "message": done.message,
        "log_version": done.log_version,
        "model": done.model,
        "url": done.url,
        "parameters": done.parameters,
        "input_sha256": done.input_sha256,
        "writes": done.writes.to_json(),
        "answers": [
            {
                "at": answer.at,
                "text": answer.text,
                "latency_ms": answer.latency_ms,
                "usage": answer.usage,
                "finish_reason": answer.finish_reason,
                "verdict": answer.verdict.to_json(),
                "judged": answer.judged.to_json() if answer.judged is not None else None,
            }
            for answer in done.answers
        ],
    }


def records(
    store: ConversationStore, conversation: str, upto: int | None = None
) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """Returns the records of `conversation`'s kept streams in start order, only turns up to user message
    `upto` if given. Also where the first broken stream breaks ("reproduction ID at N"), else None."""
    kept = [done for done in reproductions(store, conversation) if upto is None or done.message <= upto]
    broken = next(
        (f"reproduction {done.id} at {done.chain_broken_at}" for done in kept if done.chain_broken_at is not None), None
    )
    return tuple(record_of(done) for done in kept), broken


def store_record(store: ConversationStore, record: ReproductionLine) -> bool:
    """Keeps `record` as a reproduction stream, all its events in one transaction. Returns False, storing
    nothing, where a stream of its id is kept. Raises ReproductionTooEarly when the store does not hold
    its conversation. Raises ConversationErased when that conversation was erased."""
    cid = conversation_uuid(record.conversation)
    if next(store.events.get(cid, desc=True, limit=1), None) is None:
        raise ReproductionTooEarly(
            f"reproduction {record.reproduction} is of conversation {record.conversation!r}, which the store does not hold; "
            "ingest the conversation's lines before it (export writes them first)"
        )
    key = data_keys(store).key(cid, create=True)
    if key is None:
        raise ConversationErased(f"conversation {record.conversation!r} was erased: no answer to it can be kept")
    rows = reproduction_rows(store)
    if any(row.reproduction == record.reproduction for row in rows.of_conversation(str(cid))):
        return False
    made: list[ReproductionRow] = [new_row(record.reproduction, 0, str(cid), STARTED, record.started(), GENESIS)]
    for seq, answer in enumerate(record.answers, start=1):
        fields = answer.model_dump(exclude={"text"}, mode="json")
        fields["text"] = seal_answer(key, record.reproduction, seq, answer.text)
        made.append(new_row(record.reproduction, seq, str(cid), ANSWER, fields, made[-1].hash))
    try:
        rows.append(*made)
    except StreamConflict:  # another ingest of the same record stored it meanwhile
        return False
    return True
