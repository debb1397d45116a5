"""Tool settings kept in the store and layered over the YAML (seed 000's admin table).

A row either overrides a YAML tool (`enabled`, `config` keys) or, when it has a `type`,
declares a whole tool instance of a registered type (e.g. a second `fetch` tool). The YAML
stays the source of truth for everything a row does not set. Every backend reads and writes
them with the statements below (`Store.tool_settings`, `write_tool_setting`, `delete_tool_setting`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class ToolSetting:
    name: str
    type: str | None = None  # set: a tool instance created in the store
    description: str | None = None
    enabled: bool | None = None  # None: keep the YAML value
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def is_instance(self) -> bool:
        return self.type is not None


SELECT_SETTINGS = "SELECT name, type, description, enabled, config FROM tool_settings ORDER BY name"
UPSERT_SETTING = (
    "INSERT INTO tool_settings (name, type, description, enabled, config, created_at, updated_at) VALUES (?,?,?,?,?,?,?) "
    "ON CONFLICT(name) DO UPDATE SET type=excluded.type, description=excluded.description, "
    "enabled=excluded.enabled, config=excluded.config, updated_at=excluded.updated_at"
)
DELETE_SETTING = "DELETE FROM tool_settings WHERE name = ?"


def setting_from_row(row: Sequence[Any]) -> ToolSetting:
    name, type, description, enabled, config = row
    return ToolSetting(name, type, description, None if enabled is None else bool(enabled), json.loads(config or "{}"))


def setting_params(setting: ToolSetting) -> tuple[Any, ...]:
    now = int(time.time() * 1000)
    enabled = None if setting.enabled is None else int(setting.enabled)
    return (setting.name, setting.type, setting.description, enabled, json.dumps(setting.config, ensure_ascii=False), now, now)
