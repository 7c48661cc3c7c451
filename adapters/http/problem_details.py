"""The shape of the HTTP service's errors (`ProblemDetails`, RFC 9457) for the OpenAPI document. The four
members every problem has, and each member a problem type adds (`problems` says which). A member a
problem lacks is left out, never null; `field`, `version` and `problem` may be null."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


def _absent_unless_sent(schema: dict[str, Any]) -> None:
    """Drops the `default` of a member the server leaves out rather than sending null."""
    schema.pop("default", None)


def _member(description: str) -> Any:
    """An optional member: left out where a problem does not have it."""
    return Field(None, description=description, json_schema_extra=_absent_unless_sent)


class ProblemDetails(BaseModel):
    """RFC 9457 problem details; `type` is `urn:chatrecord:problem:<name>`. Besides the four
    members every problem has, the members of the problem types that add them."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    where: str = _member(
        "bad-request, version-mismatch (a weak If-Match): the parameter or header at fault, "
        "`query.<name>` or `header.<Name>`, e.g. header.If-Match."
    )
    line: int = _member("bad-line, unreadable-json: the 1-based number of the line at fault in the request.")
    field: str | None = _member(
        "bad-line, refused-line: the field at fault, a path into the line (e.g. steps[2].toolName); "
        "null for a refused line where no one field is at fault."
    )
    expected: int | list[int] | str = _member(
        "version-mismatch: the version If-Match named (an integer; a list of them where it named "
        'several; "*" for If-Match: *, which matches a conversation at any version from 1, so a '
        "conversation not started, version 0, fails it). bad-line: what the field must be, in words."
    )
    actual: int = _member(
        "version-mismatch, refused-line: the conversation's version now (0: not started; its first line makes it 1 or more)."
    )
    rule: str = _member("refused-line, conflict: the rule that refused the line, e.g. LineOutOfOrder.")
    follows: int = _member("refused-line (a line out of order): the version the line follows.")
    early: bool = _member(
        "refused-line (a line out of order): true when the line came too early (it waits for the "
        "lines before it: waits_for), false when too late."
    )
    waits_for: str = _member(
        "refused-line (a line that came too early, with Retry-After): what the line waits for, in words; send it again later."
    )
    limit: int = _member("body-too-large: the most bytes a body may hold.")
    differs: str = _member(
        "idempotency-key-reused: what differs from the request the key was first sent with, e.g. 'another body'."
    )
    version: int | None = _member("chain-broken, unreadable-event: the version of the event at fault.")
    problem: str | None = _member("chain-broken: what is wrong at that version, as chatrecord verify names it.")
