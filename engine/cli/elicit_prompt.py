"""Answering an MCP server's question (elicitation) at a terminal: one prompt per field.

Enter keeps a field's default (or leaves an optional field out); a value that does not fit
its field is asked again, at most three times; then, or on a "no" to the question, the
answer is declined. The values are checked once more by the client against the whole schema.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

Ask = Callable[[str], Awaitable[str]]
TRIES = 3


async def ask_fields(title: str, schema: dict[str, Any], ask: Ask) -> bool | dict[str, Any]:
    """False (declined) or the values typed for the schema's properties."""
    print(f"  {printable(title)}", file=sys.stderr)
    if (await ask("  Answer? [y/N] ")).strip().lower() not in ("y", "yes"):
        return False
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = set(schema.get("required") or [])
    values: dict[str, Any] = {}
    for name, sub in properties.items():
        sub = sub if isinstance(sub, dict) else {}
        for _ in range(TRIES):
            typed = (await ask(f"    {_label(name, sub, name in required)}: ")).strip()
            if not typed:
                if "default" in sub or name not in required:
                    break
                print(f"    {name} is required", file=sys.stderr)
                continue
            try:
                values[name] = parse_field(typed, sub)
                break
            except ValueError as exc:
                print(f"    {name}: {exc}", file=sys.stderr)
        else:
            print("    no usable answer: declined", file=sys.stderr)
            return False
    return values


def _label(name: str, schema: dict[str, Any], required: bool) -> str:
    kind = schema.get("type", "string")
    parts = [str(kind)]
    if isinstance(schema.get("enum"), list):
        parts.append("one of " + ", ".join(map(str, schema["enum"])))
    if "default" in schema:
        parts.append(f"default {json.dumps(schema['default'], ensure_ascii=False)}")
    elif required:
        parts.append("required")
    title = schema.get("title") or schema.get("description")
    return printable(f"{name}{f' — {title}' if title else ''} ({'; '.join(parts)})")


def printable(text: str) -> str:
    """The server's text without control characters (it must not drive the terminal)."""
    return "".join(c if c.isprintable() else " " for c in text)[:2000]


def parse_field(text: str, schema: dict[str, Any]) -> Any:
    """A typed answer as the field's type (ValueError with the reason when it does not fit)."""
    kind = schema.get("type", "string")
    if kind == "boolean":
        if text.lower() in ("y", "yes", "true", "1"):
            return True
        if text.lower() in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected a whole number") from None
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    choices = schema.get("enum")
    if isinstance(choices, list) and text not in choices:
        raise ValueError("expected one of " + ", ".join(map(str, choices)))
    return text
