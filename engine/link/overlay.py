"""Layer the store's tool settings over the YAML specs, before linking.

Overrides change `enabled` and merge `config` keys of a YAML tool; instances add whole tools
of a registered type. Everything is then linked exactly like YAML, so a bad stored config is
a ConfigError naming the tool, never a half-linked project. The tools of a tool source
(config/mcp.yaml's servers) are known only once linked: their `enabled` override is applied
to them then (`apply_to_source_tools`).
"""

from __future__ import annotations

import dataclasses

from pydantic import ValidationError

from ..errors import IssueCollector, Location
from ..spec.loader import Entry, LoadedSpecs
from ..spec.models import ToolSpec
from ..runtime.project import LinkedTool
from ..spec.yaml_source import SourceMap
from ..store.tool_settings import ToolSetting


def store_source(name: str) -> SourceMap:
    return SourceMap(f"store:tool_settings[{name}]")


def apply_tool_settings(specs: LoadedSpecs, settings: dict[str, ToolSetting], issues: IssueCollector) -> dict[str, ToolSetting]:
    """Layer `settings` over `specs`; returns the overrides of tools not in the YAML (perhaps a
    tool source's, applied by `apply_to_source_tools` once those are linked)."""
    unapplied: dict[str, ToolSetting] = {}
    for name, setting in settings.items():
        entry = specs.tools.get(name)
        if setting.is_instance:
            if entry is not None:
                issues.add(
                    entry.loc(key=True),
                    f"tool {name!r} is declared in YAML and also created in the store",
                    f"remove one of them (`skillyard tools remove {name}` removes the stored one)",
                )
                continue
            try:
                spec = ToolSpec(
                    description=setting.description or f"{setting.type} tool {name}",
                    type=setting.type,
                    config=setting.config,
                    enabled=True if setting.enabled is None else setting.enabled,
                )
            except ValidationError as exc:
                issues.add(Location(store_source(name).file), f"stored tool {name!r} is invalid: {exc.errors()[0]['msg']}", "fix it with `skillyard tools set`")
                continue
            specs.tools[name] = Entry(name, spec, store_source(name), ("tools", name))
        elif entry is not None:
            update: dict[str, object] = {}
            if setting.enabled is not None:
                update["enabled"] = setting.enabled
            if setting.config:
                update["config"] = {**entry.spec.config, **setting.config}
            if update:
                specs.tools[name] = Entry(name, entry.spec.model_copy(update=update), entry.source, entry.path)
        else:  # kept; it applies to nothing while no tool has the name
            unapplied[name] = setting
    return unapplied


def apply_to_source_tools(tools: dict[str, LinkedTool], settings: dict[str, ToolSetting]) -> dict[str, LinkedTool]:
    """A tool source's linked tools with the stored `enabled` overrides applied (they have no
    config of ours to override: the admin API refuses one)."""
    out = dict(tools)
    for name, setting in settings.items():
        tool = out.get(name)
        if tool is not None and setting.enabled is not None and tool.enabled != setting.enabled:
            out[name] = dataclasses.replace(tool, enabled=setting.enabled)
    return out
