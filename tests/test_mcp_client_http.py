"""Issue 32 §1: a Streamable HTTP MCP server (the `mcp` SDK's MCPServer, in a subprocess) as a
tool source, with `headers` holding a `${env:…}` reference that reaches the server and no sink.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from engine.executors.mcp_client import registry
from secrets_support import leaks, plant, sink_files, skillyard, write

FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def http_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The fixture server on Streamable HTTP: (its URL, the token it expects as a bearer)."""
    token, port = plant("mcp-http-token"), free_port()
    child = subprocess.Popen([sys.executable, FIXTURE, "http", str(port)], env={**os.environ, "FIXTURE_EXPECT_TOKEN": token},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, token
    finally:
        registry.close_all()
        child.terminate()
        child.wait(10)


def project(root: Path, url: str, token: str) -> Path:
    servers = {"mcpServers": {"web": {"url": url, "headers": {"Authorization": "Bearer ${env:WEB_MCP_TOKEN}"}}}}
    return write(root, {
        "tools.yaml": "tools:\n  local:\n    type: fetch\n    description: A local tool.\n",
        "config/mcp.yaml": json.dumps(servers, indent=2),
        "config/engine.yaml": "logging: {level: debug}\n",
        ".env": f"WEB_MCP_TOKEN={token}\n",
    })


def test_an_http_servers_tools_are_called_with_its_headers_and_the_token_reaches_no_sink(http_server: tuple[str, str], tmp_path: Path) -> None:
    url, token = http_server
    root = project(tmp_path, url, token)
    called = skillyard("call", "web_whoami", "--dir", str(root), "--output", "result", cwd=root)
    echoed = skillyard("call", "web_add", "--args-json", '{"a": 2, "b": 40}', "--dir", str(root), cwd=root)
    listed = skillyard("mcp", "list", "--dir", str(root), "--json", cwd=root)
    tools = skillyard("tools", "--dir", str(root), "--json", cwd=root)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["data"] == {"result": "authorized"}  # the header, resolved, reached the server
    assert json.loads(echoed.stdout) == {"total": 42}
    [server] = json.loads(listed.stdout)
    assert server["transport"] == "http" and server["state"] == "ready" and "web_whoami" in [t["name"] for t in server["tools"]]
    outputs = [r.stdout + r.stderr for r in (called, echoed, listed, tools)]
    assert sink_files(root), "the runs were recorded"
    assert leaks(token, outputs, sink_files(root)) == []


def test_a_wrong_token_is_what_the_server_sees(http_server: tuple[str, str], tmp_path: Path) -> None:
    url, _ = http_server
    root = project(tmp_path, url, plant("not-the-token"))
    called = skillyard("call", "web_whoami", "--dir", str(root), "--no-store", cwd=root)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"result": "refused"}
