"""Approving `confirm: true` tools from a terminal (run-workflow, skillyard chat)."""

from __future__ import annotations

import json
import sys
import threading
from typing import TYPE_CHECKING, Any

from .elicit_prompt import ask_fields

if TYPE_CHECKING:
    from ..runtime.run import Approver


async def _ask(question: str) -> str:
    """input() on a daemon thread: Ctrl-C while a question waits must not wait for Enter
    (asyncio.run joins its default executor's threads on the way out; not this one)."""
    import asyncio

    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        try:
            text = input(question)
        except Exception:  # noqa: BLE001 - no answer (EOF, closed terminal…) means no approval
            text = ""

        def deliver() -> None:
            if not answer.done():
                answer.set_result(text)

        try:
            loop.call_soon_threadsafe(deliver)
        except RuntimeError:  # the loop is gone: nobody waits for this answer any more
            pass

    threading.Thread(target=read, name="skillyard-approval", daemon=True).start()
    return await answer


def terminal_approver(*, approve_all: bool, stdin_is_input: bool = False) -> Approver:
    """`--yes` approves all; without a terminal (or when stdin carries the input) calls are
    denied; otherwise each call is asked on the terminal, one question at a time, so parallel
    calls never share a prompt line and each answer reaches its own tool_call_id. An MCP
    server's question for values is asked field by field at a terminal (even with `--yes`);
    with `--yes` and no terminal it takes the defaults."""
    import asyncio  # here, not at the top: the parsers (`--help`) import this module

    terminal = asyncio.Lock()

    async def approve(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool | dict[str, Any]:
        terminal_free = not stdin_is_input and sys.stdin.isatty()
        schema = getattr(tool, "requested_schema", None)  # an MCP server asking for values
        if isinstance(schema, dict) and terminal_free:
            async with terminal:
                return await ask_fields(tool.description, schema, _ask)
        if approve_all:
            return True  # a question for values: its defaults
        if not terminal_free:
            print(f"  {tool.name} ({tool_call_id}) needs confirmation; no terminal and no --yes: denied", file=sys.stderr)
            return False
        async with terminal:
            answer = await _ask(f"Allow {tool.name} ({tool_call_id}) with {json.dumps(args)[:200]}? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return approve
