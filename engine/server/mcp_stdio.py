"""MCP over stdio, with a guard in front of the SDK's reader.

The SDK drops a line it cannot parse (and, for JSON nested deeper than its parser allows,
never learns the request id), so the client waits forever. Here each line is read first:

- not JSON at all → JSON-RPC error -32700 with id null (what JSON-RPC 2.0 prescribes);
- JSON the engine will not take (nested beyond the limit, a lone UTF-16 surrogate, NaN or
  Infinity, an integer of thousands of digits) → -32600, or -32602 when the problem is
  under `params`, answered with the request's own id so the waiting call ends;
- a notification with such a problem is dropped (a notification has no answer).

Error messages name the place and the reason; they never echo the offending value, so no
`NaN` token reaches the client.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..safety.untrusted import MAX_DEPTH, nesting_problem

if TYPE_CHECKING:
    from .._engine import Engine

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
MESSAGE_DEPTH = MAX_DEPTH + 4  # the envelope (params, arguments…) around tool arguments
_MAX_INT_DIGITS = 4000  # Python refuses more than 4,300 digits; say so before it does

Answer = Callable[[dict[str, Any]], Awaitable[None]]


def line_problem(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error response for a line the server cannot take, or None when it can."""
    if not line.strip():
        return None
    try:
        value = json.loads(line, parse_int=_bounded_int, parse_constant=lambda name: math.nan)
    except RecursionError:
        return _error(_top_level_id(line), INVALID_REQUEST, f"the message is nested more than {MESSAGE_DEPTH} levels deep")
    except ValueError as exc:  # JSONDecodeError, or text no JSON reader accepts
        return _error(None, PARSE_ERROR, f"Parse error: {str(exc)[:200]}")
    problem = nesting_problem(value, MESSAGE_DEPTH)
    if problem is None:
        return None
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(value, dict) and "id" not in value:
        return {}  # a notification: nothing to answer, nothing to forward
    code = INVALID_PARAMS if problem.startswith("/params") else INVALID_REQUEST
    problem = problem.replace(": inf is not a JSON number", ": the number is too large (or Infinity); send a finite number of at most 4,000 digits")
    return _error(request_id, code, f"the message cannot be accepted: {problem}")


def _bounded_int(text: str) -> float | int:
    return int(text) if len(text) <= _MAX_INT_DIGITS else math.inf  # inf: nesting_problem names the place


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    if not (isinstance(request_id, (str, int)) and not isinstance(request_id, bool)):
        request_id = None
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _top_level_id(line: str) -> Any:
    """The `id` member of the outermost object of valid JSON text too deep to parse (or None)."""
    depth, index, in_string, key_start = 0, 0, False, -1
    while index < len(line):
        char = line[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"':
                in_string = False
                if depth == 1 and line[key_start:index + 1] == '"id"' and line[index + 1:].lstrip().startswith(":"):
                    rest = line[index + 1:].lstrip()[1:].lstrip()
                    try:
                        found, _ = json.JSONDecoder().raw_decode(rest)
                    except ValueError:
                        return None
                    return found
        elif char == '"':
            in_string, key_start = True, index
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        index += 1
    return None


class CheckedLines:
    """The client's lines, minus those answered here (see the module docstring)."""

    def __init__(self, source: Any, answer: Answer):
        self.source, self.answer = source, answer

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self.source:
            response = line_problem(line)
            if response is None:
                yield line
            elif response:
                await self.answer(response)


@asynccontextmanager
async def _stdin_wire() -> AsyncIterator[Any]:
    """stdin as UTF-8 text lines; fd 0 points at the null device meanwhile, so a tool that
    reads stdin reads nothing instead of protocol bytes (as the SDK does for its own reader)."""
    import anyio

    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    text = open(wire, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115 - closed below
    try:
        yield anyio.wrap_file(text)
    finally:
        os.dup2(wire, 0)
        text.close()
        os.close(wire)


async def serve_stdio(engine: "Engine", *, approve_all: bool = False) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes them; every line is
    checked first, and one the server cannot take is answered with a JSON-RPC error."""
    import anyio
    import mcp_types as types
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    from .mcp_server import build_mcp_server

    server = build_mcp_server(engine, approve_all=approve_all)
    ready = anyio.Event()
    writer: list[Any] = []

    async def answer(response: dict[str, Any]) -> None:
        await ready.wait()
        message = types.JSONRPCError.model_validate(response)
        await writer[0].send(SessionMessage(message))

    async with _stdin_wire() as stdin:
        async with stdio_server(stdin=CheckedLines(stdin, answer)) as (read_stream, write_stream):  # type: ignore[arg-type]  # the lines as anyio's stream yields them
            writer.append(write_stream)
            ready.set()
            await server.run(read_stream, write_stream, server.create_initialization_options())
