"""What a writer knows of a conversation's history index (`adapters.store.known_records.IndexRecordsCache`)
after its own appends: the rows an append put are taken as the index's."""

from __future__ import annotations

from types import SimpleNamespace
from uuid import uuid4

from adapters.store.known_records import IndexRecordsCache
from domain.history_index import SegmentRecord


def record(segment: str, version: int, message: int, settled: bool = False) -> SegmentRecord:
    return SegmentRecord(segment=segment, version=version, run="run", message=message, guided=True, settled=settled)


def test_the_rows_an_append_put_are_known_at_its_last_version_with_those_known_before() -> None:
    known, cid = IndexRecordsCache(), uuid4()
    event = SimpleNamespace(originator_version=3)
    known.appended(cid, None, [SimpleNamespace(originator_version=1), event], ({"s/1": record("s/1", 2, 1)}, {1: True}))  # type: ignore[list-item]

    records, messages, floor = known.at(cid, 3)
    assert (records, messages, floor) == ({"s/1": record("s/1", 2, 1)}, {1: True}, 0)  # from the start: every row

    settled = record("s/1", 2, 1, settled=True)
    later = SimpleNamespace(originator_version=4)
    known.appended(cid, SimpleNamespace(version=3), [later], ({"s/1": settled}, {}))  # type: ignore[list-item]

    assert known.at(cid, 4) == ({"s/1": settled}, {1: True}, 0)
    assert known.at(cid, 3) == ({}, {}, None)  # only the version it stands at


def test_rows_put_onto_a_version_it_did_not_keep_are_known_alone_and_not_as_every_row() -> None:
    known, cid = IndexRecordsCache(), uuid4()
    known.appended(cid, SimpleNamespace(version=7), [SimpleNamespace(originator_version=8)], ({"s/4": record("s/4", 8, 4)}, {}))  # type: ignore[list-item]

    assert known.at(cid, 8) == ({"s/4": record("s/4", 8, 4)}, {}, None)
