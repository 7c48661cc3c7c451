"""The idempotency keys in the store (`adapters.store.idempotency`), on memory, SQLite and
PostgreSQL: a key is reserved once, atomically, even by threads racing for it; a reservation
is finished or released only by its own request, and one left behind expires."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.bootstrap import open_store
from adapters.store.idempotency import IN_FLIGHT, StoredResponse
from adapters.store.ports import IdempotencyKeys


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def keys(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IdempotencyKeys]:
    if request.param == "memory":
        store = open_store(memory=True)
    elif request.param == "sqlite":
        store = open_store({"CHATRECORD_DB": str(tmp_path / "store.sqlite")})
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        store = open_store({"CHATRECORD_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}schema={schema}"})
    found = store.idempotency_keys
    found.now = 1_000_000.0  # type: ignore[attr-defined]
    found.clock = lambda: found.now  # type: ignore[attr-defined, method-assign, assignment]
    yield found
    store.close()


def test_a_key_is_reserved_once_and_then_keeps_its_response(keys: Any) -> None:
    reserved, mine = keys.reserve("k", "fp-1")
    again, second = keys.reserve("k", "fp-1")
    other, third = keys.reserve("k", "fp-2")

    assert mine and not second and not third
    assert reserved.status == IN_FLIGHT and again == other == reserved and reserved.body_hash == "fp-1"
    assert keys.finish("k", reserved, StoredResponse("fp-1", 200, '{"version": 2}')) == StoredResponse(
        "fp-1", 200, '{"version": 2}'
    )
    assert keys.reserve("k", "fp-1") == (StoredResponse("fp-1", 200, '{"version": 2}'), False)
    assert keys.get("k") == StoredResponse("fp-1", 200, '{"version": 2}')


def test_a_released_key_is_free_again(keys: Any) -> None:
    reserved, _ = keys.reserve("k", "fp-1")
    keys.release("k", reserved)

    assert keys.get("k") is None
    assert keys.reserve("k", "fp-2")[1] is True


def test_a_reservation_left_behind_expires_and_only_its_taker_finishes(keys: Any) -> None:
    stale, _ = keys.reserve("k", "fp-1")
    keys.now += keys.seconds - 1
    assert keys.reserve("k", "fp-1") == (stale, False)  # still in flight

    keys.now += 1  # its time is up: the process that made it is taken for gone
    taken, mine = keys.reserve("k", "fp-2")
    kept_by_stale = keys.finish("k", stale, StoredResponse("fp-1", 200, '{"version": 9}'))
    keys.release("k", stale)

    assert mine and taken.body_hash == "fp-2" and taken != stale
    assert kept_by_stale == taken and keys.get("k") == taken  # the stale request changed nothing
    assert keys.finish("k", taken, StoredResponse("fp-2", 200, '{"version": 3}')) == StoredResponse("fp-2", 200, '{"version": 3}')


def test_threads_racing_for_a_key_reserve_it_once(keys: Any) -> None:
    barrier, results = threading.Barrier(8), []

    def race(n: int) -> None:
        barrier.wait()
        results.append(keys.reserve("k", f"fp-{n}"))

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [kept for kept, mine in results if mine]
    assert len(results) == 8 and len(winners) == 1
    assert all(kept == winners[0] for kept, _ in results) and keys.get("k") == winners[0]
