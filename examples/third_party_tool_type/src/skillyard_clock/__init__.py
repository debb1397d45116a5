"""A worked example of a third-party tool type: `type: clock`.

A tool type is data plus small functions (see docs/tool-types.md):

- a pydantic model of its `config:` (validated at load time; errors point at the YAML line),
- the JSON Schema of the arguments a model may pass, computed from the config,
- the description a model reads, built from the YAML description and the config,
- a factory that turns a config into an executor with `kind` and `async execute(args, run)`.

The package's pyproject.toml names `CLOCK` in the `skillyard.tool_types` entry-point group,
so installing the package is all a project needs.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine import StepFailure, ToolType


class ClockConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timezone: str = Field("UTC", description="IANA time zone used when the call names none.")
    format: str = Field("%Y-%m-%d %H:%M:%S %Z", description="strftime format of the `text` field.")
    allowOtherZones: bool = Field(True, description="Let the model ask for another time zone.")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        _zone(value)
        return value


def _zone(name: str) -> Any:
    if name.upper() == "UTC":
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a known IANA time zone (e.g. Europe/Berlin)") from None


def input_schema(config: ClockConfig) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if config.allowOtherZones:
        properties["timezone"] = {"type": "string", "description": f"IANA time zone (default {config.timezone})."}
    return {"type": "object", "properties": properties, "additionalProperties": False}


def description(config: ClockConfig, yaml_description: str) -> str:
    return f"{yaml_description.rstrip()} Default time zone: {config.timezone}."


class ClockExecutor:
    kind = "clock"

    def __init__(self, config: ClockConfig):
        self.config = config

    async def execute(self, args: dict[str, Any], run: Any) -> dict[str, Any]:
        name = args.get("timezone") or self.config.timezone
        try:
            zone = _zone(name)
        except ValueError as exc:
            raise StepFailure("invalid_arguments", str(exc)) from None
        now = datetime.now(zone)
        run.tool_progress("read", f"read the clock in {name}", timezone=name)
        return {"iso": now.isoformat(timespec="seconds"), "timezone": name, "text": now.strftime(self.config.format)}


CLOCK = ToolType(name="clock", config_model=ClockConfig, input_schema=input_schema, description=description, create=ClockExecutor)
