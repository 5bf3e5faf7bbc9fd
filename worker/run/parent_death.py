"""Children that die with their parent: a `preexec_fn` for subprocess.Popen that asks the
Linux kernel to SIGTERM the child when the parent dies, even by kill -9 (which runs no
atexit handler and no `finally`). Used by `run --processes` for its worker processes and by
`derender-worker servers` for its broker and Redis. A leaf module: standard library only.

The kernel ties the signal to the thread that forked the child, not the whole process: a
child started from a short-lived thread would be signalled when that thread ends.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """The preexec hook, or None off Linux (or without libc's prctl). Resolved before the
    fork: the hook that runs in the child only calls into libc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the call above
            os.kill(os.getpid(), signal.SIGTERM)

    return hook
