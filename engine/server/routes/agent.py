"""The agent loop over HTTP: SSE by default, the AgentResult with `Accept: application/json`."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..._engine import new_id
from ...errors import AgentSetupError, ErrorCode
from ...safety.untrusted import arguments_problem
from ..access import current_principal
from ..api import SSE_DOC, ApiError, error_responses, jsonable, store_call
from ..auth import Principal
from ..conversations import SESSION_ID_PATTERN, sessions_of
from ..live import finished_or_left, stream
from ..service import Service
from ..sse import wants_event_stream

if TYPE_CHECKING:
    from ...backends.temporal.agent_client import TemporalAgent
    from ...runtime.agent import Agent


class FunctionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: str = ""


class ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    type: Literal["function"] = "function"
    function: FunctionIn


class ChatMessageIn(BaseModel):
    """One message in the OpenAI chat format (runtime/turns.py checks that the calls and results match).
    Other fields an OpenAI message may carry back (`refusal`, `annotations`, `audio`…) are ignored."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def text(self) -> str:
        return (self.content or "") + "".join(c.function.arguments for c in self.tool_calls or ())


class AgentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: str | list[ChatMessageIn] = Field(description="A prompt, or the conversation so far.")
    model: str | None = Field(None, description="Model name from config/models.yaml (default: the project's).")
    tools: list[str] | None = Field(None, description="Subset of tools the model may call (default: all enabled).")
    enable_tools: bool = Field(True, description="False: the model answers without tools.")
    tool_choice: str = Field("auto", description="auto, none, required, or a tool name.")
    system: str | None = Field(None)
    session_id: str | None = Field(None, pattern=SESSION_ID_PATTERN, description="Continue this session of the caller's "
                                   "(created on first use; another caller's of the same name is another session): its "
                                   "history goes first, and the turn is kept. 409 session_busy while another turn of it runs.")
    # Limits: each defaults to config/engine.yaml's `agent:` section, and may only be lower.
    max_steps: int | None = Field(None, ge=1, description="Most model calls in the run (default: agent.max_steps).")
    max_parallel_tool_calls: int | None = Field(None, ge=1, description="Tool calls of one turn run at once.")
    tool_timeout: float | None = Field(None, gt=0, description="Seconds; caps every tool's own timeout.")
    total_timeout: float | None = Field(None, gt=0, description="Seconds of wall time for the whole run.")
    token_budget: int | None = Field(None, ge=1, description="Input + output tokens over the run.")
    max_repeated_calls: int | None = Field(None, ge=2, description="The same call this many times in a row stops the run.")
    max_result_chars: int | None = Field(None, ge=1, description="A tool result is cut to this many characters for the model.")
    max_history_tokens: int | None = Field(None, ge=1, description="The history is cut to about this many tokens, "
                                           "dropping the oldest whole turns.")
    output_schema: dict[str, Any] | None = Field(None, description="A JSON Schema the final answer must match "
                                                 "(JSON; `data` in the result holds it parsed). A wrong answer gets "
                                                 "repair turns, then the run stops with `invalid_output`.")
    background: bool = Field(False, description="Keep running if the client disconnects.")


def router(service: Service) -> APIRouter:
    engine, hub, limits = service.engine, service.hub, service.limits
    api = APIRouter()

    @api.post(
        "/v1/agent",
        tags=["agent"],
        summary="Run the agent loop; its events stream as SSE",
        description="Streams `agent_start` … `agent_done` (model text, tool calls and their steps, approvals "
        "needed). With `Accept: application/json` (and not text/event-stream) the AgentResult is returned instead. "
        "The prompt (all message contents and `system`) may hold at most `server.max_prompt_chars` characters; "
        "a string holding a lone UTF-16 surrogate is refused (422, naming its place).",
        responses={200: {"content": SSE_DOC, "description": "The event stream"}, **error_responses(404, 409, 413, 422, 429)},
    )
    async def agent(request: Request, body: AgentRequest = Body(...), principal: Principal = Depends(current_principal)) -> Any:
        from ...runtime.agent import AgentLimits, as_messages

        _check_untrusted(body)
        run_id = new_id("run")
        run_limits = _limits(body, AgentLimits.from_settings(engine.project.settings.agent))
        runner: Agent | TemporalAgent
        try:
            runner = engine.agent(body.model, tools=body.tools if body.enable_tools else [], tool_choice=body.tool_choice,
                                  limits=run_limits, system=body.system, approve=hub.approver(run_id),
                                  output_schema=body.output_schema)
        except AgentSetupError as exc:
            # 422 for each, unknown_tool too (not a call's 404): the request's body names what is missing
            raise ApiError(ErrorCode.named(exc.code), exc.message, status=422, **exc.details) from None
        if engine.backend is not None:  # serve --backend temporal: the loop runs as a workflow on the workers
            from ...backends.temporal.agent_client import agent_for

            runner = agent_for(engine, runner)
        _check_prompt_size(body, limits.max_prompt_chars)
        messages = body.messages if isinstance(body.messages, str) else [m.model_dump(exclude_none=True) for m in body.messages]
        try:
            parsed = as_messages(messages)
        except ValueError as exc:
            raise ApiError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        if not parsed or not any(m.content.strip() for m in parsed):
            raise ApiError(ErrorCode.INVALID_REQUEST, "messages is empty")
        if body.session_id is not None:  # take it now: busy is an answer, not a failed run
            await _take_session(service, body.session_id, run_id, principal)
        work = functools.partial(runner.run, parsed, run_id=run_id, principal=principal.name, session=body.session_id)
        try:
            run = hub.start(run_id, "agent", runner.model, work, principal=principal.name, background=body.background)
        except BaseException:
            if body.session_id is not None:
                sessions_of(service).release(body.session_id, run_id)
            raise
        if body.session_id is not None and run.task is not None:  # however the run ends (even cancelled before it began)
            run.task.add_done_callback(functools.partial(_let_go, service, body.session_id, run_id))
        accept = request.headers.get("accept") or ""
        if "application/json" in accept and not wants_event_stream(accept):
            if not await finished_or_left(request, run):
                return Response(status_code=499)
            if run.task is None or run.task.cancelled():
                raise ApiError(ErrorCode.CANCELLED, "the run was cancelled")
            return JSONResponse(jsonable(run.task.result().to_dict()), headers={"X-Run-Id": run_id})
        return stream(hub, run, 0, cancel_on_disconnect=True)

    return api


LIMIT_FIELDS = ("max_steps", "max_parallel_tool_calls", "tool_timeout", "total_timeout", "token_budget",
                "max_repeated_calls", "max_result_chars", "max_history_tokens")


def _let_go(service: Service, session_id: str, run_id: str, _task: Any) -> None:
    """The run's hold on its session ends with its task (a no-op once the turn was written)."""
    from ...store import StoreError

    try:
        sessions_of(service).release(session_id, run_id)
    except StoreError:  # the hold expires on its own
        pass


async def _take_session(service: Service, session_id: str, run_id: str, principal: Principal) -> None:
    """Take the caller's session for this run (the run takes it again, a no-op, and lets it go at
    its end): 409 `session_busy` while another turn holds it. A name is the caller's own: another
    caller's session of the same name is another session."""
    from ...errors import SessionError

    sessions = sessions_of(service)
    try:
        await store_call(lambda: sessions.begin(session_id, run_id, owner=principal.name))
    except SessionError as exc:
        raise ApiError(ErrorCode.named(exc.code), exc.message, session_id=session_id) from None


def _limits(body: AgentRequest, configured: Any) -> Any:
    """The run's limits: the configured ones, lowered where the request asks; asking for more is a 422
    (a caller holds an API key, not the project: the operator's limits bound every run)."""
    asked = {name: getattr(body, name) for name in LIMIT_FIELDS}
    over = configured.exceeded_by(asked)
    if over:
        raise ApiError(ErrorCode.INVALID_REQUEST, "; ".join(over))
    try:
        return configured.from_settings(configured, **asked)
    except ValueError as exc:
        raise ApiError(ErrorCode.INVALID_REQUEST, str(exc)) from None


def _check_untrusted(body: AgentRequest) -> None:
    """Refuse what a tool call's arguments may not hold either (engine.untrusted's one rule): a lone
    UTF-16 surrogate in any string (messages, system, model, tools…) can be neither sent to a model,
    recorded nor echoed in an error, so it is a 422 naming its place, not a failed run."""
    problem = arguments_problem(body.model_dump(exclude_defaults=True))  # C speed unless something is odd
    if problem is not None:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"the request cannot be accepted: {problem}", errors=[problem.as_dict()])


def _check_prompt_size(body: AgentRequest, limit: int) -> None:
    messages = [body.messages] if isinstance(body.messages, str) else [m.text() for m in body.messages]
    size = sum(len(text) for text in messages) + len(body.system or "")
    if size > limit:
        raise ApiError(ErrorCode.PROMPT_TOO_LARGE, f"the prompt holds {size:,} characters; this service accepts at most "
                       f"{limit:,} (server.max_prompt_chars)")
