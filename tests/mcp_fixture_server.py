"""An MCP server written with the `mcp` SDK (MCPServer, once FastMCP), run as a subprocess by
tests/mcp/test_mcp_client.py: progress, log messages, cancellation, images, isError, a crash
mid-call, list_changed, elicitation, and what environment it was given.

(No tests here; run as `python tests/mcp_fixture_server.py`, stdio, or with `http PORT`.)
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("fixture")
MARKER = os.environ.get("FIXTURE_MARKER", "")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
async def slow(steps: int, ctx: Context, tag: str = "") -> str:
    """Count to `steps`, reporting progress and logging each step (with `tag`, to tell calls apart)."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
        await ctx.info(f"working on step {step}{f' for {tag}' if tag else ''}")
        await asyncio.sleep(0.05)
    return f"counted to {steps}"


@server.tool()
async def wait_forever() -> str:
    """Never answers; notes its own cancellation in FIXTURE_MARKER."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        if MARKER:
            Path(MARKER).write_text("cancelled")
        raise
    return "unreachable"


@server.tool()
def picture() -> list[types.TextContent | types.ImageContent]:
    """A caption and a 1x1 PNG."""
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    return [types.TextContent(type="text", text="a dot"), types.ImageContent(type="image", data=png, mime_type="image/png")]


class Sum(BaseModel):
    total: int


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two numbers (structured output)."""
    return Sum(total=a + b)


@server.tool()
def fail() -> str:
    """Always fails with a message."""
    raise ValueError("the fixture failed on purpose")


@server.tool()
def crash() -> str:
    """Kills the server mid-call."""
    os._exit(3)


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds a tool named `late` and says so (tools/list_changed)."""
    server.add_tool(lambda: "late tool here", name="late", description="Added while running.")
    await ctx.session.send_tool_list_changed()
    return "grown"


class Color(BaseModel):
    color: str = "blue"
    shade: int = 3


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks the user for a colour (elicitation)."""
    answer = await ctx.elicit("Which colour?", Color)
    return f"{answer.action}: {f'{answer.data.color}/{answer.data.shade}' if answer.action == 'accept' else '-'}"


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model to summarize `text` (sampling); says who answered, or why not."""
    try:
        answer = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"Summarize: {text}"))],
            max_tokens=100, system_prompt="Be brief.")
    except Exception as exc:  # noqa: BLE001 - the client declined: say so
        return f"declined: {exc}"
    content = answer.content if not isinstance(answer.content, list) else answer.content[0]
    return f"{answer.model} said: {getattr(content, 'text', '')}"


@server.tool()
def env_probe() -> dict:
    """What of the environment this process was given."""
    print("fixture stderr line with token " + os.environ.get("FIXTURE_TOKEN", "none"), file=sys.stderr, flush=True)
    return {"planted": os.environ.get("PLANTED_PARENT_SECRET", "absent"), "token": os.environ.get("FIXTURE_TOKEN", "absent")}


@server.tool()
def whoami(ctx: Context) -> str:
    """Over HTTP: whether the Authorization header is the one FIXTURE_EXPECT_TOKEN names (never echoed)."""
    request = ctx.request_context.request
    header = request.headers.get("authorization", "") if request is not None else ""
    return "authorized" if header and header == "Bearer " + os.environ.get("FIXTURE_EXPECT_TOKEN", "-") else "refused"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
