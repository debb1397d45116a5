"""Admin: every tool and where its settings come from; enable, override, create, replace (PUT),
reset to YAML, test a draft, delete; the tool types; reload.

The `Access` middleware lets only admin keys reach `/v1/admin/*`. Tool types that run code
are refused unless the project sets `server.allow_code_tools` (see `engine.tool_admin`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from fastapi import APIRouter, Depends
from fastapi import Path as PathParam
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from ...errors import ConfigError, ErrorCode, ToolAdminError
from ...tool_admin import ToolAdmin
from ..access import current_principal
from ..api import ApiError, error_responses, jsonable
from ..auth import Principal
from ..service import Service


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
    title: Any = None  # these are checked as tools.yaml's are (invalid_config, by field)
    order: Any = None
    parameters: Any = None
    confirm: Any = None


class ToolFields(BaseModel):
    """A whole tool as tools.yaml writes it. Loosely typed on purpose: the values are checked by
    the model tools.yaml is read with, so a mistake is `invalid_config` with `details.fields`."""

    model_config = ConfigDict(extra="forbid")
    description: Any = None
    title: Any = None
    order: Any = None
    parameters: Any = None
    type: Any = None
    config: Any = None
    confirm: Any = None
    enabled: Any = None


class ToolDraft(BaseModel):
    """A draft to link and call once: its name, its fields, and sample arguments."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=200)
    tool: ToolFields
    arguments: dict[str, Any] = Field(default_factory=dict)


def router(service: Service) -> APIRouter:
    engine = service.engine
    admin = ToolAdmin(engine)
    api = APIRouter(tags=["admin"])
    lock = asyncio.Lock()  # one change at a time: each relinks the project

    def project_view(name: str) -> dict[str, Any]:
        tool = engine.project.tools.get(name)
        if tool is None:
            return {}
        return {"name": name, "source": "yaml", "type": tool.executor.kind, "enabled": tool.enabled,
                "description": tool.description, "config": {}, "overrides": {}, "parameters": tool.parameters,
                "confirm": tool.confirm, "permitted": engine.project.policy.permits(name)}

    def settings_list() -> list[dict[str, Any]]:
        return [{**project_view(entry["name"]), **entry} for entry in _admin_call(admin, admin.views)]

    async def change(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async with lock:
            return await asyncio.to_thread(_admin_call, admin, function, *args, **kwargs)

    @api.get("/v1/admin/tools", summary="Every tool (enabled or not), where it comes from", responses=error_responses())
    async def admin_list(principal: Principal = Depends(current_principal)) -> list[dict[str, Any]]:
        return jsonable(settings_list())

    @api.get("/v1/admin/tools/{name}", summary="One tool's settings", responses=error_responses(404))
    async def admin_get(name: str = PathParam(max_length=200), principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        for entry in settings_list():
            if entry.get("name") == name:
                return jsonable(entry)
        raise ApiError(ErrorCode.UNKNOWN_TOOL, f"there is no tool named {name!r}")

    @api.patch("/v1/admin/tools/{name}", summary="Enable, disable or override a tool's config",
               responses=error_responses(403, 404, 409, 422))
    async def admin_patch(body: ToolPatch, name: str = PathParam(max_length=200),
                          principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        entry = await change(admin.update, name, enabled=body.enabled, config=body.config)
        return jsonable({**project_view(name), **(entry or {})})

    @api.post("/v1/admin/tools", summary="Create a tool of a registered type (kept in the store)",
              description="Types that run code (python, third-party types not declared `runs_code=False`) are refused "
              "with 403 `code_tools_disabled` unless config/engine.yaml sets `server.allow_code_tools: true`; private networks "
              "and references outside `server.admin_private_networks` / `server.admin_references` with 403 `forbidden`.",
              status_code=201, responses=error_responses(403, 409, 422))
    async def admin_create(body: ToolCreate, principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        entry = await change(admin.create, body.name, type=body.type, description=body.description,
                             config=body.config, enabled=body.enabled, title=body.title, order=body.order,
                             parameters=body.parameters, confirm=body.confirm)
        return jsonable({**project_view(body.name), **(entry or {})})

    editor_routes(api, admin, change, project_view)

    @api.delete("/v1/admin/tools/{name}", summary="Delete a tool created through the API",
                status_code=204, responses=error_responses(404, 409))
    async def admin_delete(name: str = PathParam(max_length=200), principal: Principal = Depends(current_principal)) -> Response:
        await change(admin.delete, name)
        return Response(status_code=204)

    @api.post("/v1/admin/reload", summary="Load the project files again and swap them in", responses=error_responses(422))
    async def admin_reload(principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        try:
            async with lock:
                project = await asyncio.to_thread(engine.reload)
        except ConfigError as exc:
            # 422, not a call's 503: the files the admin asked to load are at fault, not a running tool
            raise ApiError(ErrorCode.CONFIG_ERROR, f"{len(exc.issues)} problem(s); the running project is unchanged",
                           status=422, issues=engine.project.redactor.hide_configured([str(issue) for issue in exc.issues])) from None
        return {"ok": True, "summary": project.summary(), **problems_view(project)}

    @api.get("/v1/admin/problems", summary="What is wrong with the project: broken tools (still served: the others) "
             "with their problems, every problem, and load warnings")
    async def admin_problems(principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        return problems_view(engine.project)

    return api


def editor_routes(api: APIRouter, admin: ToolAdmin, change: Callable[..., Any], project_view: Callable[[str], dict[str, Any]]) -> None:
    """What the page's tool editor needs: replace a tool whole, reset it to its YAML, test a draft, the types."""

    @api.put("/v1/admin/tools/{name}", summary="Replace a tool whole (a stored tool, or a YAML tool's override)",
             description="Fields: description, title, order, parameters, type, config, confirm, enabled — checked as "
             "tools.yaml is; a refusal is 422 `invalid_config` with `details.fields` (`{\"config.url\": [problems]}`). "
             "For a YAML tool the stored override is replaced; fields left out keep their YAML value and `type` "
             "cannot change. `DELETE /v1/admin/tools/{name}/override` resets it to the YAML.",
             responses=error_responses(403, 404, 409, 422))
    async def admin_put(body: ToolFields, name: str = PathParam(max_length=200),
                        principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        entry = await change(admin.replace, name, body.model_dump(exclude_none=True))
        return jsonable({**project_view(name), **(entry or {})})

    @api.delete("/v1/admin/tools/{name}/override", summary="Reset a YAML tool to its YAML (drop the stored override)",
                responses=error_responses(404, 409))
    async def admin_reset(name: str = PathParam(max_length=200), principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        entry = await change(admin.reset, name)
        return jsonable({**project_view(name), **(entry or {})})

    @api.post("/v1/admin/tools/test", summary="Link a draft tool and call it once, without storing it",
              description="`{\"name\", \"tool\": {fields as for PUT}, \"arguments\": {…}}` → the call's ToolResult "
              "(200 whether the call succeeded or not). A draft that does not link is 422 `invalid_config` with "
              "`details.fields`; code-running types need `server.allow_code_tools` as for a save.",
              responses=error_responses(403, 422))
    async def admin_test(body: ToolDraft, principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        try:
            result = await admin.run_draft(body.name, body.tool.model_dump(exclude_none=True), body.arguments)
        except ToolAdminError as exc:
            raise _api_error(exc, admin.engine.project.redactor.hide_configured) from None
        return jsonable(result.as_shown().to_dict())  # as a call of the stored tool would answer

    @api.get("/v1/admin/tool-types", summary="The tool types an admin may create, with each one's config schema")
    async def admin_tool_types(principal: Principal = Depends(current_principal)) -> list[dict[str, Any]]:
        return jsonable(admin.types())


def problems_view(project: Any) -> dict[str, Any]:
    """Broken tools with their problems, every problem and every warning, as `file:line:col: …` text
    (the load hid the values it read by reference; the engine's own keys are hidden here too)."""
    return project.redactor.hide_configured({
        "broken_tools": {name: [str(issue) for issue in issues] for name, issues in sorted(project.broken.items())},
        "problems": [str(issue) for issue in project.problems],
        "warnings": [str(issue) for issue in project.warnings],
    })


def _admin_call(admin: ToolAdmin, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except ToolAdminError as exc:
        raise _api_error(exc, admin.engine.project.redactor.hide_configured) from None


def _api_error(exc: ToolAdminError, hide: Callable[[Any], Any]) -> ApiError:
    """The refusal, with its problems by field when it has them (`details.fields`); `hide`: the
    project's redactor's `hide_configured` (the engine's keys never in a body)."""
    details: dict[str, Any] = {"fields": hide(exc.fields)} if exc.fields else {}
    return ApiError(ErrorCode.named(exc.code), hide(exc.message), **details)
