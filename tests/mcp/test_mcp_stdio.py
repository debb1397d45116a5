"""`skillyard mcp`: the real process over stdio, driven by the official MCP SDK's client."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from mcp import Client  # noqa: E402
from server_helpers import write_project  # noqa: E402


def _mcp_command() -> list[str]:
    """`skillyard mcp` once engine/cli/main.py registers it; until then the same code via its module."""
    from engine.cli import main as cli

    try:
        cli.main(["mcp", "--help"])
    except SystemExit as exit:
        if exit.code == 0:
            return [sys.executable, "-c", "import sys; from engine.cli.main import main; sys.exit(main())", "mcp"]
    return [sys.executable, "-m", "engine.cli.serve", "mcp"]


def _server(root: Path, *extra: str) -> StdioServerParameters:
    command = _mcp_command()
    return StdioServerParameters(command=command[0], args=[*command[1:], "--dir", str(root), *extra],
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=str(root))


@pytest.mark.slow
def test_tools_list_call_progress_errors_and_confirmation_over_stdio(tmp_path: Path) -> None:
    import mcp_types as types

    root = write_project(tmp_path)
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> Any:  # the user's answer: yes for Bo, no otherwise
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": '"Bo"' in params.message})

    async def main_client() -> None:
        async with Client(_server(root), elicitation_callback=elicit, mode="legacy") as client:
            listed = await client.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert list(tools) == ["echo", "guarded", "slow"]  # enabled and allowed only
            assert tools["echo"].input_schema["required"] == ["name"]
            assert tools["echo"].description == "Return the name and count it was given."

            ok = await client.call_tool("echo", {"name": "Ada", "count": 2})
            assert ok.is_error is False
            assert json.loads(ok.content[0].text) == {"name": "Ada", "count": 2}
            assert ok.structured_content == {"name": "Ada", "count": 2}

            progress: list[tuple[float, str | None]] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, message))

            slow = await client.call_tool("slow", {"seconds": 0.25}, progress_callback=on_progress)
            assert slow.is_error is False
            messages = [m or "" for _, m in progress]
            assert any(m.startswith("nap: slept 1 of 5") for m in messages), messages  # the skill's own words
            assert any("step 1 of 1 started" in m for m in messages)
            assert [v for v, _ in progress] == sorted(v for v, _ in progress)

            bad = await client.call_tool("echo", {"count": 0})
            assert bad.is_error is True
            text = bad.content[0].text
            assert text.startswith("[echo failed: invalid_arguments]") and "/count" in text

            with pytest.raises(MCPError) as unknown:  # the spec's protocol error (see test_mcp_hardening.py)
                await client.call_tool("nope", {})
            assert unknown.value.code == -32602 and "echo" in unknown.value.message
            disabled = await client.call_tool("retired", {"name": "x"})
            assert disabled.is_error is True and "tool_disabled" in disabled.content[0].text

            approved = await client.call_tool("guarded", {"name": "Bo"})  # asked through elicitation
            assert approved.is_error is False, approved.content[0].text
            declined = await client.call_tool("guarded", {"name": "Eve"})
            assert declined.is_error is True and "confirmation_denied" in declined.content[0].text
            assert len(asked) == 2 and "guarded" in asked[0]

    asyncio.run(asyncio.wait_for(main_client(), 90))


def test_approve_all_answers_confirmations_itself(tmp_path: Path) -> None:
    """What `skillyard mcp --yes` does, on the same server object, connected in process."""
    from engine import Engine
    from engine.server.mcp_server import build_mcp_server

    engine = Engine.from_dir(write_project(tmp_path))

    async def main() -> None:
        async with Client(build_mcp_server(engine, approve_all=True)) as client:
            result = await client.call_tool("guarded", {"name": "Cy"})
            assert result.is_error is False and json.loads(result.content[0].text)["name"] == "Cy"
        async with Client(build_mcp_server(engine)) as client:  # nobody to ask in process: unavailable, not denied
            result = await client.call_tool("guarded", {"name": "Cy"})
            assert result.is_error is True and "approval_unavailable" in result.content[0].text

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        engine.close()
