"""Issue 32 §1: a Streamable HTTP MCP server (the `mcp` SDK's MCPServer, in a subprocess) as a
tool source, with `headers` holding a `${env:…}` reference that reaches the server and no sink;
and log messages and questions reaching their own call with several in flight (and over
stdio, where nothing ties them to a call, reaching no wrong one).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.executors.mcp_client import registry
from secrets_support import leaks, plant, sink_files, skillyard, write

FIXTURE = str(Path(__file__).resolve().parents[1].joinpath("mcp_fixture_server.py"))
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


def test_log_messages_and_questions_reach_their_own_call_when_several_are_in_flight(http_server: tuple[str, str], tmp_path: Path) -> None:
    url, token = http_server
    engine = Engine.from_dir(project(tmp_path, url, token))
    events: dict[str, list[Any]] = {"A": [], "B": [], "X": [], "Y": []}

    def answer_with(color: str) -> Any:
        async def approve(tool: Any, args: dict[str, Any], call_id: str) -> dict[str, Any]:
            await asyncio.sleep(0.2)  # both questions are open at once
            return {"color": color}
        return approve

    async def together() -> list[Any]:
        return await asyncio.gather(
            engine.call_tool("web_slow", {"steps": 3, "tag": "A"}, on_event=events["A"].append),
            engine.call_tool("web_slow", {"steps": 3, "tag": "B"}, on_event=events["B"].append),
            engine.call_tool("web_ask", {}, approve=answer_with("xanadu"), on_event=events["X"].append),
            engine.call_tool("web_ask", {}, approve=answer_with("yellow"), on_event=events["Y"].append))

    try:
        results = asyncio.run(together())
    finally:
        engine.close()
    assert [r.data for r in results[2:]] == [{"result": "accept: xanadu/3"}, {"result": "accept: yellow/3"}]
    for tag in ("A", "B"):
        logs = [e.data["message"] for e in events[tag] if e.type == "tool_progress_delta" and e.data["stage"] == "log"]
        assert logs == [f"working on step {n} for {tag}" for n in (1, 2, 3)], (tag, logs)
    for tag in ("X", "Y"):
        assert [e.type for e in events[tag]].count("input_required") == 1


def test_over_stdio_several_calls_in_flight_ask_nobody(tmp_path: Path) -> None:
    """stdio carries nothing that ties a server's request to a call: with two in flight, the
    question is declined (log lines then go to the engine's log, never to the wrong run)."""
    servers = {"mcpServers": {"fx": {"command": sys.executable, "args": [FIXTURE]}}}
    root = write(tmp_path, {"tools.yaml": "tools:\n  local:\n    type: fetch\n    description: A local tool.\n",
                            "config/mcp.yaml": json.dumps(servers)})
    engine = Engine.from_dir(root)
    slow_events: list[Any] = []

    async def approve(tool: Any, args: dict[str, Any], call_id: str) -> bool:
        return True

    async def together() -> list[Any]:
        return await asyncio.gather(engine.call_tool("fx_slow", {"steps": 10, "tag": "S"}, on_event=slow_events.append),
                                    engine.call_tool("fx_ask", {}, approve=approve))

    try:
        slow, asked = asyncio.run(together())
    finally:
        engine.close()
        registry.close_all()
    assert slow.error is None and asked.data == {"result": "decline: -"}
    logs = [e.data["message"] for e in slow_events if e.type == "tool_progress_delta" and e.data["stage"] == "log"]
    assert all(text.endswith(" for S") for text in logs)
