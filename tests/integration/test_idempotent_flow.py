"""The Idempotency-Key flow as a use case (`adapters.service.idempotent.run_once`), on memory,
SQLite and PostgreSQL: the work runs once per key, a retry gets the kept response, another
fingerprint or a key in flight raises before anything runs, and failed work frees its key."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.service.idempotent import FirstRun, KeyInFlight, KeyReused, Replayed, run_once
from adapters.store.idempotency import IN_FLIGHT_SECONDS
from tests.integration import test_idempotency_keys

keys = test_idempotency_keys.keys
"""The store's keys on memory, SQLite and PostgreSQL (the fixture of the keys' own tests)."""


def counted(runs: list[int], response: str = '{"version": 3}') -> Any:
    def work() -> tuple[int, str]:
        runs.append(1)
        return len(runs), response

    return work


def test_the_work_runs_once_and_a_retry_gets_its_response(keys: Any) -> None:
    runs: list[int] = []
    first = run_once(keys, "k", "fp", counted(runs))
    again = run_once(keys, "k", "fp", counted(runs))

    assert first == FirstRun(1, '{"version": 3}')
    assert again == Replayed(200, '{"version": 3}')
    assert runs == [1]


def test_another_fingerprint_is_refused_and_an_older_one_in_also_is_the_same_request(keys: Any) -> None:
    runs: list[int] = []
    run_once(keys, "k", "fp-old", counted(runs))
    with pytest.raises(KeyReused) as reused:
        run_once(keys, "k", "fp-other", counted(runs))
    replayed = run_once(keys, "k", "fp-new", counted(runs), also=("fp-old",))

    assert (reused.value.kept, reused.value.fingerprint) == ("fp-old", "fp-other")
    assert replayed == Replayed(200, '{"version": 3}')
    assert runs == [1]


def test_a_key_in_flight_is_refused_until_its_reservation_expires(keys: Any) -> None:
    runs: list[int] = []
    keys.reserve("k", "fp")  # another request's, never finished
    with pytest.raises(KeyInFlight) as in_flight:
        run_once(keys, "k", "fp", counted(runs))
    keys.now += IN_FLIGHT_SECONDS + 1
    taken_over = run_once(keys, "k", "fp", counted(runs))

    assert "still being processed" in str(in_flight.value) and f"{IN_FLIGHT_SECONDS:.0f} s" in str(in_flight.value)
    assert taken_over == FirstRun(1, '{"version": 3}')


def test_work_that_raises_frees_its_key_so_a_retry_runs(keys: Any) -> None:
    def refused() -> tuple[int, str]:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        run_once(keys, "k", "fp", refused)
    runs: list[int] = []
    retried = run_once(keys, "k", "fp", counted(runs))

    assert keys.get("k").response == '{"version": 3}'
    assert retried == FirstRun(1, '{"version": 3}')
