"""Tool settings kept in the store and layered over the YAML (seed 000's admin table).

A row either overrides a YAML tool (`enabled`, `config` keys) or, when it has a `type`,
declares a whole tool instance of a registered type (e.g. a second `fetch` tool). The YAML
stays the source of truth for everything a row does not set.
"""

from __future__ import annotations

import json
from contextlib import closing
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .sqlite import BUSY_TIMEOUT_MS, own_file


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


def _connect(path: Path) -> sqlite3.Connection:
    own_file(path)  # 0600, as the run store makes it (this may be the first to touch the file)
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return connection


def read_settings(path: Path) -> dict[str, ToolSetting]:
    """Every stored setting, by tool name (empty when the store does not exist yet)."""
    if not path.exists():
        return {}
    with closing(_connect(path)) as db, db:
        try:
            rows = db.execute("SELECT name, type, description, enabled, config FROM tool_settings ORDER BY name").fetchall()
        except sqlite3.OperationalError:
            return {}  # a store created before tool settings existed: migrated on next RunStore open
    return {
        name: ToolSetting(name, type, description, None if enabled is None else bool(enabled), json.loads(config or "{}"))
        for name, type, description, enabled, config in rows
    }


def write_setting(path: Path, setting: ToolSetting) -> None:
    now = int(time.time() * 1000)
    with closing(_connect(path)) as db, db:
        db.execute(
            "INSERT INTO tool_settings (name, type, description, enabled, config, created_at, updated_at) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT(name) DO UPDATE SET type=excluded.type, description=excluded.description, "
            "enabled=excluded.enabled, config=excluded.config, updated_at=excluded.updated_at",
            (
                setting.name,
                setting.type,
                setting.description,
                None if setting.enabled is None else int(setting.enabled),
                json.dumps(setting.config, ensure_ascii=False),
                now,
                now,
            ),
        )


def delete_setting(path: Path, name: str) -> bool:
    with closing(_connect(path)) as db, db:
        return db.execute("DELETE FROM tool_settings WHERE name = ?", (name,)).rowcount > 0
