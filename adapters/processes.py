"""Worker processes that end with the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
"""prctl's option: the signal a process gets when its parent ends (linux/prctl.h)."""


def end_with(parent: int, sig: int = signal.SIGTERM) -> bool:
    """Asks Linux to send this process `sig` when its parent ends (prctl PR_SET_PDEATHSIG), and
    sends it at once when the parent, process id `parent`, ended already: a worker (an HTTP
    server's, a rebuild's) then does not outlive a parent killed with SIGKILL. Returns True when
    this process is tied to its parent; False where it cannot be (not Linux, prctl refused) or
    `parent` is this process itself."""
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
    """In a worker of `run` (PARENT names another process), asks Linux to send the worker
    SIGTERM when the process that started it ends (prctl PR_SET_PDEATHSIG), and sends it at
    once when that process ended already: uvicorn's workers otherwise outlive a server killed
    with SIGKILL, still bound to its port. Returns True when the worker is tied to its parent;
    False elsewhere (one process, or not Linux)."""
    parent = (os.environ if environ is None else environ).get(PARENT)
    if not parent:
        return False
    return end_with(int(parent))
