"""The HTTP/SSE service: `create_app(engine)` is an ASGI app (FastAPI) any front end can call.

Paths (kept stable for clients):

    GET    /v1/tools?format=openai|anthropic|mcp        enabled tools in that format
    POST   /v1/tools/{name}/call                        JSON body = arguments → ToolResult
                                                        (Accept: text/event-stream → the events)
    POST   /v1/agent                                    the agent loop, as SSE
    GET    /v1/runs · /v1/runs/{run_id}                 run history and detail
    GET    /v1/runs/{run_id}/events                     SSE replay, Last-Event-ID resume
    POST   /v1/runs/{run_id}/approvals/{tool_call_id}   {"approve": true|false}
    POST   /v1/runs/{run_id}/cancel
    GET|PATCH|DELETE /v1/admin/tools/{name} · GET|POST /v1/admin/tools · POST /v1/admin/reload
    /healthz · /readyz · /openapi.json · /mcp (MCP streamable HTTP) · / (the web page)

Every error body is `{"error": {"code", "message", …}}` — or, for a tool call, the ToolResult
itself, whose `error.code` is the router's. Status codes: 401 no or bad key, 403 wrong role,
tool disabled, not allowed or declined, 404 unknown tool or run, 422 invalid arguments.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, AsyncIterator, Literal

from fastapi import Body, Depends, FastAPI, Header, Path as PathParam, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .._engine import Engine, new_id
from ..errors import ConfigError
from ..logging import logger
from ..store import StoreError
from .auth import ApiKeys, Role, host_header_name, is_loopback_host, load_api_keys, loopback_origin, presented_key
from .hub import LiveRun, RunHub
from .mcp_mount import LazyMCP
from .sse import HEARTBEAT_S, EventStreamResponse, frame, parse_last_event_id, wants_event_stream

STATIC_DIR = Path(__file__).parent / "static"
MAX_BODY_BYTES = 1 << 20

# Router codes → HTTP status. A refused call is the client's problem (4xx); a call that ran
# and failed is the tool's (502, 504 for time). Unlisted codes (a tool type's own) → 502.
STATUS_OF_CODE: dict[str, int] = {
    "unknown_tool": 404,
    "not_allowed": 403,
    "tool_disabled": 403,
    "confirmation_denied": 403,
    "blocked": 403,
    "invalid_arguments": 422,
    "invalid_url": 422,
    "timeout": 504,
    "fetch_timeout": 504,
    "cancelled": 409,
}
ADMIN_STATUS: dict[str, int] = {"unknown_tool": 404, "read_only": 403, "code_tools_disabled": 403, "invalid_config": 422, "exists": 409, "no_store": 409}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **details: Any):
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return JSONResponse({"error": body}, status_code=self.status, headers=headers)


# ─── request and response shapes (for validation and /openapi.json) ─────────────────────


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


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


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str = Field(max_length=200_000)


class AgentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: str | list[ChatMessageIn] = Field(description="A prompt, or the conversation so far.")
    model: str | None = Field(None, description="Model name from config/models.yaml (default: the project's).")
    tools: list[str] | None = Field(None, description="Subset of tools the model may call (default: all enabled).")
    enable_tools: bool = Field(True, description="False: the model answers without tools.")
    tool_choice: str = Field("auto", description="auto, none, required, or a tool name.")
    system: str | None = Field(None, max_length=100_000)
    max_steps: int = Field(8, ge=1, le=50)
    background: bool = Field(False, description="Keep running if the client disconnects.")


class ApprovalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approve: bool


class ToolPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool | None = None
    config: dict[str, Any] | None = None


class ToolCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    type: str = Field(min_length=1, max_length=64)
    description: str = Field(min_length=1, max_length=10_000)
    config: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in ((401, "No API key, or an unknown one"), (403, "The key's role may not do this"))
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    texts = {404: "Not found", 409: "Conflict", 413: "Body too large", 422: "Invalid request", 501: "Not supported"}
    out = dict(_ERRORS)
    out.update({s: {"model": ErrorResponse, "description": texts.get(s, "Error")} for s in statuses})
    return out


_SSE_DOC = {"text/event-stream": {"schema": {"type": "string", "description": "id: seq / event: type / data: event JSON"}}}


# ─── the app ───────────────────────────────────────────────────────────────────────────


def create_app(
    engine: Engine,
    *,
    api_keys: Any = None,
    approval_timeout: float = 600.0,
    keep_finished: int = 256,
    mcp: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
    title: str = "skillyard",
) -> FastAPI:
    """The service around `engine`, ready for uvicorn or to mount in another ASGI app.

    `api_keys`: None reads `SKILLYARD_API_KEYS` (and the project's `server.api_keys`); or give
    `"admin:KEY,caller:KEY2"`, a list, a mapping, or an `ApiKeys`. With no keys at all, every
    request acts as admin and only loopback Host/Origin headers are accepted.

    When you mount this app inside another one, run its lifespan from yours
    (`async with app.router.lifespan_context(app): …`) so `/mcp` and shutdown work.
    """
    keys = api_keys if isinstance(api_keys, ApiKeys) else load_api_keys(api_keys, settings=engine.project.settings)
    hub = RunHub(engine, keep_finished=keep_finished, approval_timeout=approval_timeout)
    mcp_app = LazyMCP(engine, loopback_only=not keys) if mcp and _have("mcp") else None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        hub.attach()
        try:
            yield
        finally:
            if mcp_app is not None:
                await mcp_app.stop()
            await hub.detach()
        if engine.store is not None:
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(engine.store.flush)

    app = FastAPI(
        title=title,
        version=_version(),
        description="Call the tools of a skillyard project over HTTP; follow runs as server-sent events.",
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.engine = engine
    app.state.hub = hub
    app.state.api_keys = keys

    # ─── auth ──────────────────────────────────────────────────────────────────────────

    async def caller(request: Request) -> Role:  # the schemes are declared in /openapi.json by _document_security
        hub.attach()  # a no-op after the first request; covers apps mounted without their lifespan
        if not keys:
            return "admin"
        role = keys.role_of(presented_key(request.headers))
        if role is None:
            given = presented_key(request.headers) is not None
            raise ApiError(401, "unauthorized", "the API key is not valid" if given else
                           "an API key is required: send `Authorization: Bearer KEY` or `X-API-Key: KEY`")
        return role

    async def admin(role: Role = Depends(caller)) -> Role:
        if role != "admin":
            raise ApiError(403, "forbidden", "this needs an API key with the admin role")
        return role

    # ─── errors ────────────────────────────────────────────────────────────────────────

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return exc.response(headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"pointer": "/" + "/".join(str(p) for p in e.get("loc", ())[1:]), "message": e.get("msg", ""), "in": (e.get("loc") or ["?"])[0]}
            for e in exc.errors()
        ]
        summary = "; ".join(f"{p['in']} {p['pointer']}: {p['message']}" for p in problems[:5])
        return ApiError(422, "invalid_request", f"{len(problems)} problem(s): {summary}", errors=problems).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return ApiError(exc.status_code, code, str(exc.detail)).response(getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("server: request failed", path=request.url.path)
        return ApiError(500, "server_error", f"{type(exc).__name__}: the server failed; see its log").response()

    # ─── health ────────────────────────────────────────────────────────────────────────

    @app.get("/healthz", tags=["health"], summary="The process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Ready to run tools", responses={503: {"model": ErrorResponse}})
    async def readyz() -> Any:
        project = engine.project
        if engine.store is not None:
            try:
                await asyncio.to_thread(engine.store.flush, 5.0)
            except StoreError as exc:
                return ApiError(503, "store_unavailable", str(exc)).response()
        return {
            "status": "ready",
            "tools": sum(1 for t in project.tools.values() if t.enabled),
            "live_runs": hub.live_count(),
            "store": engine.store is not None,
            "auth": bool(keys),
        }

    # ─── tools ─────────────────────────────────────────────────────────────────────────

    @app.get("/v1/whoami", tags=["auth"], summary="The role of the presented key", responses=_errors())
    async def whoami(role: Role = Depends(caller)) -> dict[str, Any]:
        return {"role": role, "auth": bool(keys)}

    @app.get("/v1/models", tags=["tools"], summary="Models the agent may use", responses=_errors())
    async def models(role: Role = Depends(caller)) -> dict[str, Any]:
        project = engine.project
        return {"default": project.default_model, "models": sorted(project.models)}

    @app.get("/v1/tools", tags=["tools"], summary="The enabled tools, as a model API expects them", responses=_errors())
    async def list_tools(
        format: Literal["openai", "anthropic", "mcp"] = Query("openai"), role: Role = Depends(caller)
    ) -> list[dict[str, Any]]:
        return engine.tool_schemas(format)

    @app.post(
        "/v1/tools/{name}/call",
        tags=["tools"],
        summary="Call a tool: the JSON body is its arguments",
        description="Returns the ToolResult. With `Accept: text/event-stream` the call's events stream as SSE "
        "(`id:` seq, `event:` type, `data:` event JSON), ending with `tool_call_result` or `tool_call_error`; "
        "the run id is in the `X-Run-Id` header. A client that disconnects cancels the call unless `background=true`.",
        response_model=ToolResultModel,
        responses={
            200: {"content": _SSE_DOC, "description": "The tool ran and succeeded (or the event stream)"},
            **_errors(404, 413, 422),
            409: {"model": ToolResultModel, "description": "The call was cancelled"},
            502: {"model": ToolResultModel, "description": "The tool ran and failed"},
            504: {"model": ToolResultModel, "description": "The tool ran out of time"},
        },
        openapi_extra={"requestBody": {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}}},
    )
    async def call_tool(
        request: Request,
        name: str = PathParam(max_length=200),
        background: bool = Query(False, description="Keep running if the client disconnects"),
        model: str | None = Query(None, max_length=200, description="Use this model for every prompt skill"),
        role: Role = Depends(caller),
    ) -> Any:
        arguments = await _read_arguments(request, max_body_bytes)
        if model is not None and model not in engine.project.models:
            raise ApiError(422, "unknown_model", f"unknown model {model!r}; known: {', '.join(sorted(engine.project.models))}")
        run_id, call_id = new_id("run"), new_id("call")
        approve = hub.approver_for(run_id)

        async def work(run: LiveRun) -> Any:
            return await engine.call_tool(name, arguments, model=model, tool_call_id=call_id, run_id=run_id, approve=approve)

        run = hub.start(run_id, "tool", name, work, root_call=call_id, background=background)
        if wants_event_stream(request.headers.get("accept")):
            return _stream(hub, run, 0, cancel_on_disconnect=True)
        if not await _finished_or_left(request, run):
            return Response(status_code=499)  # nobody is listening; the status is for the access log
        if run.task is None or run.task.cancelled():
            raise ApiError(409, "cancelled", "the call was cancelled")
        result = run.task.result()
        status = 200 if result.ok else STATUS_OF_CODE.get(result.error.code, 502)
        return JSONResponse(_jsonable(result.to_dict()), status_code=status, headers={"X-Run-Id": run_id})

    # ─── agent ─────────────────────────────────────────────────────────────────────────

    @app.post(
        "/v1/agent",
        tags=["agent"],
        summary="Run the agent loop; its events stream as SSE",
        description="Streams `agent_start` … `agent_done` (model text, tool calls and their steps, approvals "
        "needed). With `Accept: application/json` (and not text/event-stream) the AgentResult is returned instead.",
        responses={200: {"content": _SSE_DOC, "description": "The event stream"}, **_errors(422)},
    )
    async def agent(request: Request, body: AgentRequest = Body(...), role: Role = Depends(caller)) -> Any:
        from ..agent import AgentLimits, as_messages

        project = engine.project
        model = body.model or project.default_model
        if model not in project.models:
            raise ApiError(422, "unknown_model", f"unknown model {model!r}; known: {', '.join(sorted(project.models))}")
        tools: list[str] | None = body.tools
        if tools is not None:
            unknown = sorted(set(tools) - set(project.tools))
            if unknown:
                raise ApiError(422, "unknown_tool", f"unknown tool(s) {', '.join(unknown)}", available_tools=sorted(project.tools))
        if not body.enable_tools:
            tools = []
        if body.tool_choice not in ("auto", "none", "required") and body.tool_choice not in project.tools:
            raise ApiError(422, "invalid_request", "tool_choice must be auto, none, required or a tool name")
        messages = body.messages if isinstance(body.messages, str) else [m.model_dump() for m in body.messages]
        try:
            parsed = as_messages(messages)
        except ValueError as exc:
            raise ApiError(422, "invalid_request", str(exc)) from None
        if not parsed or not any(m.content.strip() for m in parsed):
            raise ApiError(422, "invalid_request", "messages is empty")
        run_id = new_id("run")
        runner = engine.agent(model, tools=tools, limits=AgentLimits(max_steps=body.max_steps),
                              tool_choice=body.tool_choice, system=body.system, approve=hub.approver_for(run_id))

        async def work(run: LiveRun) -> Any:
            return await runner.run(parsed, run_id=run_id)

        run = hub.start(run_id, "agent", model, work, background=body.background)
        accept = request.headers.get("accept") or ""
        if "application/json" in accept and not wants_event_stream(accept):
            if not await _finished_or_left(request, run):
                return Response(status_code=499)
            if run.task is None or run.task.cancelled():
                raise ApiError(409, "cancelled", "the run was cancelled")
            return JSONResponse(_jsonable(run.task.result().to_dict()), headers={"X-Run-Id": run_id})
        return _stream(hub, run, 0, cancel_on_disconnect=True)

    # ─── runs ──────────────────────────────────────────────────────────────────────────

    @app.get("/v1/runs", tags=["runs"], summary="Recent runs, newest first", responses=_errors())
    async def list_runs(
        tool: str | None = Query(None, max_length=200, description="Only runs of this tool (or agent model)"),
        status: Literal["running", "ok", "error", "cancelled", "interrupted"] | None = Query(None),
        since_ms: int | None = Query(None, ge=0, le=10**14, description="Only runs started at or after (ms since epoch)"),
        limit: int = Query(50, ge=1, le=500),
        role: Role = Depends(caller),
    ) -> list[dict[str, Any]]:
        store = engine.store
        if store is None:
            runs = [r.summary() for r in reversed(hub.runs.values())]
            runs = [r for r in runs if (tool is None or r["name"] == tool) and (status is None or r["status"] == status)
                    and (since_ms is None or r["started_at"] >= since_ms)]
            return runs[:limit]

        def read() -> list[dict[str, Any]]:
            store.flush()
            return [record.to_dict() for record in store.runs(tool=tool, status=status, since_ms=since_ms, limit=limit)]

        records = await _store_call(read)
        for record in records:
            live = hub.runs.get(record["id"])
            record["live"] = bool(live and not live.done)
            record["pending_approvals"] = live.summary()["pending_approvals"] if live else []
        return _jsonable(records)

    @app.get("/v1/runs/{run_id}", tags=["runs"], summary="One run (an unambiguous id prefix works too)", responses=_errors(404, 409))
    async def get_run(run_id: str = PathParam(max_length=200), role: Role = Depends(caller)) -> dict[str, Any]:
        live = hub.runs.get(run_id)
        store = engine.store
        if store is not None:

            def read() -> tuple[Any, list[dict[str, Any]]]:
                store.flush()
                record = store.run(run_id)
                return record, (store.tool_logs(run_id=record.id, limit=500) if record is not None else [])

            record, logs = await _store_call(read, ambiguous=True)
            if record is not None:
                live = live or hub.runs.get(record.id)
                out = {**record.to_dict(), "tool_calls": list(reversed(logs))}
                out["live"] = bool(live and not live.done)
                out["pending_approvals"] = live.summary()["pending_approvals"] if live else []
                out["last_seq"] = live.last_seq if live else None
                return _jsonable(out)
        if live is None:
            raise ApiError(404, "unknown_run", f"there is no run {run_id!r}")
        return _jsonable({**live.summary(), "input": None, "output": live.result, "last_seq": live.last_seq})

    @app.get(
        "/v1/runs/{run_id}/events",
        tags=["runs"],
        summary="A run's events as SSE; resumes after Last-Event-ID",
        description="Replays the run's events with seq greater than `Last-Event-ID` (or `after`), then, while the run "
        "is live, follows it to its end. With `Accept: application/json` (not text/event-stream) returns the list "
        "recorded so far. Closing the stream never cancels the run.",
        responses={200: {"content": _SSE_DOC, "description": "The events"}, **_errors(404)},
    )
    async def run_events(
        request: Request,
        run_id: str = PathParam(max_length=200),
        after: int = Query(0, ge=0, le=10**12, description="Only events with a greater seq"),
        last_event_id: str | None = Header(None, alias="Last-Event-ID", max_length=40),
        role: Role = Depends(caller),
    ) -> Any:
        after = max(after, parse_last_event_id(last_event_id))
        accept = request.headers.get("accept") or ""
        as_json = "application/json" in accept and not wants_event_stream(accept)
        live = hub.runs.get(run_id)
        if live is not None:
            if as_json:
                return _jsonable(live.events[after:])
            return _stream(hub, live, after, cancel_on_disconnect=False)
        store = engine.store
        if store is None:
            raise ApiError(404, "unknown_run", f"there is no run {run_id!r}")

        def read() -> list[dict[str, Any]] | None:
            store.flush()
            events = store.events(run_id, after_seq=after)
            if not events and store.run(run_id) is None:
                return None
            return events

        events = await _store_call(read, ambiguous=True)
        if events is None:
            raise ApiError(404, "unknown_run", f"there is no run {run_id!r}")
        if as_json:
            return _jsonable(events)

        async def frames() -> AsyncIterator[bytes | None]:
            for event in events:
                yield frame(event)

        return EventStreamResponse(frames(), headers={"X-Run-Id": run_id})

    @app.post(
        "/v1/runs/{run_id}/approvals/{tool_call_id}",
        tags=["runs"],
        summary="Answer a pending confirmation of one tool call",
        responses=_errors(404, 409, 422),
    )
    async def approve(
        body: ApprovalRequest,
        run_id: str = PathParam(max_length=200),
        tool_call_id: str = PathParam(max_length=200),
        role: Role = Depends(caller),
    ) -> dict[str, Any]:
        outcome = hub.resolve(run_id, tool_call_id, body.approve)
        if outcome == "unknown_run":
            raise ApiError(404, "unknown_run", f"run {run_id!r} is not live in this server")
        if outcome == "not_pending":
            raise ApiError(409, "not_pending", f"no confirmation is pending for call {tool_call_id!r} of run {run_id!r} "
                                               "(answered already, timed out, or never asked)")
        return {"run_id": run_id, "tool_call_id": tool_call_id, "approved": body.approve}

    @app.post("/v1/runs/{run_id}/cancel", tags=["runs"], summary="Cancel a live run", responses=_errors(404, 409))
    async def cancel(run_id: str = PathParam(max_length=200), role: Role = Depends(caller)) -> dict[str, Any]:
        live = hub.runs.get(run_id)
        if live is None:
            raise ApiError(404, "unknown_run", f"run {run_id!r} is not live in this server")
        if not hub.cancel(run_id):
            raise ApiError(409, "not_running", f"run {run_id!r} is not running or was not started here")
        return {"run_id": run_id, "cancelled": True}

    # ─── admin ─────────────────────────────────────────────────────────────────────────

    admin_lock = asyncio.Lock()  # one change at a time: each relinks the project

    def admin_api(method: str) -> Any:
        function = getattr(engine, method, None)
        if function is None:
            raise ApiError(501, "not_supported", f"this engine has no tool administration (Engine.{method})")
        return function

    def project_view(name: str) -> dict[str, Any]:
        tool = engine.project.tools.get(name)
        if tool is None:
            return {}
        return {"name": name, "source": "yaml", "type": tool.executor.kind, "enabled": tool.enabled,
                "description": tool.description, "config": {}, "overrides": {}, "parameters": tool.parameters,
                "confirm": tool.confirm, "permitted": engine.project.policy.permits(name)}

    def settings_list() -> list[dict[str, Any]]:
        function = getattr(engine, "tool_settings", None)
        if function is None:
            return [project_view(name) for name in engine.project.tools]
        return [{**project_view(entry["name"]), **entry} for entry in _admin_call(function)]

    @app.get("/v1/admin/tools", tags=["admin"], summary="Every tool (enabled or not), where it comes from", responses=_errors())
    async def admin_list(role: Role = Depends(admin)) -> list[dict[str, Any]]:
        return _jsonable(settings_list())

    @app.get("/v1/admin/tools/{name}", tags=["admin"], summary="One tool's settings", responses=_errors(404))
    async def admin_get(name: str = PathParam(max_length=200), role: Role = Depends(admin)) -> dict[str, Any]:
        for entry in settings_list():
            if entry.get("name") == name:
                return _jsonable(entry)
        raise ApiError(404, "unknown_tool", f"there is no tool named {name!r}")

    @app.patch("/v1/admin/tools/{name}", tags=["admin"], summary="Enable, disable or override a tool's config",
               responses=_errors(404, 409, 422, 501))
    async def admin_patch(body: ToolPatch, name: str = PathParam(max_length=200), role: Role = Depends(admin)) -> dict[str, Any]:
        update = admin_api("update_tool")
        async with admin_lock:
            entry = await asyncio.to_thread(_admin_call, update, name, enabled=body.enabled, config=body.config)
        return _jsonable({**project_view(name), **(entry or {})})

    @app.post("/v1/admin/tools", tags=["admin"], summary="Create a tool of a registered type (kept in the store)",
              status_code=201, responses=_errors(409, 422, 501))
    async def admin_create(body: ToolCreate, role: Role = Depends(admin)) -> dict[str, Any]:
        create = admin_api("create_tool")
        async with admin_lock:
            entry = await asyncio.to_thread(_admin_call, create, body.name, type=body.type, description=body.description,
                                            config=body.config, enabled=body.enabled)
        return _jsonable({**project_view(body.name), **(entry or {})})

    @app.delete("/v1/admin/tools/{name}", tags=["admin"], summary="Delete a tool created through the API",
                status_code=204, responses=_errors(403, 404, 409, 501))
    async def admin_delete(name: str = PathParam(max_length=200), role: Role = Depends(admin)) -> Response:
        delete = admin_api("delete_tool")
        async with admin_lock:
            await asyncio.to_thread(_admin_call, delete, name)
        return Response(status_code=204)

    @app.post("/v1/admin/reload", tags=["admin"], summary="Load the project files again and swap them in",
              responses=_errors(422))
    async def admin_reload(role: Role = Depends(admin)) -> dict[str, Any]:
        try:
            async with admin_lock:
                project = await asyncio.to_thread(engine.reload)
        except ConfigError as exc:
            raise ApiError(422, "config_error", f"{len(exc.issues)} problem(s); the running project is unchanged",
                           issues=[str(issue) for issue in exc.issues]) from None
        return {"ok": True, "summary": project.summary()}

    # ─── MCP, the page ─────────────────────────────────────────────────────────────────

    if mcp_app is not None:
        app.router.routes.append(Route("/mcp", endpoint=_KeyGuard(mcp_app, keys, hub), include_in_schema=False))

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=_PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    _document_security(app)
    if not keys:
        app.add_middleware(LoopbackOnly)
    return app


_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


# ─── helpers ─────────────────────────────────────────────────────────────────────────────


def _document_security(app: FastAPI) -> None:
    """Declare the two ways to present a key in /openapi.json, for every /v1 operation. (The
    check itself is one plain dependency: cheaper per request than FastAPI's security classes.)"""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {})["securitySchemes"] = {
                "HTTPBearer": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <API key>"},
                "APIKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "The API key"},
            }
            for path, operations in schema.get("paths", {}).items():
                if path.startswith("/v1/"):
                    for operation in operations.values():
                        operation["security"] = [{"HTTPBearer": []}, {"APIKeyHeader": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("skillyard")
    except Exception:  # noqa: BLE001
        return "0"


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _jsonable(value: Any) -> Any:
    """What json.dumps(default=str) makes of it: data from tools may hold any object."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


async def _read_arguments(request: Request, limit: int) -> str | None:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "payload_too_large", f"the arguments may be at most {limit} bytes")
    body = await request.body()
    if len(body) > limit:
        raise ApiError(413, "payload_too_large", f"the arguments may be at most {limit} bytes")
    if not body.strip():
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(422, "invalid_arguments", "the body is not UTF-8 JSON") from None


async def _finished_or_left(request: Request, run: LiveRun) -> bool:
    """Wait for the run's task; False if the client disconnected first (the run is then
    cancelled, unless it asked to run in the background)."""
    assert run.task is not None
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((run.task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if run.task.done():
        return True
    if not run.background:
        run.task.cancel()
    return False


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _stream(hub: RunHub, run: LiveRun, after: int, *, cancel_on_disconnect: bool) -> EventStreamResponse:
    def on_close(client_left: bool) -> None:
        if client_left and cancel_on_disconnect and not run.background:
            hub.cancel(run.run_id)

    return EventStreamResponse(run.follow(after, heartbeat=HEARTBEAT_S), on_close=on_close, headers={"X-Run-Id": run.run_id})


async def _store_call(read: Any, *, ambiguous: bool = False) -> Any:
    try:
        return await asyncio.to_thread(read)
    except StoreError as exc:
        if ambiguous and "matches several runs" in str(exc):
            raise ApiError(409, "ambiguous_run_id", str(exc)) from None
        raise ApiError(503, "store_unavailable", str(exc)) from None


def _admin_call(function: Any, *args: Any, **kwargs: Any) -> Any:
    from .. import errors

    admin_error = getattr(errors, "ToolAdminError", None)
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        if admin_error is None or not isinstance(exc, admin_error):
            raise
        code = getattr(exc, "code", "invalid_config")
        message = getattr(exc, "message", None) or str(exc)
        raise ApiError(ADMIN_STATUS.get(code, 400), code, message) from None


class _KeyGuard:
    """Puts the API key check in front of a raw ASGI app (the MCP endpoint)."""

    def __init__(self, app: ASGIApp, keys: ApiKeys, hub: RunHub):
        self.app, self.keys, self.hub = app, keys, hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.hub.attach()
            if self.keys:
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
                if self.keys.role_of(presented_key(headers)) is None:
                    await ApiError(401, "unauthorized", "an API key is required for /mcp").response(
                        {"WWW-Authenticate": "Bearer"})(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class LoopbackOnly:
    """With no API keys: answer only requests addressed to a loopback name, and refuse
    cross-site requests (an `Origin` that is not loopback), so a web page can neither reach
    the service through DNS rebinding nor drive it with a form post."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = origin = None
            for key, value in scope.get("headers", []):
                if key == b"host":
                    host = value.decode("latin-1")
                elif key == b"origin":
                    origin = value.decode("latin-1")
            if host is not None and not is_loopback_host(host_header_name(host)):
                await ApiError(403, "host_not_allowed", "no API keys are configured, so this server answers only "
                               "requests to a loopback address (set SKILLYARD_API_KEYS to serve others)").response()(scope, receive, send)
                return
            if origin is not None and not loopback_origin(origin):
                await ApiError(403, "origin_not_allowed", "no API keys are configured, so cross-site requests "
                               "are refused").response()(scope, receive, send)
                return
        await self.app(scope, receive, send)
