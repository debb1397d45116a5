"""Tools: list them, call one (JSON result or SSE), who am I, which models."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.types import Receive

from ..._engine import new_id
from ...errors import ErrorCode
from ..access import current_principal, request_headers, request_principal
from ..api import SSE_DOC, ApiError, error_responses, json_body
from ..auth import Principal
from ..live import AnnouncedStream, finished_or_left, stream
from ..raw import Answer, read_body
from ..service import Service
from ..sse import event_stream_wanted


class ToolErrorModel(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ToolResultModel(BaseModel):
    ok: bool
    tool: str
    run_id: str
    tool_call_id: str
    data: Any = None
    error: ToolErrorModel | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def router(service: Service) -> APIRouter:
    engine, hub, keys = service.engine, service.hub, service.keys
    api = APIRouter()

    @api.get("/v1/whoami", tags=["auth"], summary="The name and role of the presented key", responses=error_responses())
    async def whoami(principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        return {"name": principal.name, "role": principal.role, "auth": bool(keys)}

    @api.get("/v1/models", tags=["tools"], summary="Models the agent may use", responses=error_responses())
    async def models(principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        project = engine.project
        return {"default": project.default_model, "models": sorted(project.models)}

    @api.get("/v1/tools", tags=["tools"], summary="The enabled tools, as a model API expects them", responses=error_responses())
    async def list_tools(
        format: Literal["openai", "anthropic", "mcp"] = Query("openai"), principal: Principal = Depends(current_principal)
    ) -> list[dict[str, Any]]:
        return engine.tool_schemas(format)

    @api.get("/v1/tools/broken", tags=["tools"], summary="The tools whose configuration has problems (the others still serve)",
             description="One entry per broken tool the policy permits: its problems as `file:line:col: message — fix` "
             "text, and `serving`: true when it kept its last good version after a reload (it still runs), false when "
             "a call answers `config_error`.", responses=error_responses())
    async def broken_tools(principal: Principal = Depends(current_principal)) -> list[dict[str, Any]]:
        project = engine.project
        return project.redactor.hide_configured(  # the load hid what it read; the engine's keys too
            [{"name": name, "serving": name in project.tools, "problems": [str(issue) for issue in issues]}
             for name, issues in sorted(project.broken.items()) if project.policy.permits(name)])

    @api.post(
        CALL_PATH,
        tags=["tools"],
        summary="Call a tool: the JSON body is its arguments",
        description="Returns the ToolResult. With `Accept: text/event-stream` the call's events stream as SSE "
        "(`id:` seq, `event:` type, `data:` event JSON), ending with `tool_call_result` or `tool_call_error`; "
        "the run id is in the `X-Run-Id` header. A client that disconnects cancels the call unless `background=true`.",
        response_model=ToolResultModel,
        responses={
            200: {"content": SSE_DOC, "description": "The tool ran and succeeded (or the event stream)"},
            **error_responses(404, 413, 422, 429),
            409: {"model": ToolResultModel, "description": "The call was cancelled"},
            502: {"model": ToolResultModel, "description": "The tool ran and failed"},
            504: {"model": ToolResultModel, "description": "The tool ran out of time"},
        },
        openapi_extra={
            "requestBody": {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}},
            "parameters": CALL_PARAMETERS,
        },
    )
    async def call_tool(request: Request) -> Any:
        # The parameters are read here rather than declared: FastAPI's per-request parameter
        # models and dependency solving cost more than the checks themselves (same checks, same 422).
        name, background, model = _call_parameters(request)
        principal = request_principal(request)
        arguments = await _read_arguments(request.receive)
        if model is not None and model not in engine.project.models:
            raise ApiError(ErrorCode.UNKNOWN_MODEL, f"unknown model {model!r}; known: {', '.join(sorted(engine.project.models))}")
        run_id, call_id = new_id("run"), new_id("call")

        streamed = event_stream_wanted(request_headers(request.scope).get(b"accept"))
        # Streamed on a crowded server: the call's first event goes out before its tool runs
        # (under a burst of calls, each caller hears its call began before the work queued
        # ahead of it is done). See ANNOUNCE_WHEN_LIVE for why not always.
        announce = streamed and hub.started_live >= ANNOUNCE_WHEN_LIVE
        work = functools.partial(engine.call_tool, name, arguments, model=model, tool_call_id=call_id, run_id=run_id,
                                 approve=hub.approver(run_id), principal=principal.name, announce_start=announce)
        run = hub.start(run_id, "tool", name, work, principal=principal.name, background=background)
        await asyncio.sleep(0)  # a turn of the loop: a call that never waits is done by then (an announced one has sent its start)
        if streamed:
            return AnnouncedStream(hub, run) if announce and not run.done else stream(hub, run, 0, cancel_on_disconnect=True)
        if not await finished_or_left(request, run):
            return Response(status_code=499)  # nobody is listening; the status is for the access log
        if run.task is None or run.task.cancelled():
            raise ApiError(ErrorCode.CANCELLED, "the call was cancelled")
        result = run.task.result().as_shown()  # as the SSE stream would have shown it
        status = 200 if result.ok else ErrorCode.call_status(result.error.code)  # 4xx refused, 502/504 failed
        return Answer(json_body(result.to_dict()), status, headers=((b"x-run-id", run_id.encode()),))

    return api


CALL_PATH = "/v1/tools/{name}/call"

# A streamed call announces itself (its `tool_call_start` frame sent alone, a turn of the loop
# before its tool runs) when this many runs the server started are live. Announcing costs a
# turn of the loop and a second write per answer, about 5 % of an SSE call's CPU (bench.service,
# at once: 10 SSE connections 0.58 with it, 0.61 without), and it only helps when work is queued
# ahead: a first event then waits for every run ahead of it (200 at once: 60 ms). With fewer
# runs live it waits for at most these few, about 5 ms for the shipped tools; and a call that
# waits (a model, a fetch, a threaded skill) streams its first events at that first wait anyway.
ANNOUNCE_WHEN_LIVE = 16


def call_route(api: APIRouter) -> APIRoute:
    """The call route of this module's router (for `DirectRoute`, which answers it without the router)."""
    return next(route for route in api.routes if isinstance(route, APIRoute) and route.path == CALL_PATH)


MAX_NAME = 200
CALL_PARAMETERS = [
    {"name": "name", "in": "path", "required": True, "schema": {"type": "string", "maxLength": MAX_NAME}},
    {"name": "background", "in": "query", "required": False, "schema": {"type": "boolean", "default": False},
     "description": "Keep running if the client disconnects"},
    {"name": "model", "in": "query", "required": False, "schema": {"type": "string", "maxLength": MAX_NAME},
     "description": "Use this model for every prompt skill"},
]
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


def _call_parameters(request: Request) -> tuple[str, bool, str | None]:
    """(name, background, model) of a call, checked as their declarations in CALL_PARAMETERS say."""
    name: str = request.scope["path_params"]["name"]
    problems = []
    if len(name) > MAX_NAME:
        problems.append(("path", "name", f"String should have at most {MAX_NAME} characters"))
    background = False
    model = None
    if request.scope["query_string"]:
        query = request.query_params
        flag = query.get("background")
        if flag is not None:
            background = flag.lower() in _TRUE
            if not background and flag.lower() not in _FALSE:
                problems.append(("query", "background", "Input should be a valid boolean, unable to interpret input"))
        model = query.get("model")
        if model is not None and len(model) > MAX_NAME:
            problems.append(("query", "model", f"String should have at most {MAX_NAME} characters"))
    if problems:
        summary = "; ".join(f"{where} /{what}: {message}" for where, what, message in problems)
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{len(problems)} problem(s): {summary}",
                       errors=[{"pointer": f"/{what}", "message": message, "in": where} for where, what, message in problems])
    return name, background, model


async def _read_arguments(receive: Receive) -> str | None:
    """The body as text (its size is capped by `Access` while it streams in)."""
    body = await read_body(receive)
    if not body.strip():
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(ErrorCode.INVALID_ARGUMENTS, "the body is not UTF-8 JSON") from None
