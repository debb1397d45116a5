"""Changing tools at run time: enable/disable, config overrides, store-created instances.

A front door builds it around its Engine (`ToolAdmin(engine)`: `skillyard tools`, the
service's /v1/admin routes); the Engine itself knows nothing of it and only relinks.

Every change is written to the store and the project is linked again with it; if the new
project does not link (e.g. an invalid fetch config), the change is rolled back and refused
with the config problems in the message. YAML tools can be overridden but not deleted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
from typing import TYPE_CHECKING, Any

from .errors import ConfigError, ConfigIssue, ErrorCode, ToolAdminError
from .link.overlay import tool_field_issues
from .runtime.contracts import known_tool_types, tool_type
from .spec.models import TOOL_NAME_RE
from .spec.references import plain_secret_paths, references_in_strings, unlisted_references
from .store.tool_settings import ToolSetting

if TYPE_CHECKING:
    from ._engine import Engine
    from .runtime.project import Project
    from .runtime.result import ToolResult
    from .store import Store


class ToolAdmin:
    """`operator=True` (the CLI: who owns the host, its files and environment): the limits an
    admin key works within (`server.admin_private_networks`, `server.admin_references`) do not
    apply. The service's admin routes use the default."""

    def __init__(self, engine: "Engine", *, operator: bool = False):
        self.engine = engine
        self.operator = operator

    @property
    def store(self) -> "Store":
        if self.engine.store is None:
            raise ToolAdminError(ErrorCode.NO_STORE, "tool settings live in the run store; open the engine with store=True")
        return self.engine.store

    def settings(self) -> dict[str, ToolSetting]:
        return self.engine.store.tool_settings() if self.engine.store is not None else {}

    def views(self) -> list[dict[str, Any]]:
        """Every tool with where each setting comes from."""
        stored = self.settings()
        out = []
        for name, tool in self.engine.project.tools.items():
            setting = stored.get(name)
            source = "store" if setting is not None and setting.is_instance else "yaml"
            if tool.executor.kind == "mcp":
                source = f"mcp:{tool.config.get('server')}"  # config/mcp.yaml
            overrides: dict[str, Any] = {}
            if setting is not None and not setting.is_instance:
                if setting.enabled is not None:
                    overrides["enabled"] = setting.enabled
                if setting.config:
                    overrides["config"] = setting.config
            out.append(
                {
                    "name": name,
                    "title": tool.title,
                    "order": tool.order,
                    "source": source,
                    "type": tool.executor.kind,
                    "enabled": tool.enabled,
                    "description": tool.description,
                    "config": tool.config,
                    "overrides": {**overrides, **_override_fields(setting)},
                    "parameters": tool.parameters,
                    "confirm": tool.confirm,
                    "declared": {"description": tool.declared_description, "parameters": tool.declared_parameters},
                    **_times(setting),
                }
            )
        return out

    def view(self, name: str) -> dict[str, Any]:
        for item in self.views():
            if item["name"] == name:
                return item
        raise ToolAdminError(ErrorCode.UNKNOWN_TOOL, f"there is no tool named {name!r}")

    def update(self, name: str, *, enabled: bool | None = None, config: dict[str, Any] | None = None) -> dict[str, Any]:
        if name not in self.engine.project.tools:
            raise ToolAdminError(ErrorCode.UNKNOWN_TOOL, f"there is no tool named {name!r}")
        stored = self.settings()
        before = stored.get(name)
        base = before or ToolSetting(name)
        merged_config = {**base.config, **(config or {})}
        if config and self.engine.project.tools[name].executor.kind == "workflow":
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"tool {name!r} runs a workflow and has no config to override")
        if config and self.engine.project.tools[name].executor.kind == "mcp":
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"tool {name!r} is an MCP server's tool: set its server in config/mcp.yaml")
        if config:
            tool = self.engine.project.tools[name]
            self._check_code_type(tool.executor.kind, name)
            self._check_no_plain_secrets(name, config)
            self._check_operator_limits(name, tool.executor.kind, config, tool.config)
        after = dataclasses.replace(base, enabled=base.enabled if enabled is None else enabled, config=merged_config)
        self._apply(after, before)
        return self.view(name)

    def create(self, name: str, *, type: str, description: str, config: dict[str, Any], enabled: bool = True,
               **more: Any) -> dict[str, Any]:
        """A tool of a registered type kept in the store; `more`: title, order, parameters, confirm."""
        if not TOOL_NAME_RE.match(name):
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-'")
        if name in self.engine.project.tools:
            raise ToolAdminError(ErrorCode.EXISTS, f"a tool named {name!r} already exists")
        if type == "workflow" or type not in known_tool_types():
            usable = [t for t in known_tool_types() if t != "workflow"]
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"unknown tool type {type!r}; use one of: {', '.join(usable)}")
        self._check_code_type(type, name)
        fields = {**more, "type": type, "description": description or None, "config": dict(config), "enabled": enabled}
        self._apply(self._setting_from_fields(name, fields, None), None)
        return self.view(name)

    def types(self) -> list[dict[str, Any]]:
        """The tool types an admin may create here (code-running ones only with
        `server.allow_code_tools`), each with the JSON Schema of its config, for an editor's fields."""
        allow_code = self.engine.project.settings.server.allow_code_tools
        out = []
        for name in known_tool_types():
            kind = tool_type(name)
            if kind is None or name == "workflow" or (kind.runs_code and not allow_code):
                continue
            out.append({"name": name, "runs_code": kind.runs_code, "config_schema": kind.config_model.model_json_schema()})
        return out

    def replace(self, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        """PUT: the stored tool `name` (or the override of a YAML tool) replaced whole by `fields`
        (description, title, order, parameters, type, config, confirm, enabled), validated as
        tools.yaml is. A YAML tool's fields left out keep their YAML value; its type cannot change."""
        stored = self.settings()
        before = stored.get(name)
        if name not in self.engine.project.tools and before is None:
            raise ToolAdminError(ErrorCode.UNKNOWN_TOOL, f"there is no tool named {name!r}; create it with POST /v1/admin/tools")
        self._apply(self._setting_from_fields(name, fields, before), before)
        return self.view(name)

    def reset(self, name: str) -> dict[str, Any]:
        """"Reset to YAML": drop the stored override of a YAML tool (nothing stored: nothing to do)."""
        stored = self.settings().get(name)
        if stored is not None and stored.is_instance:
            raise ToolAdminError(ErrorCode.READ_ONLY, f"tool {name!r} was created in the store and has no YAML to reset to; delete it instead")
        if name not in self.engine.project.tools:
            raise ToolAdminError(ErrorCode.UNKNOWN_TOOL, f"there is no tool named {name!r}")
        if stored is not None:
            self.store.delete_tool_setting(name)
            self.engine.reload()
        return self.view(name)

    def draft_project(self, name: str, fields: dict[str, Any]) -> "Project":
        """The project as it would be with `fields` saved for tool `name`, linked but not stored or
        swapped in: for a "Test" run of an editor's draft. Switched on and asking no approval
        (the admin's click is the approval); refused like a save, errors at the field."""
        from .link.linker import load_project

        if not TOOL_NAME_RE.match(name):
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"invalid tool name {name!r}", {"name": ["use 1-64 letters, digits, '_' or '-'"]})
        stored = self.settings()
        draft = dataclasses.replace(self._setting_from_fields(name, fields, stored.get(name)), enabled=True, confirm=False)
        project = load_project(self.engine.project.root, tool_settings={**stored, name: draft}, isolate_broken_tools=True)
        issues = project.broken.get(name)
        if issues:
            raise _refused(name, issues, "the draft does not link")
        return project

    async def run_draft(self, name: str, fields: dict[str, Any], arguments: dict[str, Any]) -> "ToolResult":
        """Link the draft (`draft_project`) and call it once with `arguments`, in a throwaway engine
        without a store: nothing is saved, the running project is untouched."""
        from ._engine import Engine

        project = await asyncio.to_thread(self.draft_project, name, fields)
        engine = Engine.from_project(project)
        try:
            return await engine.call_tool(name, arguments)
        finally:
            engine.close()

    def _setting_from_fields(self, name: str, fields: dict[str, Any], before: ToolSetting | None) -> ToolSetting:
        """One admin's whole tool (PUT, a draft) as a stored setting: checked field by field first."""
        fields = {key: value for key, value in fields.items() if value is not None}
        yaml_tool = None if before is not None and before.is_instance else self.engine.project.tools.get(name)
        kind = fields.get("type")
        if yaml_tool is not None:
            if kind is not None and kind != yaml_tool.executor.kind:
                raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"tool {name!r} is declared in YAML as type {yaml_tool.executor.kind!r}",
                                     {"type": ["a YAML tool's type cannot be changed here; edit tools.yaml"]})
            kind = yaml_tool.executor.kind
        elif kind is None or kind == "workflow" or kind not in known_tool_types():
            usable = ", ".join(t for t in known_tool_types() if t != "workflow")
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"unknown tool type {kind!r}; use one of: {usable}", {"type": [f"use one of: {usable}"]})
        config = fields.get("config")
        if config is not None and (yaml_tool is None or config != yaml_tool.config):
            self._check_code_type(kind, name)
        if config is not None:
            self._check_no_plain_secrets(name, config)
            self._check_operator_limits(name, kind, config, yaml_tool.config if yaml_tool else {})
        raw = {"description": yaml_tool.declared_description if yaml_tool else f"{kind} tool {name}", **fields,
               **({"type": kind} if kind != "workflow" else {})}
        issues = tool_field_issues(name, raw)
        if issues:
            raise _refused(name, issues, "the tool is not valid")
        spec_fields = {key: fields.get(key) for key in ("title", "order", "parameters", "confirm")}
        return ToolSetting(name, None if yaml_tool else kind, fields.get("description"), fields.get("enabled"),
                           dict(config or {}), **spec_fields, config_whole=yaml_tool is not None and config is not None)

    def _check_code_type(self, type_name: str, name: str) -> None:
        """Creating or reconfiguring a tool that runs code is code execution on this host: opt-in only."""
        kind = tool_type(type_name)
        if kind is None or not kind.runs_code or self.engine.project.settings.server.allow_code_tools:
            return
        raise ToolAdminError(
            ErrorCode.CODE_TOOLS_DISABLED,
            f"tool {name!r} is of type {type_name!r}, which runs code on this host; creating or reconfiguring it "
            "through the admin API is off. Declare it in tools.yaml, or set `server.allow_code_tools: true` in "
            "config/engine.yaml (then an admin key means code execution on this host)",
        )

    def _check_no_plain_secrets(self, name: str, config: dict[str, Any]) -> None:
        """A secret stored in the store would be in every backup of it: only a reference may be."""
        paths = plain_secret_paths(config, self.engine.project.redactor.is_sensitive)
        if paths:
            raise ToolAdminError(
                ErrorCode.INVALID_CONFIG,
                f"tool {name!r}: {', '.join(f'config.{p}' for p in paths)} holds a plain value under a sensitive key; "
                "store a reference instead, such as ${env:NAME} (or \"Bearer ${env:NAME}\") or ${file:/run/secrets/name}, "
                "and set the secret in the environment, .env or the file",
            )

    def _check_operator_limits(self, name: str, kind: str, config: dict[str, Any], own: dict[str, Any]) -> None:
        """An admin key opens no private network and reads no secret the operator did not list
        (config/engine.yaml `server.admin_private_networks`, `server.admin_references`); what
        the YAML tool's own config (the operator's) already has may be given back."""
        if self.operator:
            return
        server = self.engine.project.settings.server
        registered = tool_type(kind)
        if registered is not None:
            allowed = [*server.admin_private_networks, *registered.private_networks(own)]
            outside = [n for n in registered.private_networks(config) if not _inside(n, allowed)]
            if outside:
                raise ToolAdminError(
                    ErrorCode.FORBIDDEN,
                    f"tool {name!r}: allowPrivateNetworks {', '.join(outside)} lies outside the private networks the operator "
                    f"lets an admin open ({', '.join(server.admin_private_networks) or 'none'}); list it in config/engine.yaml "
                    "`server.admin_private_networks`, or declare the tool in tools.yaml",
                    {"config.allowPrivateNetworks": ["outside server.admin_private_networks"]},
                )
        own_references = set(references_in_strings(own))
        unlisted = [r for r in unlisted_references(config, server.admin_references, self.engine.project.root)
                    if r not in own_references]
        if unlisted:
            raise ToolAdminError(
                ErrorCode.FORBIDDEN,
                f"tool {name!r}: {', '.join(unlisted)} is not a reference the operator lets an admin use "
                f"(server.admin_references: {', '.join(server.admin_references) or 'none'}); list it in config/engine.yaml "
                "`server.admin_references` (a glob such as env:PARTNER_*), or declare the tool in tools.yaml",
                {"config": ["a reference outside server.admin_references"]},
            )

    def delete(self, name: str) -> None:
        stored = self.settings().get(name)
        if stored is None or not stored.is_instance:
            if name in self.engine.project.tools:
                raise ToolAdminError(ErrorCode.READ_ONLY, f"tool {name!r} is declared in YAML; edit the YAML to remove it (or disable it)")
            raise ToolAdminError(ErrorCode.UNKNOWN_TOOL, f"there is no tool named {name!r}")
        self.store.delete_tool_setting(name)
        self.engine.reload()

    def _apply(self, after: ToolSetting, before: ToolSetting | None) -> None:
        store = self.store
        store.write_tool_setting(after)
        try:
            issues = self.engine.reload().broken.get(after.name)
        except ConfigError as exc:
            issues = exc.issues
        if issues:
            if before is None:
                store.delete_tool_setting(after.name)
            else:
                store.write_tool_setting(before)
            if self.engine.project.broken.get(after.name):
                self.engine.reload()  # the refused change is not kept, not even as a broken tool
            raise _refused(after.name, issues, "the change was not applied")


def _inside(network: str, allowed: list[str]) -> bool:
    """`network` (as an admin wrote it: a reference or a typo is inside nothing) lies inside one of `allowed`."""
    try:
        wanted = ipaddress.ip_network(network.strip(), strict=False)
    except ValueError:
        return False
    for item in allowed:
        try:
            outer = ipaddress.ip_network(item.strip(), strict=False)
        except ValueError:
            continue
        if wanted.version == outer.version and wanted.subnet_of(outer):  # type: ignore[arg-type]  # one family, by the version check: mypy narrows only by isinstance
            return True
    return False


def _refused(name: str, issues: "list[ConfigIssue]", what: str) -> ToolAdminError:
    """invalid_config with every problem, also by field ("config.url": the path under the tool's entry)."""
    problems = "; ".join(f"{i.message}" + (f" — {i.hint}" if i.hint else "") for i in issues[:5])
    fields: dict[str, list[str]] = {}
    prefix = f"tools.{name}"
    for issue in issues:
        path = issue.location.path
        field = path[len(prefix):].lstrip(".") if path.startswith(prefix) else ""
        fields.setdefault(field, []).append(issue.message + (f" — {issue.hint}" if issue.hint else ""))
    return ToolAdminError(ErrorCode.INVALID_CONFIG, f"{what}: {problems}", fields)


def _override_fields(setting: ToolSetting | None) -> dict[str, Any]:
    """The fields besides enabled/config a stored override of a YAML tool sets."""
    if setting is None or setting.is_instance:
        return {}
    return setting.spec_fields()


def _times(setting: ToolSetting | None) -> dict[str, Any]:
    """When a tool was created and last changed through the store (ms since the epoch; None for pure YAML)."""
    return {"created_at": setting.created_at if setting else None, "updated_at": setting.updated_at if setting else None}
