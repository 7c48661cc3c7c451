"""Schemathesis's ST202 and ST203 (positive data acceptance, negative data rejection) as the
contract holds them (`accepts_valid_data`, `rejects_invalid_data`), registered as custom checks on
import: by tests/http/test_contract.py, and by `st run` as its hooks module
(`SCHEMATHESIS_HOOKS=tests.http.contract_checks`, run from the repository's root)."""

from __future__ import annotations

import json
import re

import schemathesis
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

PROBLEM = "urn:chatrecord:problem:"
PAGES = ("visible_page", "hidden_page")
"""The query parameters that take a list of pages (repeatable)."""


def refused_for_state(case: schemathesis.Case, problem: dict[str, object]) -> bool:
    """Whether `problem` is a refusal of a schema-valid request that the store's state explains,
    as the request itself shows: a 412 for an `If-Match` none of whose strong ETags is the
    conversation's version (`*`: the conversation does not exist; RFC 9110 13.1.1 compares
    strongly, so a weak ETag never matches), or a 422 for an `Idempotency-Key` that an earlier
    generated request sent with another body. The same answer to a request without that
    header, or a 412 naming a version the request listed, is a failure."""
    headers = {name.lower(): str(value) for name, value in (case.headers or {}).items()}
    if problem.get("type") == f"{PROBLEM}version-mismatch" and headers.get("if-match", "").strip():
        if headers["if-match"].strip() == "*":
            return problem.get("actual") == 0
        strong = {int(n) for weak, n in re.findall(r'(W/)?"([0-9]+)"', headers["if-match"]) if not weak}
        return problem.get("actual") not in strong
    return problem.get("type") == f"{PROBLEM}idempotency-key-reused" and bool(headers.get("idempotency-key", "").strip())


def one_page_as_a_list(case: schemathesis.Case) -> bool:
    """Whether the request gives a list-of-pages parameter one whole number instead of a list:
    on the wire, `visible_page=3` is the list [3] too, so the server rightly reads it (a
    negative case Schemathesis makes by changing the parameter's type)."""
    query = case.query or {}
    return any(
        name in query and not isinstance(query[name], list) and re.fullmatch(r"-?[0-9]+", str(query[name])) for name in PAGES
    )


@schemathesis.check
def accepts_valid_data(ctx, response, case):  # type: ignore[no-untyped-def]
    """ST202 (positive data acceptance), less the refusals the store's state explains
    (`refused_for_state`)."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except AssertionError:
        if response.headers.get("content-type", [""])[0].startswith("application/problem+json"):
            if refused_for_state(case, json.loads(response.content)):
                return None
        raise


@schemathesis.check
def rejects_invalid_data(ctx, response, case):  # type: ignore[no-untyped-def]
    """ST203 (negative data rejection), with a 413 counted as a rejection (a generated body over
    the server's limit, CHATRECORD_MAX_BODY_BYTES, is refused unread), and a whole number given
    for a list of pages read as that one page (`one_page_as_a_list`)."""
    if response.status_code == 413:
        return None
    try:
        return negative_data_rejection(ctx, response, case)
    except AssertionError:
        if response.status_code < 400 and one_page_as_a_list(case):
            return None
        raise
