"""Layer the store's tool settings over the YAML specs, before linking.

Overrides change `enabled`, merge `config` keys (or replace the config whole, after an
admin's PUT) and set the other fields an admin may change (description, title, order,
parameters, confirm) of a YAML tool; instances add whole tools of a registered type.
Everything is validated and linked exactly like YAML, so a bad stored config is a
ConfigError naming the tool and the field, never a half-linked project.
"""

from __future__ import annotations

from pydantic import ValidationError

from ..errors import ConfigIssue, IssueCollector
from ..spec.loader import Entry, LoadedSpecs, report_pydantic_errors
from ..spec.models import ToolSpec
from ..spec.yaml_source import SourceMap
from ..store.tool_settings import ToolSetting


def store_source(name: str) -> SourceMap:
    return SourceMap(f"store:tool_settings[{name}]")


def apply_tool_settings(specs: LoadedSpecs, settings: dict[str, ToolSetting], issues: IssueCollector) -> None:
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
        # An override of a tool no longer in the YAML is kept but has nothing to apply to.


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
