"""The unit `scripts/bench_http.py` compares with the anchors (issue 37, item 3): a segment of the
demo tour's real mix with its turn read, as `scripts/bench_flat.py --sections mix` counts it
(`MixWriter.append_and_read`). Ours in the anchors' phases (`bench_http_anchors.our_segment` over
`tour_groups`) must send the same lines, segment by segment, read the turn once a segment, and
store the same events as bench_flat's mix. On the memory store: the scripts' input, not storage,
is what is checked here."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from bench_flat_lines import MixWriter, started, tour_segments
from bench_http_anchors import our_segment, tour_groups

from adapters.api import Chatrecord
from adapters.bootstrap import open_store

CONV = "bench-unit"
SEGMENTS = 16  # two whole tours


def test_a_segment_of_the_anchors_phases_is_a_segment_of_bench_flats_mix() -> None:
    ours, flat = Chatrecord(open_store(memory=True)), Chatrecord(open_store(memory=True))
    ours.record(started(CONV))
    sent: list[list[bytes]] = [[]]
    reads: list[object] = []

    def send(raw: bytes) -> int:
        sent[-1].append(raw)
        return ours.record_lines([raw], "bench").appended

    def read() -> object:
        reads.append(ours.turn_notes(CONV))
        sent.append([])
        return reads[-1]

    segment = our_segment(send, read, tour_groups(CONV))
    appended = sum(segment() for _ in range(SEGMENTS))

    mix = MixWriter(flat, CONV)
    for _ in range(SEGMENTS):
        mix.append_and_read()

    expected = [[orjson.dumps(line) for line in group] for cycle in (0, 1) for group in tour_segments(CONV, cycle)]
    assert sent[:-1] == expected
    assert [len(group) for group in expected[:8]] == [2, 2, 2, 2, 2, 2, 2, 3]  # 17 lines in 8 segments
    assert len(reads) == SEGMENTS == mix.segments
    assert sum(map(len, expected)) == 34 == mix.lines
    stored, flat_stored = ours.store.events(CONV), flat.store.events(CONV)
    assert appended == len(stored) - 1  # conversation_started before the clock
    assert [type(e).__name__ for e in stored] == [type(e).__name__ for e in flat_stored]
    assert ours.turn_notes(CONV) == flat.turn_notes(CONV)
