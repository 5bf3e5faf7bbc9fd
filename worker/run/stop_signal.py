"""SIGTERM from the first instant of `run`: Kubernetes deletes a pod at any moment of its
life, so the handler is in place before the worker imports its modules, loads its models
or touches Kafka and Redis, and from then until the process ends SIGTERM never meets its
default action (death by the signal). A leaf module: standard library only (it is
imported before anything else).

Three phases:
- starting (imports, models, tokenizers, settings): nothing is owned yet, so a SIGTERM
  ends the process at once with exit 0 (`SystemExit`, so `finally` blocks still run;
  where the interpreter swallows it, in a weakref callback or a `__del__` that the
  signal happened to interrupt, the unraisable hook ends the process instead);
- running: the event loop's own handler (`Runner.run`, `Supervisor.run`) stops the
  worker; it asks `requested()` once installed, for a SIGTERM that came in between;
- finishing (the loop's work done): SIGTERM is ignored and the exit goes on (ignored, not
  handled: the interpreter resets its own handlers to the default as it exits).

A parent may start the process with SIGTERM blocked (`run --processes` does, so that a
child is never killed by the signal before its handler exists): `install` unblocks it,
and a SIGTERM held meanwhile is delivered to the handler then.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

_state = {"requested": False, "starting": False, "installed": False}


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _state["requested"] = True
    if _state["starting"]:
        raise SystemExit(0)  # nothing is owned yet: nothing to finish or hand over


def _chain_unraisable(previous: Callable[[sys.UnraisableHookArgs], object]) -> None:
    def on_unraisable(unraisable: sys.UnraisableHookArgs) -> None:
        if (
            _state["starting"]
            and _state["requested"]
            and isinstance(unraisable.exc_value, SystemExit)
        ):
            # The handler's exit raised where exceptions are only reported (it interrupted
            # an import lock's weakref callback, say): start-up would go on. End it here.
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(0)
        previous(unraisable)

    sys.unraisablehook = on_unraisable


def install() -> None:
    """The handler, in its starting phase (from the main thread: elsewhere, nothing)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _state["starting"] = _state["installed"] = True
    _chain_unraisable(sys.unraisablehook)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def hand_over() -> None:
    """The event loop is about to run: from now on a SIGTERM is only noted, for the loop's
    handler to find (`requested`)."""
    _state["starting"] = False


def requested() -> bool:
    """Whether a SIGTERM came (in any phase)."""
    return _state["requested"]


@contextlib.contextmanager
def blocked() -> Iterator[None]:
    """SIGTERM held (not lost) while handlers are swapped: no instant without one."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def take_back(remove_loop_handler: Callable[[int], object]) -> None:
    """The event loop's handler removed (which resets SIGTERM to its default, killing the
    process by the signal) and SIGTERM ignored from then on, SIGTERM held in between.
    Only where `install` ran (the `run` command's own process, not a caller's)."""
    if not _state["installed"] or threading.current_thread() is not threading.main_thread():
        return
    _state["starting"] = False
    with blocked():
        remove_loop_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
