"""A view sealer never gives a forked process the nonces its parent will use."""

from __future__ import annotations

import base64
import os
import uuid

import pytest

from adapters.store.crypto import new_key, open_view_text, view_sealer
from tests.conftest import _in_ci


@pytest.mark.skipif(
    not hasattr(os, "fork") and not _in_ci(),  # in CI it runs, and fails without fork
    reason="needs os.fork",
)
def test_a_sealer_forked_after_it_drew_nonces_draws_its_own() -> None:
    key, cid = new_key(), uuid.uuid4()
    seal = view_sealer(key, cid)
    seal("before the fork")  # draws a batch of nonces; the rest would be the child's too
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one sealed text back to the parent, then gone
        try:
            os.write(write, seal("the child's text").encode())
        finally:
            os._exit(0)
    os.close(write)
    child = b""
    while chunk := os.read(read, 4096):
        child += chunk
    os.close(read)
    os.waitpid(pid, 0)
    parent = seal("the parent's text")

    assert open_view_text(key, cid, child.decode()) == "the child's text"
    assert open_view_text(key, cid, parent) == "the parent's text"
    assert base64.b64decode(child)[:12] != base64.b64decode(parent)[:12]  # no nonce used twice under the key
