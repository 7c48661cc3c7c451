"""Worker processes that end with the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
"""prctl's option: the signal a process gets when its parent ends (linux/prctl.h)."""


def end_with(parent: int, sig: int = signal.SIGTERM) -> bool:
    """Asks Linux to send this process `sig` when its parent `parent` ends (prctl PR_SET_PDEATHSIG). Sends
    it at once when the parent ended already. Returns True when tied to the parent. Returns False where
    it cannot be (not Linux, prctl refused) or `parent` is this process."""
    if parent == os.getpid() or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # it ended before the line above
        os.kill(os.getpid(), sig)
    return True


PARENT = "CHATRECORD_SERVE_PARENT"
"""The environment key that tells a worker process the pid of the server process that started it."""


def end_with_parent(environ: dict[str, str] | None = None) -> bool:
    """Ties a worker of `run` to its parent (PARENT): SIGTERM when the parent ends, at once if it has.
    Uvicorn's workers otherwise outlive a server killed with SIGKILL. Returns True when tied. Returns
    False elsewhere (one process, or not Linux)."""
    parent = (os.environ if environ is None else environ).get(PARENT)
    if not parent:
        return False
    return end_with(int(parent))
