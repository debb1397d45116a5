"""Layer the store's tool settings over the YAML specs, before linking.

Overrides change `enabled`, merge `config` keys (or replace the config whole, after an
admin's PUT) and set the other fields an admin may change (description, title, order,
parameters, confirm) of a YAML tool; instances add whole tools of a registered type.
Everything is validated and linked exactly like YAML, so a bad stored config is a
ConfigError naming the tool and the field, never a half-linked project. The tools of a tool
source (config/mcp.yaml's servers) are known only once linked: their `enabled` override is
applied to them then (`apply_to_source_tools`).
"""

from __future__ import annotations

import dataclasses

from pydantic import ValidationError

from ..errors import ConfigIssue, IssueCollector
from ..runtime.project import LinkedTool
from ..spec.loader import Entry, LoadedSpecs, report_pydantic_errors
from ..spec.models import ToolSpec
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
            raw = {"description": f"{setting.type} tool {name}", **setting.spec_fields(), "type": setting.type,
                   "config": setting.config, "enabled": True if setting.enabled is None else setting.enabled}
            spec = _validated(name, raw, issues)
            if spec is not None:
                specs.tools[name] = Entry(name, spec, store_source(name), ("tools", name))
        elif entry is not None:
            _override(specs, entry, setting, issues)
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


def _override(specs: LoadedSpecs, entry: Entry[ToolSpec], setting: ToolSetting, issues: IssueCollector) -> None:
    """The YAML tool with the stored fields over it, validated as the YAML was; errors name the stored row."""
    update: dict[str, object] = setting.spec_fields()
    if setting.enabled is not None:
        update["enabled"] = setting.enabled
    if setting.config or setting.config_whole:
        update["config"] = dict(setting.config) if setting.config_whole else {**entry.spec.config, **setting.config}
    if not update:
        return
    checked = _validated(entry.name, {"description": entry.spec.description, **update}, issues)
    if checked is not None:
        fields = {key: getattr(checked, key) for key in update}
        specs.tools[entry.name] = Entry(entry.name, entry.spec.model_copy(update=fields), entry.source, entry.path)


def tool_field_issues(name: str, raw: dict[str, object]) -> list[ConfigIssue]:
    """What is wrong with `raw` as tool `name`'s tools.yaml entry, each at its field (nothing linked yet)."""
    issues = IssueCollector()
    _validated(name, raw, issues)
    return issues.issues


def _validated(name: str, raw: dict[str, object], issues: IssueCollector) -> ToolSpec | None:
    """`raw` as a ToolSpec, by the model tools.yaml is read with; each error at its field."""
    try:
        return ToolSpec.model_validate(raw)
    except ValidationError as exc:
        report_pydantic_errors(exc.errors(), store_source(name), ("tools", name), raw, issues)
        return None
