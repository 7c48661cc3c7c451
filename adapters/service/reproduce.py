"""Reproduce: send a recorded turn to a model again under rule sets, keep the answers, count what they say.

Each rule set's input is the turn's `messages` byte for byte as `replay --at N --json` shows them. It is
sent `n` times to an OpenAI-compatible chat-completions endpoint (`CHATRECORD_MODEL_URL`,
`CHATRECORD_MODEL`, key from `CHATRECORD_MODEL_KEY` or `OPENAI_API_KEY`). At most `concurrency` requests
run at once, each with a timeout. The client retries 408, 409, 429, 5xx, timeouts and broken connections
(`max_retries`).

Each complete answer is appended to its rule set's reproduction stream, sealed with the data key, with
the judge's verdict (`projections.answer_judge`) and rubric id. A stream starts with its first answer: a
refused run stores nothing; a broken-off run keeps its complete answers. After the first fault no
further request is sent; an answer under way that comes back whole is kept. The conversation's own log
is never written."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from adapters.backends import backend_of
from adapters.service.data_keys import data_keys
from adapters.service.model_endpoint import (
    MODEL_URL,
    ModelNotSet,
    ModelSettings,
    ask,
    model_error,
    shown_url,
)
from adapters.service.replay import Replay
from adapters.store.application import ConversationStore
from adapters.store.reproductions import (
    ANSWER,
    GENESIS,
    STARTED,
    ReproductionRow,
    ReproductionRows,
    new_row,
    open_answer,
    seal_answer,
    verify_rows,
)
from domain.errors import ChatrecordError, UnknownConversation, shown_id
from domain.events import conversation_uuid
from projections.answer_judge import RUBRIC, Verdict, Writes, judge_messages, read_model_verdict, writes_of
from projections.answer_judge import judge as rules_judge
from projections.turn import iso

if TYPE_CHECKING:  # openai is imported by the calls that use it: every command imports this module
    import openai

TRANSCRIPT_ONLY = "transcript-only"
DEFAULT_ANSWERS = 5
MOST_ANSWERS = 100


class ConversationErased(ChatrecordError):
    """Raised when a reproduction is asked of an erased conversation; its data key is deleted."""


class ModelUnusable(ChatrecordError):
    """Raised, in one line, when the model endpoint does not answer, refuses the key, does not know the
    model, or answers with no chat completion. Complete answers before it are kept (`recorded`)."""

    def __init__(self, message: str, recorded: int = 0) -> None:
        super().__init__(message)
        self.recorded = recorded


@dataclass(frozen=True)
class Answer:
    """One answer as kept: its text (ERASED once the conversation was erased), usage, latency
    and the judge's verdict."""

    seq: int
    text: str
    latency_ms: int
    usage: dict[str, Any]
    finish_reason: str | None
    verdict: Verdict
    at: str
    judged: Verdict | None = None
    """The judging model's verdict (MODEL_RUBRIC), where a judge model was asked; it is the one counted."""

    @property
    def cut_off(self) -> bool:
        """Whether the endpoint stopped the answer at its token limit (`finish_reason` "length"): the
        answer is kept and judged as it came, and the table counts it apart."""
        return self.finish_reason == "length"

    @property
    def counted(self) -> Verdict:
        """The verdict the table counts: the judging model's where there is one, else the rules'."""
        return self.judged or self.verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "text": self.text,
            "latency_ms": self.latency_ms,
            "usage": self.usage,
            "finish_reason": self.finish_reason,
            "verdict": self.verdict.to_json(),
            "judged": self.judged.to_json() if self.judged is not None else None,
        }


@dataclass(frozen=True)
class Reproduction:
    """One reproduction stream: a turn sent under one rule set, with the answers kept."""

    id: str
    conversation: str
    rules: str
    message: int
    log_version: int
    model: str
    url: str
    parameters: dict[str, Any]
    input_sha256: str
    started_at: str
    place: int
    """Its place among the rule sets of its run (the table keeps their order)."""
    writes: Writes
    answers: tuple[Answer, ...] = ()
    chain_broken_at: int | None = None

    @property
    def denials(self) -> int:
        return sum(answer.counted.denies for answer in self.answers)

    @property
    def naming_writes(self) -> int:
        return sum(answer.counted.names_writes for answer in self.answers)

    @property
    def cut_off(self) -> int:
        return sum(answer.cut_off for answer in self.answers)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversation": self.conversation,
            "rules": self.rules,
            "message": self.message,
            "log_version": self.log_version,
            "model": self.model,
            "url": self.url,
            "parameters": self.parameters,
            "input_sha256": self.input_sha256,
            "started_at": self.started_at,
            "writes": self.writes.to_json(),
            "answers": [answer.to_json() for answer in self.answers],
            "denials": self.denials,
            "naming_writes": self.naming_writes,
            "cut_off": self.cut_off,
            "chain_ok": self.chain_broken_at is None,
        }


@dataclass(frozen=True)
class Report:
    """The table of a run or of the kept reproductions: per rule set, answers, denials, and answers naming
    the writes."""

    conversation: str
    reproductions: tuple[Reproduction, ...]

    def rows(self) -> list[dict[str, Any]]:
        """Returns one row per rule set, in the order the rule sets were asked for."""
        table: dict[str, dict[str, Any]] = {}
        for done in self.reproductions:
            row = table.setdefault(
                done.rules,
                {"rules": done.rules, "message": done.message, "answers": 0, "denials": 0, "naming_writes": 0, "cut_off": 0},
            )
            row["answers"] += len(done.answers)
            row["denials"] += done.denials
            row["naming_writes"] += done.naming_writes
            row["cut_off"] += done.cut_off
        return list(table.values())

    def sentence(self) -> str:
        """Returns the count in the spec's form: "2 of 5 answers deny the saves under transcript-only; 0 of
        5 under 2026-11-02", each rule set's answers cut off at the token limit named after it."""
        parts = [
            f"{r['denials']} of {r['answers']}"
            + (" answers deny the saves" if i == 0 else "")
            + f" under {r['rules']}"
            + (f" ({r['cut_off']} cut off at the token limit)" if r["cut_off"] else "")
            for i, r in enumerate(self.rows())
        ]
        return "; ".join(parts) if parts else "no answers"

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "rubric": next((a.counted.rubric for done in self.reproductions for a in done.answers), RUBRIC),
            "table": self.rows(),
            "summary": self.sentence(),
            "reproductions": [done.to_json() for done in self.reproductions],
        }


def input_bytes(turn: dict[str, Any]) -> bytes:
    """Returns the bytes of a turn's model input as `replay --json` prints its `messages`."""
    return orjson.dumps(turn["messages"])


class _Stream:
    """One reproduction being recorded: its first event goes with its first answer."""

    def __init__(self, rows: ReproductionRows, started: dict[str, Any], key: bytes, cid: str) -> None:
        self.rows, self.started, self.key, self.cid = rows, started, key, cid
        self.id = str(uuid.uuid4())
        self.previous: str | None = None
        self.seq = 0

    def record(self, fields: dict[str, Any], text: str) -> int:
        """Appends one complete answer, with the stream's first event before its first, in one transaction."""
        first = [new_row(self.id, 0, self.cid, STARTED, self.started, GENESIS)] if self.previous is None else []
        previous = first[0].hash if first else self.previous
        assert previous is not None
        seq = self.seq + 1
        sealed = seal_answer(self.key, self.id, seq, text)
        row = new_row(self.id, seq, self.cid, ANSWER, {**fields, "text": sealed}, previous)
        self.rows.append(*first, row)
        self.seq, self.previous = seq, row.hash
        return seq


def reproduction_rows(store: ConversationStore, *, create: bool = True) -> ReproductionRows:
    """Returns the store's reproduction streams, making their table where missing. With `create=False`, a
    store without the table holds none."""
    rows = backend_of(store.factory).reproduction_rows(store.recorder)
    if create:
        rows.create()
    return rows


def reproduce(
    store: ConversationStore,
    replay: Callable[[str, int | None], Replay],
    conversation: str,
    rule_sets: Sequence[str],
    *,
    turn: int | None = None,
    n: int = DEFAULT_ANSWERS,
    model: ModelSettings | None = None,
    judge: str | None = None,
    client: openai.OpenAI | None = None,
) -> Report:
    """Sends the turn of user message `turn` (default: latest) under each of `rule_sets` `n` times to
    `model`, and records every complete answer.

    `model` defaults to `ModelSettings.from_env`, with `judge` as its judging model. `replay(rule_set,
    at)` is the replay use case. Raises ModelNotSet, UnknownConversation, TurnNotFound, UnknownRuleSet,
    ConversationErased for an erased conversation, and ModelUnusable for a failing endpoint, after
    keeping the complete answers."""
    import openai  # here: only reproduce loads it

    if not 1 <= n <= MOST_ANSWERS:
        raise ValueError(f"-n must be between 1 and {MOST_ANSWERS}")
    settings = model or ModelSettings.from_env(judge=judge)
    parts = urlsplit(settings.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelNotSet(
            f"{MODEL_URL} {shown_url(settings.url)!r} is not an http:// or https:// URL; set it to the endpoint's "
            "base URL, e.g. http://127.0.0.1:8000/v1"
        )
    inputs: list[tuple[str, dict[str, Any], int, str]] = []
    for rules in dict.fromkeys(rule_sets):
        done = replay(rules, turn)
        if turn is None:
            turn = done.turns[-1].message
            done = replay(rules, turn)  # the turns of that message: the latest is the one sent
        inputs.append((done.rules, done.turns[-1].to_json(), done.turns[-1].message, done.conversation))
    name = inputs[0][3]
    cid = conversation_uuid(name)
    key = data_keys(store).key(cid, create=False)
    if key is None:
        raise ConversationErased(f"conversation {name!r} was erased: no answer to it can be kept")
    log_version = next(store.events.get(cid, desc=True, limit=1)).originator_version
    rows = reproduction_rows(store)
    now = iso(datetime.now(UTC))
    streams = []
    for place, (rules, shown, message, _) in enumerate(inputs):
        started = {
            "place": place,
            "conversation": name,
            "rules": rules,
            "message": message,
            "log_version": log_version,
            "model": settings.model,
            "url": shown_url(settings.url),
            "parameters": settings.parameters(),
            "input_sha256": hashlib.sha256(input_bytes(shown)).hexdigest(),
            "writes": writes_of(shown["record"], shown["card_outcomes"]).to_json(),
            "at": now,
        }
        streams.append((_Stream(rows, started, key, str(cid)), shown))
    client = client or openai.OpenAI(
        base_url=settings.url, api_key=settings.key or "none", timeout=settings.timeout, max_retries=settings.retries
    )
    lock = threading.Lock()
    recorded = [0]
    stopped = threading.Event()  # set by the first fault: a request not sent yet is not sent

    def one(stream: _Stream, shown: dict[str, Any]) -> None:
        if stopped.is_set():
            return
        try:
            answered(stream, shown)
        except BaseException:
            stopped.set()
            raise

    def answered(stream: _Stream, shown: dict[str, Any]) -> None:
        text, usage, finish, latency = ask(client, settings, shown["messages"])
        writes = Writes(tuple(stream.started["writes"]["records"]), tuple(stream.started["writes"]["fields"]))
        verdict = rules_judge(text, writes)
        judged = None
        if settings.judge is not None:
            reply = ask(client, replace(settings, model=settings.judge, temperature=0.0), judge_messages(text, writes))[0]
            judged = read_model_verdict(reply, settings.judge)
            if judged is None:
                raise ValueError(f"the judge model {settings.judge!r} answered no verdict in the rubric's JSON")
        fields = {
            "judged": judged.to_json() if judged is not None else None,
            "usage": usage,
            "latency_ms": latency,
            "finish_reason": finish,
            "verdict": verdict.to_json(),
            "at": iso(datetime.now(UTC)),
        }
        with lock:
            stream.record(fields, text)
            recorded[0] += 1

    jobs = [(stream, shown) for stream, shown in streams for _ in range(n)]
    with ThreadPoolExecutor(max_workers=max(1, min(settings.concurrency, len(jobs))), thread_name_prefix="reproduce") as pool:
        futures: list[Future[None]] = [pool.submit(one, stream, shown) for stream, shown in jobs]
        wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f.exception() for f in futures if f.done() and f.exception() is not None), None)
        if failed is not None:
            for future in futures:
                future.cancel()
    if failed is not None:
        if isinstance(failed, ChatrecordError):
            raise failed
        if not isinstance(failed, (openai.OpenAIError, ValueError)):
            raise failed
        kept = {0: "; no answer was kept", 1: "; 1 complete answer was kept"}.get(
            recorded[0], f"; {recorded[0]} complete answers were kept"
        )
        raise ModelUnusable(model_error(failed, settings) + kept, recorded[0])
    ids = {stream.id for stream, _ in streams}
    return Report(name, tuple(r for r in reproductions(store, name) if r.id in ids))


def reproductions(store: ConversationStore, conversation: str) -> list[Reproduction]:
    """Returns the kept reproductions of `conversation` in start order, texts opened (ERASED once erased)."""
    cid = conversation_uuid(conversation)
    rows = reproduction_rows(store, create=False).of_conversation(str(cid))
    if not rows and next(store.events.get(cid, desc=True, limit=1), None) is None:
        raise UnknownConversation(f"no conversation {shown_id(conversation, 'repr')} in the store; check the id")
    streams: dict[str, list[ReproductionRow]] = {}
    for row in rows:
        streams.setdefault(row.reproduction, []).append(row)
    key = store.data_keys.key(cid, create=False) if store.data_keys is not None else None
    found = []
    for rid, stream in streams.items():
        broken = verify_rows(stream)
        first = stream[0].fields
        answers = []
        for row in stream[1:]:
            fields = row.fields
            verdict = fields["verdict"]
            answers.append(
                Answer(
                    row.seq,
                    open_answer(key, rid, row.seq, fields["text"]),
                    fields["latency_ms"],
                    fields["usage"],
                    fields["finish_reason"],
                    verdict_of(verdict) or Verdict(False, False),
                    fields["at"],
                    verdict_of(fields.get("judged")),
                )
            )
        writes = Writes(tuple(first["writes"]["records"]), tuple(first["writes"]["fields"]))
        found.append(
            Reproduction(
                rid,
                first["conversation"],
                first["rules"],
                first["message"],
                first["log_version"],
                first["model"],
                first["url"],
                first["parameters"],
                first["input_sha256"],
                first["at"],
                first.get("place", 0),
                writes,
                tuple(answers),
                broken,
            )
        )
    found.sort(key=lambda r: (r.started_at, r.place))
    return found


@dataclass(frozen=True)
class StreamChains:
    """The hash chains of one conversation's reproductions: the stream count and the `seq` of each broken
    stream's first bad link, by reproduction id."""

    conversation: str
    streams: int
    broken: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.broken

    def line(self) -> str:
        """Returns the line `chatrecord verify` prints."""
        counted = f"reproductions of {self.conversation}: {self.streams} stream{'' if self.streams == 1 else 's'}"
        if self.ok:
            return f"{counted}, ok"
        return f"{counted}, broken: " + ", ".join(f"{rid} at {seq}" for rid, seq in self.broken.items())

    def to_json(self) -> dict[str, Any]:
        return {"reproductions_of": self.conversation, "streams": self.streams, "ok": self.ok, "broken": self.broken}


def stream_chains(store: ConversationStore, conversation: str) -> StreamChains:
    """Recomputes the hash chain of each reproduction of `conversation` (no text is opened)."""
    streams: dict[str, list[ReproductionRow]] = {}
    for row in reproduction_rows(store, create=False).of_conversation(str(conversation_uuid(conversation))):
        streams.setdefault(row.reproduction, []).append(row)
    broken = {rid: seq for rid, rows in streams.items() if (seq := verify_rows(rows)) is not None}
    return StreamChains(conversation, len(streams), broken)


def verdict_of(kept: dict[str, Any] | None) -> Verdict | None:
    """Returns the verdict an answer's event keeps, None where it keeps none."""
    if kept is None:
        return None
    return Verdict(kept["denies"], kept["names_writes"], kept["rubric"], kept["judge"], kept["reason"])


def default_rule_sets(active: str) -> list[str]:
    """Returns the default rule sets of a reproduction: `transcript-only` and the store's, in the spec's
    order."""
    return list(dict.fromkeys([TRANSCRIPT_ONLY, active]))
