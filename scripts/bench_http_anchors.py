"""The anchors' side of `scripts/bench_http.py` (issue 37, item 3): segments of the demo tour's
real mix, each with its turn read, as ours records them (over HTTP or in-process, through the
client the benchmark gives), as the state row (`../shared/anchors/bench_state_row.py`) and as
LangGraph's `PostgresSaver` (`../shared/anchors/bench_langgraph.py`) do them, driven by
`bench_flat_writes.state_row_segment` and `bench_flat_writes.langgraph_segment`, the code
`scripts/bench_flat.py --sections mix` measures them with. Not a test."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
from bench_flat_lines import started, tour_segments
from bench_flat_writes import langgraph_segment, state_row_segment

from adapters.api import Chatrecord

Send = Callable[[bytes], int]
"""Records one line, returns the events it appended (raises on an error)."""
Read = Callable[[], object]
"""Reads the conversation's next turn."""
Segment = Callable[[], int]
"""One segment of the real mix with its turn read; returns the events of ours it appended."""
Client = Callable[[str], tuple[Send, Read]]
"""Makes the calls of one client (a line's record, the turn read) on a conversation."""


def tour_groups(conversation: str) -> Iterator[list[bytes]]:
    """Yields the demo tour's segments of `conversation`, cycled without end, each the JSON bytes
    of its lines: the unit of bench_flat's mix (`MixWriter.append`)."""
    cycle = 0
    while True:
        for group in tour_segments(conversation, cycle):
            yield [orjson.dumps(line) for line in group]
        cycle += 1


class SegmentCut(Exception):
    """A segment that failed after some of its lines were stored: `appended`, their events, count
    as acknowledged (each line's response said so), so the count of the events stored holds."""

    def __init__(self, appended: int, error: Exception) -> None:
        super().__init__(str(error))
        self.appended = appended


def our_segment(send: Send, read: Read, groups: Iterator[list[bytes]]) -> Segment:
    """A segment's lines, one `send` each, then the turn read."""

    def segment() -> int:
        appended = 0
        try:
            for raw in next(groups):
                appended += send(raw)
            read()
        except Exception as error:
            raise SegmentCut(appended, error) from error
        return appended

    return segment


SEGMENT_WAYS = ("http", "api", "row", "langgraph")
"""The anchors' phases, in their order in odd rounds (reversed in even ones)."""
ANCHOR_TARGETS = (
    ("HTTP segments/s / state row's", "http", "row", 1.0),
    ("HTTP segments/s / LangGraph's", "http", "langgraph", 5.0),
    ("API segments/s / state row's", "api", "row", 1.5),
)
"""The ratios of issue 37, item 3: name, numerator, denominator, target (on PostgreSQL)."""


class Anchors:
    """The clients of the anchors' phases, made once a backend and kept across the rounds, as
    bench_flat's mix keeps its records: ours (a conversation a client and way, filled with
    `fill` segments of the tour in-process first), the state row's (a connection and a row a
    client, reset to 200 entries) and LangGraph's (a saver and a thread a client, filled with
    200 segments); grown to the largest client count asked, a phase of n clients takes the
    first n."""

    def __init__(self, chatrecord: Chatrecord, fill: int) -> None:
        import bench_state_row
        import common

        self.rows_module, self.common = bench_state_row, common
        self.chatrecord, self.fill, self.tag = chatrecord, fill, uuid.uuid4().hex[:8]
        self.ours: dict[str, list[tuple[str, Iterator[list[bytes]]]]] = {"http": [], "api": []}
        self.rows: list[Segment] = []
        self.row_ids: list[str] = []
        self.graphs: list[Segment] | None = []
        self.closers: list[Callable[[], object]] = []
        self.acked = 0
        self.written: list[str] = []
        self.connection = common.connect()

    def segments(self, way: str, n: int, client: Client) -> list[Segment] | None:
        """The n clients' segments of phase `way`, ours through `client` (None: LangGraph is
        not installed)."""
        if way in self.ours:
            pool = self.ours[way]
            while len(pool) < n:
                pool.append(self._our_conversation(f"bench-{way}-seg-{self.tag}-{len(pool)}"))
            return [our_segment(*client(conversation), groups) for conversation, groups in pool[:n]]
        if way == "row":
            while len(self.rows) < n:
                cid = f"bench-http-row-{self.tag}-{len(self.rows)}"
                connection = self.common.connect()
                self.closers.append(connection.close)
                self.rows_module.reset_conversation(connection, cid)
                self.row_ids.append(cid)
                self.rows.append(anchor_segment(state_row_segment(connection, cid)))
            return self.rows[:n]
        while self.graphs is not None and len(self.graphs) < n:
            made = langgraph_segment(self.common.DSN)
            if made is None:
                print("  LangGraph is not installed (pip install -e '.[bench]'): its phases are left out", flush=True)
                self.graphs = None
                break
            self.closers.append(made[1])
            self.graphs.append(anchor_segment(made[0]))
        return None if self.graphs is None else self.graphs[:n]

    def _our_conversation(self, conversation: str) -> tuple[str, Iterator[list[bytes]]]:
        groups = tour_groups(conversation)
        lines = [orjson.dumps(started(conversation))] + [raw for _ in range(self.fill) for raw in next(groups)]
        self.acked += self.chatrecord.record_lines(lines, "bench-fill").appended
        self.written.append(conversation)
        return conversation, groups

    def close(self) -> None:
        for close in self.closers:
            close()
        if self.row_ids:
            self.connection.execute("DELETE FROM chat_conversation WHERE id = ANY(%s)", (self.row_ids,))
        self.connection.close()


def anchor_segment(segment: Callable[[int], object]) -> Segment:
    """An anchor's segment (`bench_flat_writes`' form, called with a number) as a Segment: it
    appends none of our events."""

    def call() -> int:
        segment(0)
        return 0

    return call
