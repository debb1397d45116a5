"""Issue 10 §15 and the MCP part of §6, against real processes: `skillyard mcp` (stdio) and
`skillyard serve` (/mcp over streamable HTTP), driven by the official MCP SDK client or by
raw JSON-RPC lines.

- cancellation ends the running call in every mode (the run is recorded `cancelled`);
- an approval the client cannot give fails `approval_unavailable`, not a fake denial;
  elicitation works where the client can answer;
- an unknown tool is the spec's protocol error (-32602) at every protocol version;
- malformed, too deep and surrogate-bearing lines on stdio get a JSON-RPC error, not silence.
"""

from __future__ import annotations

import asyncio
import json
import select
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from mcp import Client  # noqa: E402
from server_helpers import running_server, serve_command, write_project  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process or a server

MODES = ["legacy", "2026-07-28"]  # legacy: the initialize handshake, here 2025-11-25


def stdio(root: Path) -> StdioServerParameters:
    command = serve_command("mcp", "--dir", str(root))
    return StdioServerParameters(command=command[0], args=command[1:], cwd=str(root))


def runs(root: Path, name: str) -> list[tuple[str, str | None]]:
    """(status, error code) of each recorded run of tool `name`, oldest first."""
    with sqlite3.connect(root / ".skillyard" / "runs.db") as db:
        rows = db.execute("SELECT status, error FROM runs WHERE name = ? ORDER BY started_at", (name,)).fetchall()
    return [(status, json.loads(error)["code"] if error else None) for status, error in rows]


async def cancel_a_slow_call(target: Any, mode: str) -> float:
    async with Client(target, mode=mode) as client:
        await client.list_tools()  # the server is warm: the cancel reaches a running call
        started = time.monotonic()
        with anyio.move_on_after(1.0):
            await client.call_tool("slow", {"seconds": 6})
        return time.monotonic() - started


def wait_for_status(root: Path, name: str, timeout: float = 4.0) -> list[tuple[str, str | None]]:
    deadline = time.monotonic() + timeout
    while True:
        found = runs(root, name)
        if (found and found[-1][0] != "running") or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_cancelling_a_request_cancels_the_running_call(tmp_path: Path, transport: str, mode: str) -> None:
    root = write_project(tmp_path)
    if transport == "stdio":
        asyncio.run(cancel_a_slow_call(stdio(root), mode))
    else:
        with running_server(root, keys=None) as server:
            asyncio.run(cancel_a_slow_call(f"{server.url}/mcp", mode))
            recorded = wait_for_status(root, "slow")
    if transport == "stdio":
        recorded = runs(root, "slow")
    assert recorded == [("cancelled", "cancelled")], recorded  # not ("ok", None) six seconds later


async def approvals(target: Any, mode: str, elicit: Any) -> list[Any]:
    async with Client(target, mode=mode, elicitation_callback=elicit) as client:
        return [await client.call_tool("guarded", {"name": name}) for name in ("Bo", "Eve")]


def yes_for_bo(asked: list[str]) -> Any:
    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": '"Bo"' in params.message})
    return elicit


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_elicitation_works_where_the_client_can_answer(tmp_path: Path, transport: str) -> None:
    root = write_project(tmp_path)
    asked: list[str] = []
    if transport == "stdio":
        approved, declined = asyncio.run(approvals(stdio(root), "legacy", yes_for_bo(asked)))
    else:
        with running_server(root, keys=None) as server:
            approved, declined = asyncio.run(approvals(f"{server.url}/mcp", "legacy", yes_for_bo(asked)))
    assert approved.is_error is False, approved.content[0].text
    assert declined.is_error is True and "confirmation_denied" in declined.content[0].text  # a real no
    assert len(asked) == 2


@pytest.mark.parametrize("transport, mode, elicits", [
    ("stdio", "legacy", False),  # the client declares no elicitation capability
    ("stdio", "2026-07-28", True),  # it would answer, but 2026-07-28 has no server-to-client requests
    ("http", "2026-07-28", True),
])
def test_an_approval_nobody_can_give_is_approval_unavailable(tmp_path: Path, transport: str, mode: str, elicits: bool) -> None:
    root = write_project(tmp_path)
    elicit = yes_for_bo([]) if elicits else None

    async def call(target: Any) -> Any:
        async with Client(target, mode=mode, elicitation_callback=elicit) as client:
            return await client.call_tool("guarded", {"name": "Bo"})

    if transport == "stdio":
        result = asyncio.run(call(stdio(root)))
    else:
        with running_server(root, keys=None) as server:
            result = asyncio.run(call(f"{server.url}/mcp"))
    text = result.content[0].text
    assert result.is_error is True
    assert text.startswith("[guarded failed: approval_unavailable]"), text
    assert "approval needed: this client cannot answer elicitation" in text and "declined" not in text


@pytest.mark.parametrize("mode", MODES)
def test_unknown_tool_is_a_protocol_error(tmp_path: Path, mode: str) -> None:
    """MCP tools § Error Handling (2024-11-05 … 2026-07-28): unknown tools are JSON-RPC errors."""
    root = write_project(tmp_path)

    async def main() -> None:
        async with Client(stdio(root), mode=mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("nope", {})
            assert caught.value.code == -32602
            assert caught.value.message.startswith("Unknown tool: nope") and "echo" in caught.value.message
            bad = await client.call_tool("echo", {"count": 0})  # input validation stays a tool error
            assert bad.is_error is True and "invalid_arguments" in bad.content[0].text

    asyncio.run(asyncio.wait_for(main(), 60))


# ─── raw lines on stdio ─────────────────────────────────────────────────────────────────

DEEP = "[" * 2000 + "]" * 2000
BAD_LINES = {
    "malformed": ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{', None, -32700),
    "deep": ('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"name":' + DEEP + "}}}", 3, -32600),
    "surrogate": ('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"name":"\\ud800"}}}', 4, -32602),
    "nan": ('{"jsonrpc":"2.0","id":"five","method":"tools/call","params":{"name":"echo","arguments":{"name":"x","count":NaN}}}', "five", -32602),
    "huge-int": ('{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"name":"x","count":1' + "0" * 5000 + "}}}", 6, -32602),
}


def test_bad_lines_on_stdio_get_a_json_rpc_error(tmp_path: Path) -> None:
    root = write_project(tmp_path)
    process = subprocess.Popen(serve_command("mcp", "--dir", str(root)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=root)

    def send(message: str | dict[str, Any]) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert process.stdin is not None
        process.stdin.write(line.encode() + b"\n")
        process.stdin.flush()

    def receive(timeout: float = 20) -> dict[str, Any]:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        assert ready, "no answer: the client would hang"
        line = process.stdout.readline().decode()
        return json.loads(line, parse_constant=lambda token: pytest.fail(f"the server wrote {token}: not JSON"))

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        assert receive(60)["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":NaN}}')  # no answer owed
        for name, (line, request_id, code) in BAD_LINES.items():
            send(line)
            answer = receive()
            assert answer["id"] == request_id and answer["error"]["code"] == code, (name, answer)
        send({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "echo", "arguments": {"name": "ok"}}})
        still = receive()
        assert still["id"] == 10 and still["result"]["structuredContent"] == {"name": "ok", "count": 1}
    finally:
        process.kill()
        process.wait(10)
        assert process.stderr is not None
        stderr = process.stderr.read().decode(errors="replace")
        process.stdin.close()  # type: ignore[union-attr]
        process.stdout.close()  # type: ignore[union-attr]
        process.stderr.close()
    assert "Traceback" not in stderr, stderr[-2000:]
