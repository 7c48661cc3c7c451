"""A failover that loses nothing (issue 24, items 3 and 4): writers append through a multi-host
CHATRECORD_DATABASE_URL (`target_session_attrs=read-write`) to a primary with a synchronous
standby; the primary is killed with SIGKILL mid-stream, the standby promoted, the writers go on
(`scripts/failover_drill.py`'s `drill`, with small counts). Every line acked before the kill is
on the new primary, none twice, the chains verify and the read models are the fold of the log.
With no server left, a write ends with PrimaryGone, saying so. The servers are this test's own;
a missing initdb fails, never skips."""

from __future__ import annotations

import pytest

from adapters.api import Chatrecord
from adapters.bootstrap import open_store
from adapters.store.write_retry import PrimaryGone
from scripts.failover_drill import drill, segment
from tests.pg_servers import kill, start_replicated


def test_a_killed_primary_loses_no_acknowledged_line_and_writers_go_on_after_promotion() -> None:
    pair = start_replicated(synchronous=True)
    try:
        Chatrecord(open_store({"CHATRECORD_DATABASE_URL": pair.url})).close()  # the store's tables
        report = drill(pair, writers=3, lines=12, kill_after=12, promote_after=1.5, connect_timeout=1, hold=True)

        assert 12 <= report.acked_before_kill < 36  # lines written across the kill (`hold`)
        assert report.acked == 36  # every writer's every line, most of them after the promotion
        assert (report.lost, report.doubled) == (0, 0)
        assert sorted(report.stored.values()) == [1] * 36
        assert (report.chains_ok, report.rows_ok, report.diff) == (True, True, [])
        assert [w.errors for w in report.writers] == [[], [], []]  # the store tried again, no one saw an error
        # lines were acked by the promoted standby: the writers' connections to the killed primary
        # were given up (by the store's `reconnecting`, or sooner by the library's and the pool's
        # own tries: which of them took it depends on timing, so their counts are not asserted)
        assert report.first_after_promotion is not None

        # the new primary dies too: a write tries for CHATRECORD_WRITE_RETRY_SECONDS, then says so
        last = Chatrecord(
            open_store({"CHATRECORD_DATABASE_URL": pair.url, "CHATRECORD_WRITE_RETRY_SECONDS": "1"}, POSTGRES_CONNECT_TIMEOUT="1")
        )
        try:
            conversation = report.writers[0].conversation
            last.record(segment(conversation, "before-the-end"))
            kill(pair.standby)
            with pytest.raises(
                PrimaryGone,
                match=r"^no server of the store accepted the write for 1 s "
                r"\(CHATRECORD_WRITE_RETRY_SECONDS\) after its connection was lost: "
                r".*sending it again is safe",
            ):
                last.record(segment(conversation, "after-the-end"))
        finally:
            last.close()
    finally:
        pair.stop()
