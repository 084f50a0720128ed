"""Worker processes die with their parent: a parent killed with SIGKILL leaves no orphan behind that
keeps writing into a universe (or holding its lock).

On Linux this is the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through
``ctypes``); where that is missing a daemon thread polls the parent's pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1


def _pdeathsig() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0)
    except (OSError, AttributeError):  # no libc or no prctl: the poller still works
        return False


def _watch(parent: int, interval: float) -> None:
    while True:
        time.sleep(interval)
        if os.getppid() != parent:
            os._exit(1)


def die_with_parent(parent: int | None = None, interval: float = 1.0) -> None:
    """Call first thing in a child process: it is killed as soon as its parent dies.

    ``parent`` is the pid the child must have as its parent (the caller's ``os.getpid()`` when it
    forks the child directly); a child whose parent is already gone exits at once. ``None`` (a child
    started through a fork server, whose parent is that server) only arms the signal.
    """
    armed = _pdeathsig()
    if parent is None:
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    if armed:
        return
    with contextlib.suppress(RuntimeError):
        threading.Thread(target=_watch, args=(parent, interval), daemon=True, name="scaleenv-lifeline").start()
