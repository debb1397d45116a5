"""A call to an MCP server's tool, and what the server asks while it runs.

The call runs on the background loop; what reaches the run (progress, log messages, the
question of an elicitation) is handed to the caller's loop, where the Run lives. A server's
requests during a call (elicitation, sampling, log messages) name no call in the protocol;
which call they belong to is known where the transport knows it: Streamable HTTP sends them
on the stream of the call's own POST, and the SDK hands them to our callbacks in the context
the call wrote that POST from, so `_CALL` (set around each call) names it. Over stdio nothing
does: they belong to the one call in flight; with several, nobody can be asked (an
elicitation is declined, sampling refused, a log message goes to the engine's log).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from ...logging import logger
from ...runtime.context import CallContext
from ...spec.mcp_config import McpServerSpec
from .answers import answer_values


_CALL: contextvars.ContextVar[int | None] = contextvars.ContextVar("skillyard_mcp_call", default=None)
_KEYS = itertools.count(1)  # one sequence for every connection: a key names one call of this process


@dataclass(frozen=True)
class _InFlight:
    run: CallContext
    loop: asyncio.AbstractEventLoop


@dataclass(frozen=True)
class Asking:
    """What an approver is shown of a server asking for input (fits runtime.run.ToolToApprove);
    `requested_schema` tells a terminal or a page which values to ask for."""

    name: str
    description: str
    requested_schema: dict[str, Any]


class CallRouting:
    """The calls in flight on one connection, and the session-wide callbacks that reach them."""

    def __init__(self, server: str, spec: McpServerSpec):
        self.server = server
        self.spec = spec
        self.session: Any = None
        self._calls: dict[int, _InFlight] = {}

    def _call_asking(self) -> _InFlight | None:
        """The call a server's request or notification belongs to (module docstring), or None."""
        key = _CALL.get()
        if key is not None and key in self._calls:
            return self._calls[key]
        return next(iter(self._calls.values())) if len(self._calls) == 1 else None

    async def call(self, session: Any, tool: str, args: dict[str, Any], run: CallContext, loop: asyncio.AbstractEventLoop,
                   timeout: float | None) -> Any:
        """On the background loop: `tools/call` with progress forwarded; cancelled → notifications/cancelled (the SDK)."""
        key = next(_KEYS)
        self._calls[key] = _InFlight(run, loop)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            data = {"progress": done, **({"total": total} if total is not None else {})}
            text = message or (f"{done:g}/{total:g}" if total else f"{done:g}")
            loop.call_soon_threadsafe(lambda: run.tool_progress("progress", text, **data))

        token = _CALL.set(key)  # this task's context: what the SDK hands our callbacks for this call's stream
        try:
            return await session.call_tool(tool, args, read_timeout_seconds=timeout, progress_callback=progress)
        finally:
            _CALL.reset(token)
            del self._calls[key]

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        text = params.data if isinstance(params.data, str) else repr(params.data)
        target = self._call_asking()
        if target is None:
            logger.info("MCP server log message", server=self.server, level=params.level, message=text[:4000])
            return
        extra = {"level": params.level, **({"logger": params.logger} if params.logger else {})}
        target.loop.call_soon_threadsafe(lambda: target.run.tool_progress("log", text[:4000], **extra))

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult | types.ErrorData:
        target = self._call_asking()
        schema = getattr(params, "requested_schema", None)
        if target is None or schema is None:  # nobody to ask (or a URL elicitation, which needs a browser)
            return types.ElicitResult(action="decline")
        question = {"server": self.server, "message": params.message, "requested_schema": _plain(schema)}
        asked = asyncio.run_coroutine_threadsafe(ask_for_input(target.run, question), target.loop)
        answer = await asyncio.wrap_future(asked)
        if answer is False:
            return types.ElicitResult(action="decline")
        content, problems = answer_values(question["requested_schema"], answer if isinstance(answer, dict) else {})
        if problems:  # only an approver that did not check (HTTP answers are checked at the door)
            logger.warning("MCP elicitation answer does not fit the requested schema: declined", server=self.server,
                           problems="; ".join(f"{v.pointer or '/'}: {v.message}" for v in problems)[:1000])
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    async def sample(self, context: Any, params: Any) -> Any:
        """Sampling: declined unless the server's `sampling:` names a model (answered by it)."""
        target = self._call_asking()
        if self.spec.sampling is None or target is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="sampling is not enabled for this server")
        asked = asyncio.run_coroutine_threadsafe(sample_with_model(target.run, self.spec.sampling, params), target.loop)
        return await asyncio.wrap_future(asked)


async def ask_for_input(run: CallContext, question: dict[str, Any]) -> bool | dict[str, Any]:
    """An `input_required` event, answered like an approval (terminal, --yes, the approvals
    endpoint): False (declined), True (the defaults) or the values given."""
    run.run.emit("input_required", question, tool_call_id=run.tool_call_id)
    schema = question["requested_schema"]
    asking = Asking(run.tool, f"MCP server {question['server']!r} asks: {question['message']}", schema)
    return await run.run.ask_input(asking, question, run.tool_call_id, schema)


async def sample_with_model(run: CallContext, model: str, params: Any) -> Any:
    """A sampling request answered by one of the project's models (its text messages in, text out)."""
    from ...providers.base import ChatMessage, ModelRequest

    provider, spec = run.project.provider(model)
    messages = [ChatMessage(role="assistant" if m.role == "assistant" else "user", content=getattr(m.content, "text", "") or "")
                for m in params.messages]
    if params.system_prompt:
        messages.insert(0, ChatMessage(role="system", content=params.system_prompt))
    response = await provider.request(ModelRequest(messages=tuple(messages), model=spec.model, max_tokens=params.max_tokens))
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=response.text),
                                     model=spec.model or model)


def _plain(schema: Any) -> dict[str, Any]:
    dump = getattr(schema, "model_dump", None)
    return dump(mode="json", by_alias=True, exclude_none=True) if callable(dump) else dict(schema)
