"""Layer the store's tool settings over the YAML specs, before linking.

Overrides change `enabled` and merge `config` keys of a YAML tool; instances add whole tools
of a registered type. Everything is then linked exactly like YAML, so a bad stored config is
a ConfigError naming the tool, never a half-linked project.
"""

from __future__ import annotations

from pydantic import ValidationError

from ..errors import IssueCollector, Location
from ..spec.loader import Entry, LoadedSpecs
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
        # An override of a tool no longer in the YAML is kept but has nothing to apply to.
