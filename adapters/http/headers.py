"""The HTTP service's headers and media types: ETags and `If-Match`, the Idempotency-Key `fingerprint`, a
Content-Type's charset, and the `Chatrecord-Read-After` position.

No `from __future__ import annotations` here: FastAPI reads `read_after_header`'s annotations."""

import re
from typing import Annotated

from fastapi import Depends, Header

from adapters.api import body_hash
from adapters.http.problems import Problem
from domain.limits import INT_MAX

JSON = "application/json"
NDJSON = ("application/x-ndjson", "application/jsonl")


def etag(version: int) -> dict[str, str]:
    """Returns the ETag header of a conversation at `version`."""
    return {"ETag": f'"{version}"'}


ANY = -1
"""What `If-Match: *` asks for: any version of a conversation that exists (RFC 9110 13.1.1)."""


def if_match(value: str | None) -> list[int] | None:
    """Returns the versions (0 to INT_MAX) an `If-Match` names: one ETag `"N"` or a list (`"3", "4"`).
    Returns `[ANY]` for `*`. Returns None without the header or with an empty one. Raises a 412 problem
    when every ETag is weak (`W/"N"`; RFC 9110 13.1.1 compares strongly). Raises a 400 problem for
    anything else of another form."""
    text = (value or "").strip()
    if not text:
        return None
    if text == "*":
        return [ANY]
    versions, weak = [], 0
    for part in (part.strip() for part in text.split(",")):
        if part.startswith("W/"):
            weak += 1
            continue
        digits = part[1:-1]
        if len(part) >= 3 and part[0] == part[-1] == '"' and digits.isascii() and digits.isdigit():
            if len(digits) <= 10 and int(digits) <= INT_MAX:
                versions.append(int(digits))
                continue
            raise Problem(400, "bad-request", f"If-Match names a version of at most {INT_MAX}", where="header.If-Match")
        raise Problem(
            400, "bad-request", 'If-Match takes versions as ETags, e.g. If-Match: "7" or "7", "8", or *', where="header.If-Match"
        )
    if not versions and weak:
        raise Problem(
            412,
            "version-mismatch",
            'If-Match compares ETags strongly: a weak ETag (W/...) never matches; send the ETag as served, e.g. If-Match: "7"',
            where="header.If-Match",
        )
    return versions


IF_MATCH_PATTERN = r'^ *(\*|(W/)?"[0-9]{1,9}"( *, *(W/)?"[0-9]{1,9}")*)? *$'
"""The If-Match the document promises to read (versions up to 999,999,999; the server reads up to
INT_MAX); empty: as none."""
IDEMPOTENCY_KEY_PATTERN = r"^([!-~]([ -~]*[!-~])?)?$"
"""1–255 printable ASCII characters, no space at either end (a header's value is trimmed); empty: as none."""


def fingerprint(media: str, raw: bytes) -> str:
    """Returns what an Idempotency-Key is kept with: `<64 hex>:<64 hex>`, the sha256 of media type and of
    body. If-Match is not part of it."""
    return f"{body_hash(media.encode())}:{body_hash(raw)}"


def differs(kept: str, digest: str) -> str:
    """Says which part of a request differs from the one its Idempotency-Key was first sent with."""
    if ":" not in kept:  # kept before the fingerprint had parts: media type, If-Match and body in one hash
        return "another Content-Type, If-Match or body"
    (kept_media, kept_body), (media, body) = kept.split(":"), digest.split(":")
    parts = [name for name, same in (("Content-Type", kept_media == media), ("body", kept_body == body)) if not same]
    return "another " + " and ".join(parts)


def charset_of(content_type: str) -> str | None:
    """Returns the `charset` parameter of a Content-Type header, lower case, None without one."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


READ_AFTER = "Chatrecord-Read-After"
"""The header of a write's read-after position (`Chatrecord.position`): `POST /v1/lines` answers
with it where the service reads from standbys; a GET given it is never older than that write."""
READ_AFTER_PATTERN = "^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$"
READ_AFTER_HEADER_PATTERN = "^([0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8})?$"
"""What the document promises to read as Chatrecord-Read-After: a position, or empty (as none)."""


def read_after(position: str | None) -> dict[str, str]:
    """Returns the Chatrecord-Read-After header of `position` (none for None)."""
    return {READ_AFTER: position} if position is not None else {}


async def read_after_header(
    value: Annotated[
        str | None,
        Header(
            alias=READ_AFTER,
            json_schema_extra={"pattern": READ_AFTER_HEADER_PATTERN},
            description="The Chatrecord-Read-After of a write (POST /v1/lines): the answer is never older than that "
            "write. Where the service reads from a standby, it waits for the standby to replay it "
            "(CHATRECORD_READ_WAIT_MS), else the primary answers. An empty value is as none.",
        ),
    ] = None,
) -> str | None:
    """Returns the request's Chatrecord-Read-After; None without one or with an empty one. Raises a 400
    problem for one no write returned."""
    if value is None or not value.strip():
        return None
    if not re.fullmatch(READ_AFTER_PATTERN, value):
        raise Problem(
            400,
            "bad-request",
            f"{READ_AFTER} takes the position a write answered with, e.g. 0/3016040",
            where=f"header.{READ_AFTER}",
        )
    return value


ReadAfter = Annotated[str | None, Depends(read_after_header)]
