"""Input lines' digests as the store keeps them: keyed with the conversation's data key.

A line's digest (`adapters.ingest.digest_of`) is the sha256 of its kept facts, the user's texts among
them. Kept plain in events' `source` and in `chatrecord_sources`, it would confirm a guessed text
(hash the guess, look it up) even after `erase`. So the store keeps `keyed_digest` instead:
HMAC-SHA256 over the plain digest, 32 hex, under `digest_key`, derived from the conversation's data
key (`adapters.store.keys`). Erasing deletes the data key: no digest can be recomputed then.

Events stored before digests were keyed carry the plain digest: a line is looked up in both forms
(`adapters.service.record_lines.RecordLines`). A store without data keys keeps plain digests, as
does an erased conversation (its key is gone; no text is stored for it)."""

from __future__ import annotations

import hmac
from collections.abc import Callable

DIGEST_KEY_LABEL = b"chatrecord line digest"
"""What the digest key is the HMAC of, under the data key: the key serves for nothing else."""
DIGEST_HEX = 32
"""The hex digits kept of a keyed digest (as many as of a plain one)."""


def digest_key(data_key: bytes) -> bytes:
    """Returns the 32-byte key that keys a conversation's line digests, derived from its data key."""
    return hmac.digest(data_key, DIGEST_KEY_LABEL, "sha256")


def keyed_digest(key: bytes, digest: str) -> str:
    """Returns a line's plain `digest` keyed with `key` (`digest_key`): 32 hex of HMAC-SHA256."""
    return hmac.new(key, digest.encode(), "sha256").hexdigest()[:DIGEST_HEX]


def digest_keyer(data_key: bytes | None) -> Callable[[str], str] | None:
    """Returns `keyed_digest` under the digest key of `data_key`; None without a key (plain digests)."""
    if data_key is None:
        return None
    key = digest_key(data_key)
    return lambda digest: keyed_digest(key, digest)
