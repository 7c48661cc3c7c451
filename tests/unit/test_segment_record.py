"""The history index's record of a segment (`domain.history_index.SegmentRecord`) and what the
state keeps of the waiting one (`domain.segments.SegmentInfo`) are two values with two jobs; the
record starts with the info's fields, in its order, so a row's JSON reads as it always did."""

from __future__ import annotations

from domain.history_index import LayeredHistory, MemoryHistory, SegmentRecord
from domain.segments import SegmentInfo


def test_a_record_starts_with_the_fields_of_the_info_in_their_order() -> None:
    info = SegmentInfo.model_fields
    record = SegmentRecord.model_fields
    assert list(record)[: len(info)] == list(info) == ["version", "run", "message", "guided", "waits", "calls"]
    assert [(f.annotation, f.default) for f in record.values()][: len(info)] == [(f.annotation, f.default) for f in info.values()]


def test_a_records_json_is_the_rows_body() -> None:
    record = SegmentRecord(segment="r/1", version=3, run="r", message=1, guided=True, waits="card", calls=2)

    assert record.model_dump_json() == (
        '{"version":3,"run":"r","message":1,"guided":true,"waits":"card","calls":2,'
        '"segment":"r/1","settled":false,"undecided":null,"outcomes":0,"cut":false}'
    )
    assert SegmentRecord.model_validate_json(record.model_dump_json()) == record


def test_a_layered_history_reads_a_lines_first_version_through_its_base_unless_told_not_to() -> None:
    base = MemoryHistory()
    base.put_source("d", 2)
    batch, append = LayeredHistory(base), LayeredHistory(base, read_sources=False)
    for layered in (batch, append):
        layered.put_source("d", 5)
        layered.set_version(5)

    assert batch.top.sources["d"] == (2, 5) and append.top.sources["d"] == (5, 5)
    assert batch.version == append.version == 5 and base.sources["d"] == (2, 2)
