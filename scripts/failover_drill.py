"""The failover drill of issue 24 (docs/reliability.md, "Failover"): writers append through a
multi-host CHATRECORD_DATABASE_URL to a primary with a synchronous standby; the primary is killed
with SIGKILL in the middle of the stream, the standby promoted, and the writers go on. Prints
acked, stored, lost, doubled, the time the writers were blocked and the time from the promotion
to the first write that succeeded after it.

    python3 scripts/failover_drill.py [--writers 4] [--lines 200] [--kill-after 300] [--promote-after 2.0]

A primary and a standby of its own (`tests.pg_servers.start_replicated(synchronous=True)`: initdb,
pg_basebackup -R, pg_ctl, on free loopback ports, in a temporary folder removed at the end). Each
writer is a thread with a Chatrecord of its own (its own connection pool) appending one segment
line at a time to a conversation of its own, each line sent until it is acked
(CHATRECORD_WRITE_RETRY_SECONDS=60 makes the store try again while no server accepts it). After
the drill the new primary's log is checked: every acked segment stored once (lost, doubled), the
hash chains (`verify`), the read models against a fresh fold of the log (`verify_rows`, and
`diff` under the live rule set: what `rebuild --diff` prints). Exit status 1 when a figure that
must be 0 is not. tests/integration/test_failover.py runs `drill` with small counts.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import orjson  # noqa: E402

from adapters.api import Chatrecord  # noqa: E402
from adapters.bootstrap import open_store  # noqa: E402
from domain.errors import ChatrecordError  # noqa: E402
from domain.events import SegmentReturned  # noqa: E402
from tests.pg_servers import Replicated, kill, promote, start_replicated  # noqa: E402

AT = "2026-10-28T09:00:00Z"
STEP = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
SEND_TRIES = 5
"""How often a writer sends one line that failed (each send tries again inside the store first)."""


def started(conversation: str) -> list[dict[str, Any]]:
    return [
        {"type": "conversation_started", "conversation": conversation, "at": AT, "kind": "chat", "owner": 7},
        {"type": "user_message", "conversation": conversation, "at": AT, "message": 1, "text": "x", "page": 1},
    ]


def segment(conversation: str, name: str) -> dict[str, Any]:
    return {
        "type": "segment_returned",
        "conversation": conversation,
        "at": AT,
        "segment": name,
        "run": name,
        "trigger": "turn",
        "outcome": "completed",
        "answer": "ok",
        "steps": [STEP, STEP],
        "pending": [],
    }


@dataclass
class Writer:
    """One writer's conversation and what it saw: the segments acked (with the time of each ack),
    the errors it was shown, the longest wait of one line and the store's reconnecting tries."""

    conversation: str
    acked: list[tuple[str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    longest: float = 0.0
    reconnects: int = 0


@dataclass
class Report:
    """What the drill found (see the module): per writer, and the new primary's log."""

    writers: list[Writer]
    killed_at: float
    promoted_at: float
    stored: Counter[tuple[str, str]]
    chains_ok: bool
    rows_ok: bool
    diff: list[str]

    @property
    def acked(self) -> int:
        return sum(len(w.acked) for w in self.writers)

    @property
    def acked_before_kill(self) -> int:
        return sum(1 for w in self.writers for _, at in w.acked if at < self.killed_at)

    def _acked_keys(self) -> set[tuple[str, str]]:
        return {(w.conversation, name) for w in self.writers for name, _ in w.acked}

    @property
    def lost(self) -> int:
        return sum(1 for key in self._acked_keys() if self.stored[key] == 0)

    @property
    def doubled(self) -> int:
        return sum(count - 1 for count in self.stored.values() if count > 1)

    @property
    def blocked(self) -> float:
        """Seconds the longest one line waited (its sends and the store's tries together)."""
        return max((w.longest for w in self.writers), default=0.0)

    @property
    def first_after_promotion(self) -> float | None:
        """Seconds from the promotion to the first ack after it."""
        after = [at for w in self.writers for _, at in w.acked if at >= self.promoted_at]
        return min(after) - self.promoted_at if after else None


def write(
    url: str,
    writer: Writer,
    lines: int,
    go: threading.Event,
    tag: str,
    connect_timeout: int,
    hold: Callable[[], None] = lambda: None,
) -> None:
    """Appends `lines` segment lines to the writer's conversation, each sent until it is acked;
    `hold()` is called before each line is sent (the drill's `hold`: wait for the kill)."""
    record = Chatrecord(
        open_store(
            {"CHATRECORD_DATABASE_URL": url, "CHATRECORD_WRITE_RETRY_SECONDS": "60"},
            POSTGRES_CONNECT_TIMEOUT=str(connect_timeout),
        )
    )
    try:
        go.wait(60)
        for number in range(lines):
            name = f"{tag}-{number}"
            hold()
            began = time.monotonic()
            for _ in range(SEND_TRIES):
                try:
                    record.record(segment(writer.conversation, name))
                    writer.acked.append((name, time.monotonic()))
                    break
                except ChatrecordError as error:
                    writer.errors.append(f"{type(error).__name__}: {error}")
            writer.longest = max(writer.longest, time.monotonic() - began)
        writer.reconnects = record.store.reconnects
    finally:
        record.close()


def drill(
    pair: Replicated,
    writers: int,
    lines: int,
    kill_after: int,
    promote_after: float,
    connect_timeout: int = 5,
    hold: bool = False,
) -> Report:
    """Runs the drill on `pair` (a primary with a synchronous standby; the primary is killed):
    `writers` threads of `lines` lines each, the primary killed once `kill_after` lines were
    acked, the standby promoted `promote_after` seconds later; a writer's pool waits
    `connect_timeout` seconds for a connection (POSTGRES_CONNECT_TIMEOUT, the store's default 5)
    before the store's own tries (`reconnecting`) take over. With `hold`, a writer that finds
    `kill_after` lines acked waits for the kill before it sends its next line, so lines are
    written across the kill however busy the machine (the test's small counts: without it, a
    slow kill could come after the last line). Returns the report."""
    tag = uuid.uuid4().hex[:8]
    setup = Chatrecord(open_store({"CHATRECORD_DATABASE_URL": pair.url}))
    crew = [Writer(f"drill-{tag}-{n}") for n in range(writers)]
    try:
        for one in crew:
            setup.record_lines([orjson.dumps(line) for line in started(one.conversation)], "setup")
    finally:
        setup.close()
    go, killed = threading.Event(), threading.Event()

    def wait_for_the_kill() -> None:
        if hold and sum(len(w.acked) for w in crew) >= kill_after:
            killed.wait(300)

    threads = [
        threading.Thread(target=write, args=(pair.url, one, lines, go, f"w{n}", connect_timeout, wait_for_the_kill), daemon=True)
        for n, one in enumerate(crew)
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # the writers' pools opened
    go.set()
    deadline = time.monotonic() + 300
    while sum(len(w.acked) for w in crew) < kill_after and any(t.is_alive() for t in threads):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the writers did not ack {kill_after} lines in 300 s")
        time.sleep(0.005)
    killed_at = time.monotonic()
    kill(pair.primary)
    killed.set()
    time.sleep(promote_after)
    promoted_at = time.monotonic()
    promote(pair.standby)
    for thread in threads:
        thread.join(timeout=300)
    survivor = Chatrecord(open_store({"CHATRECORD_DATABASE_URL": pair.standby.url}))
    try:
        stored: Counter[tuple[str, str]] = Counter()
        for one in crew:
            for event in survivor.events(one.conversation):
                if isinstance(event, SegmentReturned):
                    stored[(one.conversation, event.segment)] += 1
        chains = [survivor.verify(one.conversation) for one in crew]
        chains_ok = all(verdict.ok for verdicts in chains for verdict in verdicts)
        rows_ok = all(verdict.ok for one in crew for verdict in survivor.verify_rows(one.conversation))
        diff = [d.conversation for d in survivor.diff(survivor.active_rules())]
    finally:
        survivor.close()
    return Report(crew, killed_at, promoted_at, stored, chains_ok, rows_ok, diff)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--lines", type=int, default=200, help="lines per writer")
    parser.add_argument("--kill-after", type=int, default=300, help="kill the primary after this many acks")
    parser.add_argument("--promote-after", type=float, default=2.0, help="seconds from the kill to the promotion")
    parser.add_argument("--connect-timeout", type=int, default=5, help="seconds a pool waits for a connection")
    args = parser.parse_args()
    pair = start_replicated(synchronous=True)
    try:
        Chatrecord(open_store({"CHATRECORD_DATABASE_URL": pair.url})).close()
        started_at = time.monotonic()
        report = drill(pair, args.writers, args.lines, args.kill_after, args.promote_after, args.connect_timeout)
        took = time.monotonic() - started_at
    finally:
        pair.stop()
    errors = sum(len(w.errors) for w in report.writers)
    first = report.first_after_promotion
    print(
        f"failover drill: {args.writers} writers x {args.lines} lines, primary killed (SIGKILL) after "
        f"{args.kill_after} acks, standby promoted {args.promote_after:g} s later, connect timeout "
        f"{args.connect_timeout} s; {took:.1f} s in all"
    )
    print(
        f"  acked {report.acked} ({report.acked_before_kill} before the kill), stored {sum(report.stored.values())}, "
        f"lost {report.lost}, doubled {report.doubled}"
    )
    print(
        f"  writers blocked at most {report.blocked:.2f} s on one line; first write after promotion {first:.2f} s"
        if first is not None
        else "  no write after promotion"
    )
    print(
        f"  errors shown to writers {errors}, store's reconnecting tries {sum(w.reconnects for w in report.writers)}; "
        f"chains {'ok' if report.chains_ok else 'BROKEN'}, read models {'= fold' if report.rows_ok else 'DIFFER'}, "
        f"rebuild --diff {report.diff or 'empty'}"
    )
    for writer in report.writers:
        for error in writer.errors[:3]:
            print(f"  {writer.conversation}: {error}")
    bad = report.lost or report.doubled or not report.chains_ok or not report.rows_ok or report.diff
    return 1 if bad or report.acked != args.writers * args.lines else 0


if __name__ == "__main__":
    sys.exit(main())
