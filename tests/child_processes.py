"""The long-lived processes the tests start (`serve`, `worker`, the Temporal dev server, fixture
servers) end with the test process, however it ends.

Each starts in its own session (a Ctrl-C at the terminal reaches the test process, which then
stops its children in order, not all of them at once), and three layers make sure it ends:

- `stop` (called from the fixture's `finally`): the polite signal, a grace period, then SIGKILL
  to its whole process group, so what it started itself goes too;
- an `atexit` hook kills every group still running when the interpreter exits (a teardown that
  never ran: an interrupted setup, a second Ctrl-C);
- on Linux the child is bound to the test process's life (`PR_SET_PDEATHSIG`): when an xdist
  worker is killed, or the test process dies of SIGKILL, the kernel kills the child with it.

(No tests here; the name keeps it beside the tests that import it.)
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Callable

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None  # loaded before any fork
_RUNNING: dict[int, subprocess.Popen[Any]] = {}
_LOCK = threading.Lock()


def _bound_to(parent: int) -> Callable[[], None]:
    """In the child, before exec: die with `parent` (and at once if it is already gone)."""

    def bind() -> None:
        assert _LIBC is not None
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return bind


def start(args: list[str], **options: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(args, **options)`, in a session of its own, ended with this process.

    The kernel's binding follows the thread that forks: only a child started from the main
    thread (every fixture) is bound, so a helper thread that ends cannot take its child along."""
    options["start_new_session"] = True
    if _LIBC is not None and threading.current_thread() is threading.main_thread():
        options["preexec_fn"] = _bound_to(os.getpid())
    process = subprocess.Popen(args, **options)
    with _LOCK:
        _RUNNING[process.pid] = process
    return process


def stop(process: subprocess.Popen[Any], first: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """`first` (the signal the program stops cleanly on), up to `grace` seconds, then SIGKILL to
    its process group; always waits for it."""
    try:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(first)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(grace)
    finally:
        _kill_group(process)
        with _LOCK:
            _RUNNING.pop(process.pid, None)


def _kill_group(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # its session's group: its own children too
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


@atexit.register
def _kill_all() -> None:
    with _LOCK:
        left = list(_RUNNING.values())
        _RUNNING.clear()
    for process in left:
        _kill_group(process)
