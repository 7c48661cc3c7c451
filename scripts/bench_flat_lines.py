"""The input lines of the benchmarks (`scripts/bench_flat.py` and its sections,
bench_timeline.py, bench_turn_input.py): the demo tour's segments, a conversation's lines,
`Writer` (a segment's lines and the read after), `MixWriter` (the demo tour's real mix) and
`bulk_fill` (a long conversation stored fast). Not a test."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = next((p for p in (ROOT.parent / "shared" / "anchors", Path("/work/shared/anchors")) if p.exists()), None)
sys.path.insert(0, str(ROOT))
if ANCHORS is not None:
    sys.path.insert(0, str(ANCHORS))

import orjson  # noqa: E402

from adapters.api import Chatrecord  # noqa: E402
from adapters.ingest import parse_line  # noqa: E402
from adapters.service.line_commands import decide  # noqa: E402
from adapters.store.application import ConversationStore  # noqa: E402
from domain.conversation import MemoryHistory, project_conversation  # noqa: E402

FIXTURE = next(
    p
    for p in (
        ROOT.parent / "shared" / "fixtures" / "demo_seo_tour.jsonl",
        Path("/work/shared/fixtures/demo_seo_tour.jsonl"),
        ROOT / "tests" / "data" / "demo_seo_tour.jsonl",
    )
    if p.exists()
)
AT = "2026-10-28T09:00:00Z"


def _demo_segments() -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line]
    return [d for d in lines if d["type"] == "segment_returned"]


DEMO = _demo_segments()


def started(conv: str) -> dict[str, Any]:
    return {"type": "conversation_started", "at": AT, "kind": "chat", "owner": 7, "conversation": conv}


def segment_lines(conv: str, message: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two lines of segment `message` (1-based): the user message that starts a turn and
    the turn's one segment, completed, with the steps of the tour's segment `message` (cycled)."""
    seg = dict(DEMO[(message - 1) % len(DEMO)])
    seg.pop("pending", None)
    seg.update(
        segment=f"{conv}-run{message}/1", run=f"{conv}-run{message}", trigger="turn", outcome="completed", conversation=conv
    )
    user = {
        "type": "user_message",
        "at": AT,
        "message": message,
        "text": f"Weiter mit Schritt {message}",
        "page": 42,
        "skill": None,
        "conversation": conv,
    }
    return user, seg


class Writer:
    """Appends segments to one conversation through the Python API, starting it if needed."""

    def __init__(self, chat: Chatrecord, conv: str) -> None:
        self.chat, self.conv = chat, conv
        state = chat.store.get(conv)
        if state is None:
            chat.record(started(conv))
        self.message = state.last_message if state is not None else 0

    def append(self) -> None:
        self.message += 1
        for line in segment_lines(self.conv, self.message):
            self.chat.record(line)

    def read(self) -> Any:
        reader = getattr(self.chat, "turn_notes", None) or self.chat.read_models.turn_notes
        return reader(self.conv)

    def append_and_read(self) -> Any:
        self.append()
        return self.read()


TOUR = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line][1:-1]
"""The demo tour's lines after `conversation_started` and before the question asked three
days later: a user message, a question and its answer, six cards decided one after the
other, the tour's end; 17 lines, 8 of them segments."""


def tour_segments(conv: str, cycle: int) -> list[list[dict[str, Any]]]:
    """The lines of cycle `cycle` (0-based) of the demo tour in conversation `conv`, grouped
    by segment: each group the lines up to and including a `segment_returned` (the last also
    the tour's end), 2.125 lines a segment. Fresh segment and run ids, message numbers going
    on (two per cycle), times an hour per cycle later."""
    run = f"{conv}-tour{cycle}"
    shift = timedelta(hours=cycle)
    groups: list[list[dict[str, Any]]] = [[]]
    for line in TOUR:
        line = dict(line, conversation=conv)
        line["at"] = (datetime.fromisoformat(line["at"].replace("Z", "+00:00")) + shift).isoformat().replace("+00:00", "Z")
        if "segment" in line:
            line["segment"] = f"{run}/{line['segment'].rsplit('/', 1)[1]}"
        if "run" in line:
            line["run"] = run
        if "message" in line:
            line["message"] = 2 * cycle + line["message"]
        if line["type"] == "tour_ended" and groups[-1] == []:
            groups[-2].append(line)
            continue
        groups[-1].append(line)
        if line["type"] == "segment_returned":
            groups.append([])
    return [g for g in groups if g]


class MixWriter:
    """Appends the demo tour's segments, cycled, to one conversation through the Python API
    (`record`, line by line), starting it if needed: the chat's real mix of lines."""

    def __init__(self, chat: Chatrecord, conv: str) -> None:
        self.chat, self.conv = chat, conv
        if chat.store.get(conv) is None:
            chat.record(started(conv))
        self.segments = 0
        self.lines = 0
        self._queue: list[list[dict[str, Any]]] = []

    def append(self) -> None:
        if not self._queue:
            self._queue = tour_segments(self.conv, self.segments // 8)
        group = self._queue.pop(0)
        for line in group:
            self.chat.record(line)
        self.segments += 1
        self.lines += len(group)

    def read(self) -> Any:
        reader = getattr(self.chat, "turn_notes", None) or self.chat.read_models.turn_notes
        return reader(self.conv)

    def append_and_read(self) -> Any:
        self.append()
        return self.read()


def bulk_fill(store: ConversationStore, conv: str, segments: int, chunk: int = 1000) -> int:
    """Decides `segments` segments of a new conversation in memory and saves them `chunk` events
    per save (no read models applied); returns the events saved."""
    state, batch, saved, n = None, [], 0, 0
    history = MemoryHistory()
    lines = [started(conv)] + [line for m in range(1, segments + 1) for line in segment_lines(conv, m)]
    for line in lines:
        n += 1
        events = decide(parse_line(orjson.dumps(line), n, "bulk"), state, history)
        history.record(state, events)
        state = project_conversation(state, events)
        batch.extend(events)
        if len(batch) >= chunk:
            store.save(*batch)
            saved, batch = saved + len(batch), []
    if batch:
        store.save(*batch)
        saved += len(batch)
    return saved
