"""A tool of an MCP server as a skillyard tool executor, and what its results become."""

from __future__ import annotations

import asyncio
from typing import Any

from ...errors import ErrorCode, StepFailure
from ...runtime.context import CallContext
from .connection import McpConnection


class McpToolExecutor:
    """Calls one tool of one server; the router has done every check before."""

    kind = "mcp"

    def __init__(self, connection: McpConnection, tool: str):
        self.connection = connection
        self.tool = tool

    async def execute(self, args: dict[str, Any], run: CallContext) -> Any:
        conn = self.connection
        session = conn.session
        if session is None:
            raise StepFailure(ErrorCode.CONFIG_ERROR, f"MCP server {conn.name!r} is not available: {conn.reason or conn.state}",
                              {"server": conn.name, "state": conn.state})
        loop = asyncio.get_running_loop()
        try:
            result = await conn.run(conn.routing.call(session, self.tool, args, run, loop, None))
        except (asyncio.CancelledError, StepFailure):  # StepFailure: past the run's event cap (limit_exceeded)
            raise
        except Exception as exc:  # noqa: BLE001 - the MCP boundary: every failure becomes a StepFailure
            raise _translate(conn, exc) from None
        return tool_data(conn.name, result)


def _translate(conn: McpConnection, exc: Exception) -> StepFailure:
    text = str(exc) or type(exc).__name__
    if "closed" in text.lower() or isinstance(exc, (ConnectionError, EOFError)):
        conn.connection_lost()
        return StepFailure(ErrorCode.EXECUTION_ERROR, f"MCP server {conn.name!r} went away during the call: {text}", {"server": conn.name})
    return StepFailure(ErrorCode.EXECUTION_ERROR, f"MCP server {conn.name!r}: {text}", {"server": conn.name})


def tool_data(server: str, result: Any) -> Any:
    """structuredContent when given (the SDK checked it against outputSchema), else the text as
    the data; images, audio and resources are kept as typed parts. isError → a failure."""
    parts = [content_part(item) for item in getattr(result, "content", None) or []]
    text = "\n".join(part["text"] for part in parts if part["type"] == "text")
    if getattr(result, "is_error", False):
        raise StepFailure(ErrorCode.EXECUTION_ERROR, text or f"the tool of MCP server {server!r} failed", {"server": server})
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    if all(part["type"] == "text" for part in parts):
        return text
    return {"content": parts}


def content_part(item: Any) -> dict[str, Any]:
    """One content block as plain JSON (`{"type": "image", "mimeType": …, "data": <base64>}`)."""
    part: dict[str, Any] = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    part.pop("_meta", None)
    part.pop("annotations", None)
    return part
