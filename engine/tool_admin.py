"""Changing tools at run time: enable/disable, config overrides, store-created instances.

A front door builds it around its Engine (`ToolAdmin(engine)`: `skillyard tools`, the
service's /v1/admin routes); the Engine itself knows nothing of it and only relinks.

Every change is written to the store and the project is linked again with it; if the new
project does not link (e.g. an invalid fetch config), the change is rolled back and refused
with the config problems in the message. YAML tools can be overridden but not deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ConfigError, ErrorCode, ToolAdminError
from .runtime.contracts import known_tool_types, tool_type
from .spec.models import TOOL_NAME_RE
from .spec.references import plain_secret_paths
from .store.tool_settings import ToolSetting

if TYPE_CHECKING:
    from ._engine import Engine
    from .store import Store


class ToolAdmin:
    def __init__(self, engine: "Engine"):
        self.engine = engine

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
                    "source": source,
                    "type": tool.executor.kind,
                    "enabled": tool.enabled,
                    "description": tool.description,
                    "config": tool.config,
                    "overrides": overrides,
                    "parameters": tool.parameters,
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
            self._check_code_type(self.engine.project.tools[name].executor.kind, name)
            self._check_no_plain_secrets(name, config)
        after = ToolSetting(name, base.type, base.description, base.enabled if enabled is None else enabled, merged_config)
        self._apply(after, before)
        return self.view(name)

    def create(self, name: str, *, type: str, description: str, config: dict[str, Any], enabled: bool = True) -> dict[str, Any]:
        if not TOOL_NAME_RE.match(name):
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-'")
        if name in self.engine.project.tools:
            raise ToolAdminError(ErrorCode.EXISTS, f"a tool named {name!r} already exists")
        if type == "workflow" or type not in known_tool_types():
            usable = [t for t in known_tool_types() if t != "workflow"]
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"unknown tool type {type!r}; use one of: {', '.join(usable)}")
        self._check_code_type(type, name)
        self._check_no_plain_secrets(name, config)
        self._apply(ToolSetting(name, type, description, enabled, dict(config)), None)
        return self.view(name)

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
            problems = "; ".join(f"{i.message}" + (f" — {i.hint}" if i.hint else "") for i in issues[:5])
            raise ToolAdminError(ErrorCode.INVALID_CONFIG, f"the change was not applied: {problems}")
