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
