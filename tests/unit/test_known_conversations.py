"""What a writer keeps of each conversation between its commands
(`adapters.store.known_conversations.KnownConversations`): the index's counts and newest rows as
its last append left them, all dropped, with the other keepers' state, by one `forget`."""

from __future__ import annotations

from types import SimpleNamespace
from uuid import UUID, uuid4

from adapters.store.known_conversations import KnownConversations
from domain.history_index import SegmentRecord

RECORD = SegmentRecord(segment="s/1", version=2, run="run", message=1, guided=True)
APPEND = [SimpleNamespace(originator_version=1), SimpleNamespace(originator_version=2)]


def test_an_append_is_known_by_its_counts_and_rows_until_the_conversation_is_forgotten() -> None:
    forgotten: list[tuple[str, UUID]] = []
    known = KnownConversations(
        forgets=[lambda cid: forgotten.append(("heads", cid)), lambda cid: forgotten.append(("views", cid))]
    )
    cid, other = uuid4(), uuid4()
    known.appended(cid, None, APPEND, (2, 1), ({"s/1": RECORD}, {1: True}))  # type: ignore[arg-type]
    known.appended(other, None, APPEND, (2, 0), ({}, {1: True}))  # type: ignore[arg-type]

    assert known.counts(cid) == (2, 1)
    assert known.records.at(cid, 2) == ({"s/1": RECORD}, {1: True}, 0)

    known.forget(cid)

    assert known.counts(cid) is None
    assert known.records.at(cid, 2) == ({}, {}, None)
    assert forgotten == [("heads", cid), ("views", cid)]  # the other keepers' state too, in order
    assert known.counts(other) == (2, 0) and known.records.at(other, 2) == ({}, {1: True}, 0)  # the others stay


def test_a_counted_append_keeps_its_counts_and_drops_the_rows_it_did_not_follow() -> None:
    known, cid = KnownConversations(), uuid4()
    known.appended(cid, None, APPEND, (2, 1), ({"s/1": RECORD}, {}))  # type: ignore[arg-type]

    known.counted(cid, (5, 3))

    assert known.counts(cid) == (5, 3)
    assert known.records.at(cid, 2) == ({}, {}, None)


def test_the_least_recently_used_conversation_goes_first() -> None:
    known = KnownConversations(size=2)
    first, second, third = uuid4(), uuid4(), uuid4()
    for number, cid in enumerate((first, second), start=1):
        known.counted(cid, (number, 0))
    known.counts(first)  # used: second is now the oldest

    known.counted(third, (3, 0))

    assert known.counts(second) is None
    assert (known.counts(first), known.counts(third)) == ((1, 0), (3, 0))
