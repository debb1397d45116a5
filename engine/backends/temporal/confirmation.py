"""A direct call's confirmation on Temporal, front door side.

The router asks `RemoteTool.ask_confirmation` instead of asking in this process: the call's execution
starts at once with `confirm` set, and its workflow emits `confirmation_required` and waits for
the `approve` signal (approvals.py), so the question outlives this front door and every worker.
Meanwhile this front door relays the execution's events (the question first) and asks its own
Run, as locally: its approver (the terminal, `--yes`, MCP elicitation) or an answer given to
the Run in this process (`POST /v1/runs/{id}/approvals/{tool_call_id}` on this replica) goes
to the workflow as the signal. An answer given elsewhere reaches the workflow directly; this
side learns of it from the workflow (`ANSWER_QUERY`). A front door with nobody to ask leaves
the question open for the others (as an agent run's front door does).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Mapping

from ...runs.payloads import ConfirmationRequired
from .protocol import ANSWER_QUERY, APPROVE_SIGNAL

if TYPE_CHECKING:
    from ...runtime.context import CallContext
    from ...runtime.events import Event
    from ...runtime.project import LinkedTool
    from ...runtime.run import Run, ToolToApprove

ANSWER_POLL_S = 1.0  # how often the workflow is asked whether another front door answered


async def until_answered(handle: Any, follower: Any, run: "CallContext", tool: "LinkedTool",
                         args: dict[str, Any]) -> None:
    """Relay the execution's events (`follower`: client.Follower) until it has its answer (from
    here or elsewhere) or ended."""
    await follower.follow(asyncio.ensure_future(_answered(handle, run, tool, args)))


async def _answered(handle: Any, run: "CallContext", tool: "LinkedTool", args: dict[str, Any]) -> None:
    call_id = run.tool_call_id
    events = run.run
    asking = asyncio.ensure_future(events.ask_approval(tool, args, call_id)) if events.approver is not None else None
    ended = asyncio.ensure_future(handle.result())
    try:
        while True:
            waiting = {ended} if asking is None else {ended, asking}
            await asyncio.wait(waiting, timeout=ANSWER_POLL_S, return_when=asyncio.FIRST_COMPLETED)
            if ended.done():
                return
            if asking is not None and asking.done():
                await handle.signal(APPROVE_SIGNAL, args=[call_id, asking.result()])  # the first answer wins there
                return
            if await _answer_given(handle, call_id) is not None:
                return
    finally:
        for task in (asking, ended):
            if task is not None and not task.done():
                task.cancel()
        if ended.done() and not ended.cancelled():
            ended.exception()  # retrieved here; `execute` reads the execution's outcome itself


async def _answer_given(handle: Any, call_id: str) -> bool | None:
    """The answer the workflow took for the call; None: none yet, or no worker to say so now."""
    with contextlib.suppress(Exception):  # no worker up (all restarting), Temporal briefly away: ask again later
        async with asyncio.timeout(ANSWER_POLL_S * 5):
            return await handle.query(ANSWER_QUERY, call_id)
    return None


class Answers:
    """Asks this front door's approver about each confirmation it sees, and signals the answer
    (an agent run's, or one of an agent step inside a tool's call); notes the run's end (a client
    leaving after `agent_done` cancels nothing)."""

    def __init__(self, tools: "Mapping[str, ToolToApprove]", run: "Run", handle: Any) -> None:
        """`tools`: the project's, by name (what the approver is shown of the tool asking)."""
        self.tools = tools
        self.run = run
        self.handle = handle
        self.asking: dict[str, asyncio.Task[None]] = {}
        self.ended = False  # agent_done was relayed

    def heard(self, event: Event) -> None:
        call_id = event.tool_call_id
        if event.type == "agent_done":
            self.ended = True
        if event.type == "confirmation_required" and call_id and self.run.approver is not None:
            asked: ConfirmationRequired = event.data
            tool = self.tools.get(asked["tool"])
            if tool is not None and call_id not in self.asking:
                self.asking[call_id] = asyncio.ensure_future(self._ask(tool, asked["arguments"] or {}, call_id))
        elif event.type in ("tool_call_result", "tool_call_error") and call_id in self.asking:
            self.asking.pop(call_id).cancel()  # answered elsewhere (or timed out): stop asking here

    async def _ask(self, tool: "ToolToApprove", args: dict[str, Any], call_id: str) -> None:
        approved = await self.run.ask_approval(tool, args, call_id)
        await self.handle.signal(APPROVE_SIGNAL, args=[call_id, approved])

    def close(self) -> None:
        for task in self.asking.values():
            task.cancel()
