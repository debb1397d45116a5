"""A call to an MCP server's tool, and what the server asks while it runs.

The call runs on the background loop; what reaches the run (progress, log messages, the
question of an elicitation) is handed to the caller's loop, where the Run lives. A server's
requests during a call (elicitation, sampling, log messages) name no call in the protocol;
which call they belong to is known where the transport knows it: Streamable HTTP sends them
on the stream of the call's own POST, and the SDK hands them to our callbacks in the context
the call wrote that POST from, so `_CALL` (set around each call) names it. Over stdio nothing
does: they belong to the one call in flight; with several, nobody can be asked (an
elicitation is declined, sampling refused, a log message goes to the engine's log).

A server is untrusted: what it sends is cut to size (budgets.py), its events count against
the run's event cap, and its sampling requests are a few per call, each a model call of
the run that pays for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types

from ...errors import LimitExceeded
from ...logging import logger
from ...runtime.context import CallContext
from ...spec.mcp_config import McpServerSpec
from .answers import answer_values
from .budgets import cut, sampling_input_problem, sampling_max_tokens, schema_size_problem
from .loop import background_loop

T = TypeVar("T")


_CALL: contextvars.ContextVar[int | None] = contextvars.ContextVar("skillyard_mcp_call", default=None)
_KEYS = itertools.count(1)  # one sequence for every connection: a key names one call of this process


@dataclass
class _InFlight:
    """One call: its run (on `loop`), the background task that runs it, what stopped it, and
    how many sampling requests it made."""

    run: CallContext
    loop: asyncio.AbstractEventLoop
    task: "asyncio.Task[Any] | None"
    over: LimitExceeded | None = None
    sampled: int = 0


@dataclass(frozen=True)
class Asking:
    """What an approver is shown of a server asking for input (fits runtime.run.ToolToApprove);
    `requested_schema` tells a terminal or a page which values to ask for."""

    name: str
    description: str
    requested_schema: dict[str, Any]


class CallRouting:
    """The calls in flight on one connection, and the session-wide callbacks that reach them.

    What a server sends during a call becomes events of the call's run; the run's event cap
    (`limits.max_events_per_run`) holds a server too: past it the call is cancelled (the SDK
    sends `notifications/cancelled`) and fails `limit_exceeded`, and what still comes is dropped.
    """

    def __init__(self, server: str, spec: McpServerSpec):
        self.server = server
        self.spec = spec
        self.session: Any = None
        self._calls: dict[int, _InFlight] = {}
        self._sampling = 0  # sampling requests of this server in flight (on the background loop)

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
        call = self._calls[key] = _InFlight(run, loop, asyncio.current_task())

        async def progress(done: float, total: float | None, message: str | None) -> None:
            data = {"progress": done, **({"total": total} if total is not None else {})}
            text = cut(message) if message else (f"{done:g}/{total:g}" if total else f"{done:g}")
            _relay(call, "progress", text, data)

        token = _CALL.set(key)  # this task's context: what the SDK hands our callbacks for this call's stream
        try:
            return await session.call_tool(tool, args, read_timeout_seconds=timeout, progress_callback=progress)
        except asyncio.CancelledError:
            if call.over is not None:  # cancelled by us: the run went past its event cap
                raise call.over from None
            raise
        finally:
            _CALL.reset(token)
            del self._calls[key]

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        text = cut(params.data if isinstance(params.data, str) else repr(params.data))
        target = self._call_asking()
        if target is None:
            logger.info("MCP server log message", server=self.server, level=params.level, message=text)
            return
        _relay(target, "log", text, {"level": params.level, **({"logger": params.logger} if params.logger else {})})

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult | types.ErrorData:
        target = self._call_asking()
        schema = getattr(params, "requested_schema", None)
        if target is None or schema is None:  # nobody to ask (or a URL elicitation, which needs a browser)
            return types.ElicitResult(action="decline")
        question: dict[str, Any] = {"server": self.server, "message": cut(params.message), "requested_schema": _plain(schema)}
        too_big = schema_size_problem(question["requested_schema"])
        if too_big is not None:
            logger.warning("MCP elicitation declined: its requested schema is too big", server=self.server, problem=too_big)
            return types.ElicitResult(action="decline")
        answer = await _on_callers_loop(target, ask_for_input(target.run, question))
        if answer is None or answer is False:
            return types.ElicitResult(action="decline")
        content, problems = answer_values(question["requested_schema"], answer if isinstance(answer, dict) else {})
        if problems:  # only an approver that did not check (HTTP answers are checked at the door)
            logger.warning("MCP elicitation answer does not fit the requested schema: declined", server=self.server,
                           problems="; ".join(f"{v.pointer or '/'}: {v.message}" for v in problems)[:1000])
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    async def sample(self, context: Any, params: Any) -> Any:
        """Sampling: declined unless the server's `sampling:` names a model (answered by it), at
        most `sampling.max_requests` per call and in flight for the server, each request's
        messages at most `sampling.max_input_chars`."""
        target = self._call_asking()
        sampling = self.spec.sampling
        if sampling is None or target is None:
            return _refused("sampling is not enabled for this server")
        limit = sampling.max_requests
        if target.sampled >= limit:
            return _refused(f"this tool call made {limit} sampling requests, its limit (sampling.max_requests)")
        if self._sampling >= limit:
            return _refused(f"{limit} sampling requests of this server are in flight, its limit (sampling.max_requests)")
        too_big = sampling_input_problem(params, sampling.max_input_chars)
        if too_big is not None:
            return _refused(too_big)
        target.sampled += 1
        self._sampling += 1
        try:
            answer = await _on_callers_loop(target, sample_with_model(target.run, sampling.model, params, self.server,
                                                                      target.sampled))
        finally:
            self._sampling -= 1
        return _refused("the call is over its limits") if answer is None else answer


def _relay(call: _InFlight, stage: str, text: str, data: dict[str, Any]) -> None:
    """A `tool_progress_delta` of the call, from the background loop; dropped once the call is stopped."""
    if call.over is None:
        call.loop.call_soon_threadsafe(_progress_event, call, stage, text, data)


def _progress_event(call: _InFlight, stage: str, text: str, data: dict[str, Any]) -> None:
    if call.over is None:
        try:
            call.run.tool_progress(stage, text, **data)
        except LimitExceeded as exc:
            _stop(call, exc)


def _stop(call: _InFlight, exc: LimitExceeded) -> None:
    """Cancel the call on the server (the SDK sends notifications/cancelled): it fails with `exc`."""
    call.over = exc
    if call.task is not None:
        background_loop().call_soon_threadsafe(call.task.cancel)


async def _on_callers_loop(call: _InFlight, coroutine: Coroutine[Any, Any, T]) -> T | None:
    """`coroutine` on the loop the call's run lives on; None when it went past the run's event cap."""
    try:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, call.loop))
    except LimitExceeded as exc:
        _stop(call, exc)
        return None


def _refused(why: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=f"sampling refused: {why}")


async def ask_for_input(run: CallContext, question: dict[str, Any]) -> bool | dict[str, Any]:
    """An `input_required` event, answered like an approval (terminal, --yes, the approvals
    endpoint): False (declined), True (the defaults) or the values given."""
    run.run.emit("input_required", question, tool_call_id=run.tool_call_id)
    schema = question["requested_schema"]
    asking = Asking(run.tool, f"MCP server {question['server']!r} asks: {question['message']}", schema)
    return await run.run.ask_input(asking, question, run.tool_call_id, schema)


async def sample_with_model(run: CallContext, model: str, params: Any, server: str, attempt: int) -> Any:
    """A sampling request answered by one of the project's models (its text messages in, text
    out), at most the model's own `max_tokens`. It is a model call of the run: a
    `model_exchange` event with its usage and cost, added to the call's usage."""
    from ...providers.base import ChatMessage, ModelRequest, ProviderError, clean_response
    from ...providers.pricing import priced_response

    provider, spec = run.project.provider(model)
    messages = [ChatMessage(role="assistant" if m.role == "assistant" else "user", content=getattr(m.content, "text", "") or "")
                for m in params.messages]
    if params.system_prompt:
        messages.insert(0, ChatMessage(role="system", content=params.system_prompt))
    request = ModelRequest(messages=tuple(messages), model=spec.model, max_tokens=sampling_max_tokens(params.max_tokens, spec.max_tokens))
    try:
        response = await provider.request(request)
    except ProviderError as exc:
        return types.ErrorData(code=types.INTERNAL_ERROR, message=run.run.scrub_text(f"model {model!r} failed: {exc}"))
    response = priced_response(clean_response(response, model), spec.prices)
    run.usage = run.usage + response.usage
    run.run.emit("model_exchange", {
        "model": model, "attempt": attempt, "server": server, "max_tokens": request.max_tokens,
        "messages": [{"role": m.role, "content": m.content} for m in messages], "output_schema": False,
        "response": response.text, "usage": response.usage.as_dict(),
    }, tool_call_id=run.tool_call_id)
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=response.text),
                                     model=spec.model or model)


def _plain(schema: Any) -> dict[str, Any]:
    dump = getattr(schema, "model_dump", None)
    return dump(mode="json", by_alias=True, exclude_none=True) if callable(dump) else dict(schema)
