"""docs/openapi.json is the contract: Schemathesis (every check, its stateful phase) against a
live `chatrecord serve` on each backend finds no request the document allows that the server
refuses, and no response the document does not describe (issue 23)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.specs.openapi.checks import ignored_auth, negative_data_rejection, positive_data_acceptance

from tests.e2e.conftest import ROOT
from tests.http.conftest import TOKEN, Server

OPENAPI = ROOT / "docs" / "openapi.json"
EXAMPLES = 25
EXCLUDED = [positive_data_acceptance, negative_data_rejection, ignored_auth]
"""ST202 is replaced by `accepts_valid_data`; ST401 sends the configured Authorization header
with its "invalid" request, so it cannot see the 401 the server gives (test_http.py holds it)."""
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))
STATE_REFUSALS = ("urn:chatrecord:problem:version-mismatch", "urn:chatrecord:problem:idempotency-key-reused")
"""Refusals that depend on the store's state, not the request's form: a stale `If-Match` (412)
and an Idempotency-Key that an earlier generated request used with another body (422)."""


@schemathesis.check
def accepts_valid_data(ctx, response, case):  # type: ignore[no-untyped-def]
    """ST202 (positive data acceptance), less the refusals that depend on state."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except AssertionError:
        if response.headers.get("content-type", [""])[0].startswith("application/problem+json"):
            if json.loads(response.content).get("type") in STATE_REFUSALS:
                return None
        raise


@schemathesis.check
def rejects_invalid_data(ctx, response, case):  # type: ignore[no-untyped-def]
    """ST203 (negative data rejection), with a 413 counted as a rejection: a generated body over
    the server's limit (CHATRECORD_MAX_BODY_BYTES, 64 KiB here) is refused unread."""
    if response.status_code == 413:
        return None
    return negative_data_rejection(ctx, response, case)


def load(server: Server) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_path(OPENAPI)
    schema.config.update(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"})
    return schema


@pytest.fixture(scope="module")
def contract(server: Server) -> Iterator[schemathesis.BaseSchema]:
    yield load(server)


def test_every_operation_holds_every_check(contract: schemathesis.BaseSchema) -> None:
    failures = []
    for result in contract.get_all_operations():
        operation = result.ok()

        @SETTINGS
        @given(case=operation.as_strategy())
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(excluded_checks=EXCLUDED, additional_checks=[accepts_valid_data, rejects_invalid_data])

        try:
            run()
        except Exception as error:  # noqa: BLE001 - collected and shown together
            failures.append(f"{operation.label}: {error}")
    assert failures == []


def test_the_stateful_phase_holds_every_check(contract: schemathesis.BaseSchema) -> None:
    machine = contract.as_state_machine()

    class Checked(machine):  # type: ignore[misc, valid-type]
        def validate_response(self, response, case, additional_checks=(), **kwargs):  # type: ignore[no-untyped-def]
            case.validate_response(response, excluded_checks=EXCLUDED,
                                   additional_checks=[accepts_valid_data, rejects_invalid_data, *additional_checks])

    Checked.run(settings=settings(max_examples=10, derandomize=True, deadline=None, database=None,
                                  stateful_step_count=6, suppress_health_check=list(HealthCheck)))


def test_every_problem_type_is_in_the_document() -> None:
    from adapters.http.problems import TITLES
    from adapters.http.schemas import PROBLEM_TYPES

    listed = [name for names in PROBLEM_TYPES.values() for name in names]
    assert sorted(listed) == sorted(TITLES)
