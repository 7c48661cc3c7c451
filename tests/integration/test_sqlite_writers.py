"""Item 7 of issue 20: writers of one process to one SQLite file queue, first come, first
served, for as long as the queue moves; they never fail on the pool's own 5 s timeout, and a
reader never waits behind a queued writer. Also over HTTP: 8 clients of one `chatrecord serve`."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import orjson
import pytest
from eventsourcing.persistence import ConnectionUnavailableError

from adapters.api import Chatrecord
from adapters.backends.writer_queue import WriterQueue
from adapters.bootstrap import open_store
from tests.http.conftest import TOKEN, start, stop

AT = "2026-10-28T09:00:00Z"
STEP = {"kind": "tool", "round": 1, "durationMs": 3.0, "toolName": "get_page", "toolIsError": False}
CLIENTS, LINES = 8, 60


def line(line_type: str, conversation: str, **fields: object) -> bytes:
    return orjson.dumps({"type": line_type, "conversation": conversation, "at": AT, **fields})


def conversation_lines(conversation: str, segments: int) -> list[bytes]:
    return [
        line("conversation_started", conversation, kind="chat", owner=7),
        line("user_message", conversation, message=1, text="x", page=1),
        *(
            line(
                "segment_returned",
                conversation,
                segment=f"s{i}",
                run=f"s{i}",
                trigger="turn",
                outcome="completed",
                answer="ok",
                steps=[STEP],
                pending=[],
            )
            for i in range(segments)
        ),
    ]


def in_threads(work: list[list[bytes]], send) -> list[str]:
    """Runs one thread per list of lines, all started together; returns the errors."""
    errors: list[str] = []
    barrier = threading.Barrier(len(work))

    def client(lines: list[bytes]) -> None:
        barrier.wait()
        for raw in lines:
            try:
                problem = send(raw)
            except Exception as error:  # noqa: BLE001 - every failure is counted
                problem = repr(error)
            if problem:
                errors.append(problem)

    threads = [threading.Thread(target=client, args=(lines,)) for lines in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CHATRECORD_DB", str(tmp_path / "s.sqlite"))
    monkeypatch.delenv("CHATRECORD_DATABASE_URL", raising=False)
    chatrecord = Chatrecord(open_store())
    yield chatrecord
    chatrecord.close()


def test_8_threads_of_one_process_record_and_read_without_an_error(store: Chatrecord) -> None:
    work = [conversation_lines(f"c{c}", LINES - 2) for c in range(CLIENTS)]

    def send(raw: bytes) -> None:
        store.record(raw)
        conversation = orjson.loads(raw)["conversation"]
        if orjson.loads(raw)["type"] != "conversation_started":
            store.turn_input(conversation)

    assert in_threads(work, send) == []
    assert [len(store.events(f"c{c}")) for c in range(CLIENTS)] == [LINES] * CLIENTS


def test_a_writer_waits_longer_than_the_pools_5_s_for_the_writer_ahead(store: Chatrecord) -> None:
    datastore = store.store.recorder.datastore
    holding, done = threading.Event(), threading.Event()
    errors: list[str] = []

    def long_writer() -> None:
        with datastore.transaction(commit=True):
            holding.set()
            done.wait(6)  # longer than the library's pool timeout (5 s), shorter than the lock's (10 s)

    def second_writer() -> None:
        try:
            store.record(conversation_lines("c", 0)[0])
        except Exception as error:  # noqa: BLE001
            errors.append(repr(error))

    first = threading.Thread(target=long_writer)
    first.start()
    holding.wait(30)
    second = threading.Thread(target=second_writer)
    second.start()
    second.join(5.5)
    assert second.is_alive()  # still queued, not failed, after the pool's 5 s
    done.set()
    first.join()
    second.join()

    assert errors == []
    assert len(store.events("c")) == 1


def test_a_reader_does_not_wait_behind_a_queued_writer(store: Chatrecord) -> None:
    store.record(conversation_lines("c", 0)[0])
    datastore = store.store.recorder.datastore
    holding, read, release = threading.Event(), threading.Event(), threading.Event()

    def long_writer() -> None:
        with datastore.transaction(commit=True):
            holding.set()
            release.wait(30)

    def queued_writer() -> None:
        with datastore.transaction(commit=True):
            pass

    def reader() -> None:
        store.events("c")
        read.set()

    first = threading.Thread(target=long_writer)
    first.start()
    holding.wait(30)
    second = threading.Thread(target=queued_writer)
    second.start()
    while datastore.writers.waiting < 2 and second.is_alive():
        second.join(0.01)
    third = threading.Thread(target=reader)
    third.start()
    try:
        assert read.wait(3)  # read while the first writer still holds its turn
    finally:
        release.set()
        for thread in (first, second, third):
            thread.join()


def test_the_writer_queue_serves_in_order_and_gives_up_only_when_it_stops_moving() -> None:
    queue = WriterQueue(patience=0.2)
    queue.acquire()
    served: list[int] = []

    def writer(n: int) -> None:
        queue.acquire()
        served.append(n)
        queue.release()

    threads = []
    for n in range(5):
        threads.append(threading.Thread(target=writer, args=(n,)))
        threads[-1].start()
        while queue.waiting < n + 2:
            threads[-1].join(0.001)
    queue.release()
    for thread in threads:
        thread.join()
    assert served == [0, 1, 2, 3, 4]

    queue.acquire()
    with pytest.raises(ConnectionUnavailableError, match="no write ended for 0.2 s"):
        queue.acquire()  # the turn is held and never released
    queue.release()
    queue.acquire()  # the ticket given up is skipped
    queue.release()
    assert queue.waiting == 0


def test_8_http_clients_of_one_serve_process_on_sqlite_get_no_error_and_no_503(tmp_path: Path) -> None:
    process, url = start({"CHATRECORD_DB": str(tmp_path / "s.sqlite")}, tmp_path / "serve.log")
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
            work = [conversation_lines(f"h{c}", LINES - 2) for c in range(CLIENTS)]

            def send(raw: bytes) -> str | None:
                answer = client.post("/v1/lines", content=raw, headers={"content-type": "application/json"})
                return None if answer.status_code == 200 else f"{answer.status_code} {answer.text}"

            assert in_threads(work, send) == []
            versions = [client.get(f"/v1/conversations/h{c}/turn").status_code for c in range(CLIENTS)]
    finally:
        stop(process)
    assert versions == [200] * CLIENTS
