"""A file of kept chain heads, which `verify --against FILE` checks the chains against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import orjson

from domain.errors import ChatrecordError
from domain.events import conversation_uuid


class BadHeadsFile(ChatrecordError):
    """Raised when a heads file cannot be read or a line of it is not a head."""


@dataclass(frozen=True)
class KeptHead:
    """A conversation's head as kept elsewhere (a heads file, `read_heads`): its last version
    and that version's hash. Not the read models' head row (`projections.row_head.Head`)."""

    conversation: str
    originator_id: UUID
    version: int
    hash: bytes


def read_heads(path: Path) -> dict[UUID, KeptHead]:
    """Returns the heads a file holds. Lines are `NAME VERSION HASH` (`verify --heads`) or JSON objects
    with `conversation`, `version` and `hash` (`verify --json`). Blank lines are skipped. A JSON
    object without a hash needs a `problem`. Raises BadHeadsFile naming the line when a line is
    neither. Raises it too when the file holds no line or cannot be read."""
    heads: dict[UUID, KeptHead] = {}
    broken = 0
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BadHeadsFile(f"{path}: cannot be read ({getattr(error, 'strerror', None) or error})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            if line.lstrip().startswith("{"):
                value = orjson.loads(line)
                if isinstance(value, dict) and "reproductions_of" in value:  # verify --json's line on reproductions: no head
                    continue
                if value.get("hash") is None and value.get("problem"):  # a broken chain's verdict: no head to keep
                    broken += 1
                    continue
                name, version, digest = value["conversation"], int(value["version"]), bytes.fromhex(value["hash"])
                key = UUID(value["id"]) if value.get("id") else conversation_uuid(name)
            else:
                name, version_text, hex_digest = line.strip().rsplit(None, 2)
                version, digest = int(version_text), bytes.fromhex(hex_digest)
                key = conversation_uuid(name)
            if len(digest) != 32 or version < 0:
                raise ValueError
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BadHeadsFile(
                f"{path}: line {number} is not a head; expected NAME VERSION HASH (64 hex digits) or a line of verify --json"
            ) from None
        heads[key] = KeptHead(name, key, version, digest)
    if not heads and not broken:
        raise BadHeadsFile(
            f"{path}: holds no head; expected lines NAME VERSION HASH (verify --heads) or the lines of verify --json"
        )
    return heads
