"""Tool settings kept in the store and layered over the YAML (the admin API, `skillyard tools`).

A row either overrides a YAML tool (`enabled`, `config` keys) or, when it has a `type`,
declares a whole tool instance of a registered type (e.g. a second `fetch` tool). The YAML
stays the source of truth for everything a row does not set. `ToolSettings`, a part of every
Store, reads and writes them with the statements below, and tells who listens when another
process changes them: PostgreSQL pushes the change (NOTIFY in the change's transaction);
SQLite cannot, so a `SettingsWatch` polls the table (sqlite.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from .database import Database
from .notices import Notices
from .schema import TOOL_SETTINGS_CHANNEL


@dataclass(frozen=True)
class ToolSetting:
    name: str
    type: str | None = None  # set: a tool instance created in the store
    description: str | None = None
    enabled: bool | None = None  # None: keep the YAML value
    config: dict[str, Any] = field(default_factory=dict)
    title: str | None = None  # None (here and below): keep the YAML value, or the default
    order: int | None = None
    parameters: dict[str, Any] | None = None
    confirm: bool | None = None
    # True: `config` is the tool's whole config (an admin's PUT), not keys merged over the YAML's
    config_whole: bool = False
    # ms since the epoch, as stored: set by the store, not by a writer (and not part of equality)
    created_at: int | None = field(default=None, compare=False)
    updated_at: int | None = field(default=None, compare=False)

    @property
    def is_instance(self) -> bool:
        return self.type is not None

    def spec_fields(self) -> dict[str, Any]:
        """The ToolSpec fields this setting sets besides `enabled` and `config`."""
        fields = {"description": self.description, "title": self.title, "order": self.order,
                  "parameters": self.parameters, "confirm": self.confirm}
        return {key: value for key, value in fields.items() if value is not None}


_COLUMNS = "name, type, description, enabled, config, title, position, parameters, confirm, config_whole"
SELECT_SETTINGS = f"SELECT {_COLUMNS}, created_at, updated_at FROM tool_settings ORDER BY name"
UPSERT_SETTING = (
    f"INSERT INTO tool_settings ({_COLUMNS}, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT(name) DO UPDATE SET type=excluded.type, description=excluded.description, "
    "enabled=excluded.enabled, config=excluded.config, title=excluded.title, position=excluded.position, "
    "parameters=excluded.parameters, confirm=excluded.confirm, config_whole=excluded.config_whole, "
    "updated_at=excluded.updated_at"
)
DELETE_SETTING = "DELETE FROM tool_settings WHERE name = ?"


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def setting_from_row(row: Sequence[Any]) -> ToolSetting:
    name, type, description, enabled, config, title, position, parameters, confirm, whole, created, updated = row
    return ToolSetting(name, type, description, _flag(enabled), json.loads(config or "{}"), title, position,
                       None if parameters is None else json.loads(parameters), _flag(confirm), bool(whole),
                       created, updated)


def setting_params(setting: ToolSetting) -> tuple[Any, ...]:
    now = int(time.time() * 1000)
    flag = lambda value: None if value is None else int(value)  # noqa: E731
    parameters = None if setting.parameters is None else json.dumps(setting.parameters, ensure_ascii=False)
    return (setting.name, setting.type, setting.description, flag(setting.enabled),
            json.dumps(setting.config, ensure_ascii=False), setting.title, setting.order, parameters,
            flag(setting.confirm), int(setting.config_whole), now, now)


class SettingsWatch(Protocol):
    """Notices tool-settings changes made by another process, for a dialect that cannot push them."""

    def start(self) -> None:
        """Watch from now on (idempotent): a change from here on is heard."""

    def seen(self) -> None:
        """The table as it is now was changed by this process: nobody else needs telling."""

    def close(self) -> None: ...


class ToolSettings:
    """The stored tool settings of one store, and who hears of their changes."""

    def __init__(self, database: Database, notices: Notices, origin: str, watch: SettingsWatch | None = None) -> None:
        """`origin`: who makes this store's changes, in notice payloads (its own are not heard);
        `watch`: for a dialect whose database does not push changes."""
        self._database = database
        self._notices = notices
        self._origin = origin
        self._watch = watch

    def all(self) -> dict[str, ToolSetting]:
        """Every stored tool setting, by tool name."""
        return {row[0]: setting_from_row(row) for row in self._database.fetch(SELECT_SETTINGS)}

    def write(self, setting: ToolSetting) -> None:
        """Create or replace the stored setting of `setting.name`; other processes hear of it."""
        self._database.transaction([(UPSERT_SETTING, setting_params(setting)),
                                    *self._database.settings_notice(self._origin, setting.name)])
        if self._watch is not None:
            self._watch.seen()

    def delete(self, name: str) -> bool:
        """Remove the stored setting of `name`; False if there was none."""
        deleted = self._database.transaction([(DELETE_SETTING, (name,)), *self._database.settings_notice(self._origin, name)])
        if self._watch is not None:
            self._watch.seen()
        return deleted[0] > 0

    def on_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` (on a store thread) when another process changes tool settings;
        returns a function that stops it. A change made through this store does not call it."""
        origin = self._origin

        def heard(payload: str) -> None:
            if payload.split(" ", 1)[0] != origin:
                callback()

        stop = self._notices.listen(TOOL_SETTINGS_CHANNEL, heard)
        if self._watch is not None:
            self._watch.start()
        return stop

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
