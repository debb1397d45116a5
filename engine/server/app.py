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
tool disabled, not allowed or declined, 404 unknown tool or run (or another caller's run),
413 body or prompt too large, 422 invalid arguments, 429 too many live runs.

This module assembles the app: `Access` in front (peers, keys, body caps), then `DirectRoute`
(a tool call reaches its endpoint without the router), the routers of `routes/` (tools,
agent, runs, admin, MCP), error handlers, health and the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
from pathlib import Path
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._engine import Engine
from ..errors import ErrorCode
from ..logging import logger
from ..store import StoreError
from .access import Access, optional_principal
from .api import ApiError, ErrorResponse
from .auth import ApiKeys, load_api_keys
from .direct import DirectRoute
from .front import ServiceApp
from .hub import RunHub, TooManyRuns
from .observability import open_observability
from .replicas import Replicas
from .routes import admin, agent, batches, runs, sessions, tools
from .routes.mcp import mcp_route
from .service import Limits, Service

STATIC_DIR = Path(__file__).parent / "static"
RETRY_AFTER_S = 1  # a live run usually ends within seconds; clients should back off further on repeats


def create_app(
    engine: Engine,
    *,
    api_keys: Any = None,
    approval_timeout: float = 600.0,
    keep_finished: int | None = None,
    mcp: bool = True,
    max_body_bytes: int | None = None,
    title: str = "skillyard",
    metrics_port: int | None = None,
) -> FastAPI:
    """The service around `engine`, ready for uvicorn or to mount in another ASGI app.

    `keep_finished`: how many finished runs stay in memory for a replay; None: the hub's
    KEEP_FINISHED, or KEEP_FINISHED_WITH_STORE when the engine has a run store.

    `api_keys`: None reads `SKILLYARD_API_KEYS` (and the project's `server.api_keys`); or give
    `"alice:admin:KEY,bob:caller:KEY2"`, a list, a mapping, or an `ApiKeys`. With no keys at
    all, every request acts as admin and only loopback peers (and loopback Host/Origin
    headers) are answered. Limits come from `server:` in config/engine.yaml.

    When you mount this app inside another one, run its lifespan from yours
    (`async with app.router.lifespan_context(app): …`) so `/mcp` and shutdown work.
    """
    keys = api_keys if isinstance(api_keys, ApiKeys) else load_api_keys(api_keys, settings=engine.project.settings)
    service = Service(engine, _hub(engine, keep_finished, approval_timeout), keys, _limits(engine, max_body_bytes),
                      Replicas(engine))
    mcp_mount = mcp_route(service) if mcp else None
    observability = open_observability(engine, metrics_port=metrics_port)  # None (nothing imported) when off

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.hub.attach()
        service.replicas.start()
        try:
            yield
        finally:
            service.replicas.stop()
            if mcp_mount is not None:
                await mcp_mount[1].stop()
            await service.hub.detach()
            if observability is not None:
                observability.close()
        if engine.store is not None:
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(engine.store.flush)

    app = ServiceApp(
        title=title,
        version=_version(),
        description="Call the tools of a skillyard project over HTTP; follow runs as server-sent events.",
        lifespan=lifespan,
        docs_url=None,  # `_docs`: Swagger UI from the package's own files
        redoc_url=None,
        telemetry=_NO_FRAMEWORK_TELEMETRY,
    )
    app.state.engine = engine
    app.state.hub = service.hub
    app.state.api_keys = keys
    app.state.service = service  # the runs routes' handlers read it (routes/runs.py)
    _handle_errors(app)
    _health(app, service)
    tools_router = tools.router(service)
    for module_router in (tools_router, agent.router(service), runs.router(), batches.router(service), admin.router(service),
                          sessions.router(service)):
        app.include_router(module_router)
    if mcp_mount is not None:
        app.router.routes.append(mcp_mount[0])

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers=_PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    _docs(app)
    _document_security(app)
    def first_request() -> None:  # no-ops after the first: covers apps mounted without their lifespan
        service.hub.attach()
        service.replicas.start()

    app.add_middleware(DirectRoute, route=tools.call_route(tools_router), handlers=app.exception_handlers)  # inside Access
    app.add_middleware(Access, keys=keys, max_body_bytes=service.limits.max_body_bytes, on_request=first_request)
    if observability is not None:
        observability.install(app)  # outermost: the request span covers Access's refusals too
    app.state.observability = observability
    return app


# FastAPI's own OpenTelemetry instrumentation stays off: the service's spans and metrics are
# `observability` (configured by `telemetry:`/OTEL_*, redacted values only), while FastAPI's
# would record request bodies and exception messages to any globally configured provider —
# and it asks the OpenTelemetry API whether a provider is configured on every request.
_NO_FRAMEWORK_TELEMETRY: Any = {"tracing": False, "metrics": False, "logs": False, "auto_configure": False}


def _hub(engine: Engine, keep_finished: int | None, approval_timeout: float) -> RunHub:
    server = engine.project.settings.server
    return RunHub(engine, keep_finished=keep_finished, approval_timeout=approval_timeout,
                  max_live=server.max_live_runs, max_live_per_principal=server.max_live_runs_per_key)


def _limits(engine: Engine, max_body_bytes: int | None) -> Limits:
    server = engine.project.settings.server
    return Limits(
        max_body_bytes=server.max_body_bytes if max_body_bytes is None else max_body_bytes,
        max_prompt_chars=server.max_prompt_chars,
        max_live_runs=server.max_live_runs,
        max_live_runs_per_key=server.max_live_runs_per_key,
    )


_HTTP_CODES = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED, 413: ErrorCode.PAYLOAD_TOO_LARGE}


def _handle_errors(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return exc.response(headers)

    @app.exception_handler(TooManyRuns)
    async def _too_many(request: Request, exc: TooManyRuns) -> JSONResponse:
        return ApiError(ErrorCode.TOO_MANY_RUNS, exc.message).response({"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"pointer": "/" + "/".join(str(p) for p in e.get("loc", ())[1:]), "message": e.get("msg", ""), "in": (e.get("loc") or ["?"])[0]}
            for e in exc.errors()
        ]
        summary = "; ".join(f"{p['in']} {p['pointer']}: {p['message']}" for p in problems[:5])
        return ApiError(ErrorCode.INVALID_REQUEST, f"{len(problems)} problem(s): {summary}", errors=problems).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, ErrorCode.HTTP_ERROR)  # Starlette's own refusals (no route…), their status
        return ApiError(code, str(exc.detail), status=exc.status_code).response(getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("server: request failed", path=request.url.path)
        return ApiError(ErrorCode.SERVER_ERROR, f"{type(exc).__name__}: the server failed; see its log").response()


def _health(app: FastAPI, service: Service) -> None:
    engine, hub = service.engine, service.hub

    @app.get("/healthz", tags=["health"], summary="The process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Ready to run tools",
             description="`status` for anyone (a load balancer); the figures too for an admin key (or no keys at all).",
             responses={503: {"model": ErrorResponse}})
    async def readyz(request: Request) -> Any:
        principal = optional_principal(request)
        figures = principal is not None and principal.is_admin  # the operator's view, like /metrics
        project = engine.project
        if engine.store is not None:
            try:
                await asyncio.to_thread(engine.store.flush, 5.0)
            except StoreError as exc:
                why = str(exc) if figures else "the run store cannot be written; an admin key sees why"
                return ApiError(ErrorCode.STORE_UNAVAILABLE, why).response()
        status = "degraded" if project.broken else "ready"  # degraded: some tools cannot run (GET /v1/admin/problems)
        if not figures:
            return {"status": status}
        return {
            "status": status,
            "tools": sum(1 for t in project.tools.values() if t.enabled),
            "broken_tools": len(project.broken),
            "live_runs": hub.live_count(),
            "store": engine.store is not None,
            "store_write_failures": engine.store.write_failures if engine.store is not None else {},
            "auth": bool(service.keys),
        }


_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _docs(app: FastAPI) -> None:
    """`/docs`: Swagger UI from the package's own files (static/swagger/, swagger-ui-dist), so
    the page on the origin whose localStorage holds the API key loads nothing from another host
    and works offline. Started by static/docs.js rather than an inline script, so its CSP allows
    scripts from this origin only. Every URL carries the root path (mounted, or --root-path)."""
    title = html.escape(app.title)

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = html.escape(request.scope.get("root_path", "").rstrip("/"), quote=True)
        return HTMLResponse(_DOCS_PAGE.format(root=root, title=title), headers=_DOCS_HEADERS)


_DOCS_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} API</title>
<link rel="stylesheet" href="{root}/static/swagger/swagger-ui.css">
<link rel="icon" type="image/png" href="{root}/static/swagger/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{root}/openapi.json"></div>
<script src="{root}/static/swagger/swagger-ui-bundle.js"></script>
<script src="{root}/static/docs.js"></script>
</body>
</html>
"""

# Swagger UI sets styles from script and its CSS draws icons as data: images; it fetches only
# /openapi.json and, on "Try it out", the API itself.
_DOCS_HEADERS = {
    **_PAGE_HEADERS,
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
}


def _document_security(app: FastAPI) -> None:
    """Declare the two ways to present a key in /openapi.json, for every /v1 operation. (The
    check itself is the `Access` middleware: it runs before any body is read.)"""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            # servers: the root path FastAPI's /openapi.json route adds when the app is mounted or
            # served under --root-path, so /docs "Try it out" calls the API under its prefix.
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes,
                                 servers=app.servers or None)
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

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the schema


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("skillyard")
    except Exception:  # noqa: BLE001
        return "0"
