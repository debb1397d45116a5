"""Fixtures end what they start on every exit: a tiny pytest session, in a process of its own,
starts a real fixture (`serve` through server_helpers, the Temporal dev server through
temporal_server), then is interrupted as a user or a crash would: Ctrl-C to its process group
(alone and under xdist), or SIGKILL of the process that started the fixture (an xdist worker
that dies). Afterwards no process it started may be alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

import child_processes
from temporal_server import find_temporal

pytestmark = pytest.mark.slow  # every test here starts a pytest session and servers

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

INNER = {
    "serve": """
        from server_helpers import running_server, write_project

        def test_holds(tmp_path):
            with running_server(write_project(tmp_path / "project"), keys=None) as server:
                ready(server.process.pid)
    """,
    "temporal": """
        from temporal_server import temporal_address  # noqa: F401 - the fixture

        def test_holds(temporal_address):
            ready(None)
    """,
}
READY = """
    import os
    import time
    from pathlib import Path


    def ready(pid):
        Path(os.environ["READY_FILE"]).write_text(str(pid))
        time.sleep(600)
"""


def _start_session(tmp_path: Path, fixture: str, *pytest_args: str) -> tuple[subprocess.Popen[bytes], Path]:
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text(textwrap.dedent(READY) + textwrap.dedent(INNER[fixture]))
    ready = tmp_path / "ready"
    env = {**os.environ, "READY_FILE": str(ready), "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)])}
    env.pop("PYTEST_XDIST_WORKER", None)
    process = child_processes.start(  # its own session: signalled as a terminal signals its foreground group
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(inner), *pytest_args,
         str(inner / "test_inner.py")], cwd=inner, env=env, stdout=(tmp_path / "inner.log").open("w"),
        stderr=subprocess.STDOUT)
    return process, ready


def _descendants_once_ready(process: subprocess.Popen[bytes], ready: Path, log: Path) -> list[psutil.Process]:
    """Every process under the inner session once its fixture is up (the session itself excluded)."""
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"the inner session never got ready:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)
    return psutil.Process(process.pid).children(recursive=True)


def _alive(processes: list[psutil.Process]) -> list[str]:
    alive = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            continue
    return alive


def _none_survive(processes: list[psutil.Process], within: float = 30) -> None:
    deadline = time.monotonic() + within
    while _alive(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(processes), _alive(processes)


def _fixtures() -> list[object]:
    temporal = pytest.mark.skipif(find_temporal() is None, reason="the `temporal` CLI is not installed")
    return ["serve", pytest.param("temporal", marks=temporal)]


@pytest.mark.parametrize("fixture", _fixtures())
@pytest.mark.parametrize("workers", [(), ("-n", "1")], ids=["alone", "xdist"])
def test_ctrl_c_ends_every_process_a_fixture_started(tmp_path: Path, fixture: str, workers: tuple[str, ...]) -> None:
    process, ready = _start_session(tmp_path, fixture, *workers)
    try:
        started = _descendants_once_ready(process, ready, tmp_path / "inner.log")
        assert started, "the fixture started a process"
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C at the terminal does
        process.wait(90)
        _none_survive(started)
    finally:
        child_processes.stop(process)


@pytest.mark.parametrize("fixture", _fixtures())
def test_a_killed_worker_takes_its_fixture_s_processes_along(tmp_path: Path, fixture: str) -> None:
    process, ready = _start_session(tmp_path, fixture, "-n", "1")
    try:
        started = _descendants_once_ready(process, ready, tmp_path / "inner.log")
        server = next(p for p in started if _started_by_a_fixture(p))
        worker = psutil.Process(server.ppid())  # the xdist worker whose fixture started it
        survivors = [p for p in started if p.pid != worker.pid and worker.pid in {a.pid for a in p.parents()}]
        worker.send_signal(signal.SIGKILL)  # no teardown, no atexit: only the kernel can end its children
        _none_survive(survivors)
    finally:
        child_processes.stop(process)


def _started_by_a_fixture(proc: psutil.Process) -> bool:
    """A process a fixture started through child_processes: the leader of a session of its own."""
    try:
        return os.getsid(proc.pid) == proc.pid
    except ProcessLookupError:
        return False
