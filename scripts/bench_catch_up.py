"""Benchmark: catching the materialised read models up, rebuilding them, and a turn after one event.

Stores CONVERSATIONS conversations of SEGMENTS segments each (the shape of
`bench_turn_input.conversation`), appended round-robin in chunks of 5 events so batches touch
many conversations, on a SQLite file and, if it answers, on PostgreSQL (a throwaway schema on
CHATRECORD_TEST_DATABASE_URL, default postgresql://postgres@127.0.0.1:5432/test). Then times
`ReadModels.catch_up` from nothing, `rebuild("2026-11-01")`, and `turn_input` right after one
more user message (the catch-up of one event plus the read). Not a test: timings vary by machine.

Example:
    PYTHONPATH=. python scripts/bench_catch_up.py 20 500
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_turn_input import conversation  # noqa: E402

from adapters.application import ConversationStore  # noqa: E402
from adapters.readmodels import ReadModels  # noqa: E402
from adapters.settings import postgres_env, sqlite_env  # noqa: E402
from domain.events import ConversationEvent, ConversationStarted, UserMessagePosted, conversation_uuid  # noqa: E402

PG_URL = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"


def logs(conversations: int, segments: int) -> list[list[ConversationEvent]]:
    """Returns the event logs of `conversations` conversations of `segments` segments."""
    template = conversation(segments)
    result = []
    for n in range(conversations):
        name = f"bench-{n}"
        oid = conversation_uuid(name)
        log = []
        for event in template:
            update: dict[str, object] = {"originator_id": oid}
            if isinstance(event, ConversationStarted):
                update["conversation"] = name
            log.append(event.model_copy(update=update))
        result.append(log)
    return result


def fill(store: ConversationStore, all_logs: list[list[ConversationEvent]], chunk: int = 5) -> int:
    """Saves the logs round-robin, `chunk` events of one conversation per save; returns the count."""
    saved, offset = 0, 0
    while any(offset < len(log) for log in all_logs):
        for log in all_logs:
            part = log[offset : offset + chunk]
            if part:
                store.save(*part)
                saved += len(part)
        offset += chunk
    return saved


def timed(what: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = what()
    return time.perf_counter() - start, result


@contextmanager
def sqlite_store() -> Iterator[ConversationStore]:
    with tempfile.TemporaryDirectory() as folder:
        store = ConversationStore(env=sqlite_env(Path(folder) / "bench.sqlite"))
        try:
            yield store
        finally:
            store.close()


@contextmanager
def postgres_store() -> Iterator[ConversationStore]:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    store = ConversationStore(env={**postgres_env(PG_URL), "POSTGRES_SCHEMA": schema})
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def run(name: str, opened: Callable[[], AbstractContextManager[ConversationStore]], all_logs: list[list[ConversationEvent]]) -> None:
    with opened() as store:
        events = fill(store, all_logs)
        models = ReadModels(store)
        caught, applied = timed(models.catch_up)
        rebuilt, report = timed(lambda: models.rebuild("2026-11-01"))
        last = all_logs[0][-1]
        store.save(UserMessagePosted(
            originator_id=last.originator_id, originator_version=last.originator_version + 1,
            timestamp=last.timestamp + timedelta(minutes=1), message=last.message + 1, text="und?", page=0,
        ))
        turn_time, turn = timed(lambda: models.turn_input("bench-0"))
        print(
            f"{name:<10} {events:>7} events: catch-up {caught:6.2f} s ({applied / caught:8.0f} ev/s), "
            f"rebuild {rebuilt:6.2f} s ({report.events / rebuilt:8.0f} ev/s), "
            f"turn after one event {turn_time * 1000:7.1f} ms ({len(turn.notes)} notes)"
        )


def main() -> None:
    conversations = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    segments = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    all_logs = logs(conversations, segments)
    print(f"{conversations} conversations of {segments} segments, batches of {ReadModels.batch_size} events")
    run("SQLite", sqlite_store, all_logs)
    try:
        import psycopg

        psycopg.connect(PG_URL, connect_timeout=3).close()
    except Exception as e:  # noqa: BLE001 - a benchmark only reports what it cannot reach
        print(f"PostgreSQL  skipped: {PG_URL} does not answer ({e})")
        return
    run("PostgreSQL", postgres_store, all_logs)


if __name__ == "__main__":
    main()
