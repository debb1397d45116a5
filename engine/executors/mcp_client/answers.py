"""What an answer to a server's elicitation sends back: defaults, values, and their check.

Light on purpose (no MCP import): the HTTP approvals endpoint checks values with it.
"""

from __future__ import annotations

from typing import Any

from ...lang.schema import CompiledSchema, Violation
from ...lang.schema_budget import untrusted_schema_problems


def answer_values(schema: dict[str, Any], values: dict[str, Any]) -> tuple[dict[str, Any], list[Violation]]:
    """The values sent back: the requested schema's defaults, overridden by the values given,
    and what in them does not fit the schema (each violation names its field)."""
    content = {**schema_defaults(schema), **values}
    if refused := untrusted_schema_problems(schema):  # the server's schema: bounded before it is compiled
        return content, [Violation("", f"the requested schema cannot be used: {refused[0]}", "schema")]
    try:
        compiled = CompiledSchema(schema)
    except Exception as exc:  # noqa: BLE001 - the server's schema is untrusted data
        return content, [Violation("", f"the requested schema cannot be used: {type(exc).__name__}", "schema")]
    return content, compiled.check(content)


def schema_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """The requested schema's defaults for its properties (what `--yes` or a plain approval accepts)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}
    return {name: sub["default"] for name, sub in properties.items() if isinstance(sub, dict) and "default" in sub}
