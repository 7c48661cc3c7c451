"""docs/openapi.json is the contract: Schemathesis (every check, its stateful phase) against a
live `chatrecord serve` on each backend finds no request the document allows that the server
refuses, and no response the document does not describe (issue 23); `st run --checks all` with
every phase, coverage included, finds none either (issue 35, item 6)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.stateful import initialize
from schemathesis.generation.stateful.state_machine import StepInput
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from tests.e2e.conftest import ROOT
from tests.http.conftest import TOKEN, Server
from tests.http.contract_checks import PROBLEM, accepts_valid_data, refused_for_state, rejects_invalid_data

OPENAPI = ROOT / "docs" / "openapi.json"
EXAMPLES = 25
EXCLUDED = [positive_data_acceptance, negative_data_rejection]
"""ST202 and ST203, replaced by `accepts_valid_data` and `rejects_invalid_data`."""
AUTH = {"Authorization": f"Bearer {TOKEN}"}
"""The token, sent with each call (not set in the schema's config, whose headers Schemathesis
adds to its probes too): so ST401 sees it as given and probes without it and with a wrong one."""
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def load(server: Server) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_path(OPENAPI)
    schema.config.update(base_url=server.url)
    return schema


@pytest.fixture(scope="module")
def contract(server: Server) -> Iterator[schemathesis.BaseSchema]:
    yield load(server)


PHASES = ["Examples", "Coverage", "Fuzzing", "Stateful"]
ST_EXAMPLES = 20
"""Cases a fuzzed operation gets in `test_st_run_holds_every_check_in_every_phase` (the coverage
phase makes its own: each parameter's edges)."""


def test_st_run_holds_every_check_in_every_phase(server: Server) -> None:
    """`st run --checks all` as a user runs it from the repository's root (its config,
    schemathesis.toml), with every phase: the documented examples, coverage (each parameter's
    edges: an empty optional header, a time with a lower-case z, a value one past a bound, an
    unknown query parameter), fuzzing and stateful. ST202 and ST203 are held as
    `contract_checks` words them (its hooks module)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            str(OPENAPI),
            "--url",
            server.url,
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance,negative_data_rejection",
            "--header",
            f"Authorization: Bearer {TOKEN}",
            "--phases",
            ",".join(phase.lower() for phase in PHASES),
            "--max-examples",
            str(ST_EXAMPLES),
            "--generation-deterministic",
            "--no-color",
        ],
        cwd=ROOT,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.http.contract_checks", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-30000:] + done.stderr[-5000:]
    ran = re.findall(r"^ *(✅|❌|⏭) +(Examples|Coverage|Fuzzing|Stateful) \(", done.stdout, re.MULTILINE)
    assert ran == [("✅", phase) for phase in PHASES], done.stdout[-5000:]


def test_every_operation_holds_every_check(contract: schemathesis.BaseSchema) -> None:
    failures = []
    for result in contract.get_all_operations():
        operation = result.ok()

        @SETTINGS
        @given(case=operation.as_strategy())
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(
                headers=AUTH, excluded_checks=EXCLUDED, additional_checks=[accepts_valid_data, rejects_invalid_data]
            )

        try:
            run()
        except Exception as error:  # noqa: BLE001 - collected and shown together
            failures.append(f"{operation.label}: {error}")
    assert failures == []


def test_the_stateful_phase_holds_every_check(contract: schemathesis.BaseSchema) -> None:
    machine = contract.as_state_machine()
    lines = contract["/v1/lines"]["POST"]
    started = json.loads((ROOT / "tests" / "data" / "demo_seo_tour.jsonl").read_text("utf-8").splitlines()[0])
    followed: list[tuple[str, int]] = []

    class Checked(machine):  # type: ignore[misc, valid-type]
        @initialize(target=machine.bundles[f"{lines.label} -> 200"])
        def start_a_conversation(self):  # type: ignore[no-untyped-def]
            """Each scenario begins with a line that is stored (a generated one rarely is: it needs a
            new conversation, no stale `follows`), so the links of its 200 are followed."""
            line = started | {"conversation": f"conv-stateful-{uuid.uuid4().hex[:10]}"}
            step = StepInput.initial(lines.Case(body=line, media_type="application/json"))
            self.recorder.record_case(case=step.case)  # as Schemathesis's own root steps do
            self.control.record_step(step, self.recorder)
            return self._step(step)

        def get_call_kwargs(self, case):  # type: ignore[no-untyped-def]
            return {"headers": AUTH}

        def validate_response(self, response, case, additional_checks=(), **kwargs):  # type: ignore[no-untyped-def]
            parent = self.recorder.find_parent(case_id=case.id)
            if parent is not None and parent.operation.label == lines.label:
                followed.append((case.operation.label, response.status_code))
            # the recorder lets the stateful checks (ST301, ST302) find a call's parent
            case.validate_response(
                response,
                excluded_checks=EXCLUDED,
                headers=kwargs.get("headers"),
                transport_kwargs=kwargs or None,
                recorder=self.recorder,
                additional_checks=[accepts_valid_data, rejects_invalid_data, *additional_checks],
            )

    Checked.run(
        settings=settings(
            max_examples=30,  # enough scenarios (derandomized) that each of the line's six reads is followed
            derandomize=True,
            deadline=None,
            database=None,
            stateful_step_count=6,
            suppress_health_check=list(HealthCheck),
        )
    )
    # the links of a line's 200 were followed to each of the conversation's reads, which answered
    # (at least these six: which others a derandomized run reaches changes with the document)
    reads = {label for label, status in followed if status == 200}
    assert reads >= {
        f"GET /v1/conversations/{{conversation}}/{read}"
        for read in ("turn", "audit", "activity", "replay", "replay/changes", "export")
    }, followed


def test_every_problem_type_is_in_the_document() -> None:
    from adapters.http.openapi import PROBLEM_TYPES
    from adapters.http.problems import TITLES

    listed = [name for names in PROBLEM_TYPES.values() for name in names]
    assert sorted(listed) == sorted(TITLES)


def test_only_refusals_the_request_shows_to_depend_on_state_are_excused() -> None:
    def excused(headers: dict[str, str], problem: str, **fields: object) -> bool:
        case = SimpleNamespace(headers=headers)
        return refused_for_state(case, {"type": f"{PROBLEM}{problem}", **fields})  # type: ignore[arg-type]

    assert excused({"If-Match": '"3"'}, "version-mismatch", actual=5)
    assert excused({"if-match": '"3", W/"5"'}, "version-mismatch", actual=5)
    assert excused({"If-Match": 'W/"5"'}, "version-mismatch")
    assert excused({"If-Match": "*"}, "version-mismatch", actual=0)
    assert excused({"Idempotency-Key": "k"}, "idempotency-key-reused")
    assert not excused({"If-Match": '"3", "5"'}, "version-mismatch", actual=5)
    assert not excused({"If-Match": "*"}, "version-mismatch", actual=2)
    assert not excused({}, "version-mismatch", actual=5)
    assert not excused({"If-Match": '"3"'}, "idempotency-key-reused")
    assert not excused({"If-Match": '"3"', "Idempotency-Key": "k"}, "bad-line")
