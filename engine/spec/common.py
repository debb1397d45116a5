"""Building blocks shared by the YAML models: durations, JSON Schema fields, the strict base model."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, WithJsonSchema

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """`30`, `30s`, `500ms`, `2m`, `1h` → seconds (float). Bare numbers are seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 500ms or 2m")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION_RE.match(value)):
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    else:
        raise ValueError(f"{value!r} is not a duration; write e.g. 30s, 500ms or 2m")
    if seconds <= 0:
        raise ValueError("a duration must be greater than zero")
    return seconds


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(lambda v: f"{v:g}s"),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h)?\s*$"},
            ],
            "description": "Seconds, or a string such as 30s, 500ms, 2m, 1h.",
        }
    ),
]

JsonSchema = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "description": "A JSON Schema (Draft 2020-12)."}),
]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
