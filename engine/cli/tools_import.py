"""`skillyard tools import FILE --type TYPE`: tool definitions from elsewhere as tools.yaml entries.

The inverse of `skillyard tools --json --format openai|anthropic|mcp`: a JSON (or YAML) file
with a list of tools in the OpenAI (`{"type": "function", "function": {…}}`, or the flat
Responses-API form), Anthropic (`input_schema`) or MCP (`inputSchema`, a `tools/list` result
or its JSON-RPC answer) shape. Each becomes an entry of the chosen registered type with its
name, description, parameters (and MCP's title); `--config` gives every entry the type's config.
Printed as YAML, or appended to the project's tools.yaml with `--write`.

A definition from elsewhere is text: every `${` in it is written `$${` (what tools.yaml reads as
a literal `${`), so that it can never become a reference to the operator's secrets; stderr
says how many were escaped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError

EMPTY_PARAMETERS = {"type": "object", "properties": {}}


def add_import_parser(actions: Any) -> None:
    parser = actions.add_parser("import", help="tool definitions (OpenAI, Anthropic or MCP JSON) as tools.yaml entries")
    parser.add_argument("file", help="a JSON or YAML file: a list of tools, or an object with `tools`")
    parser.add_argument("--type", required=True, help="the registered tool type of every entry, e.g. fetch")
    parser.add_argument("--config", default="{}", help="the type's config for every entry, as JSON")
    parser.add_argument("--write", action="store_true", help="append the entries to tools.yaml (default: print them)")
    parser.add_argument("--dir", default=".", help="project directory (for --write)")
    parser.set_defaults(handler=cmd_import)


def cmd_import(ns: argparse.Namespace) -> int:
    import yaml  # here, not at the top: `skillyard --help` builds this command's parser

    from ..runtime.contracts import known_tool_types

    if ns.type == "workflow" or ns.type not in known_tool_types():
        usable = ", ".join(t for t in known_tool_types() if t != "workflow")
        raise UsageError(f"--type {ns.type!r} is not a registered tool type; use one of: {usable}")
    config = _json_object(ns.config, "--config")
    entries, count, names = as_text(import_tools(_read(Path(ns.file)), ns.type, config, ns.file))
    if count:
        print(f"note: {count} `${{` in the imported definitions written as `$${{` (text, never a reference to a "
              f"secret): {', '.join(names)}", file=sys.stderr)
    text = yaml.safe_dump({"tools": entries}, sort_keys=False, allow_unicode=True, width=100)
    if not ns.write:
        print(text, end="")
        return 0
    target = Path(ns.dir) / "tools.yaml"
    _append(target, entries, text)
    print(f"added {len(entries)} tool(s) to {target}: {', '.join(entries)}; check them with `skillyard validate`")
    return 0


def import_tools(data: Any, type_name: str, config: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """The tools.yaml entries of every definition in `data`; a bad one is a UsageError naming it."""
    from ..link.overlay import tool_field_issues

    items = _tool_list(data, where)
    entries: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        place = f"{where}: tools[{index}]"
        name, entry = _entry(item, place)
        entry = {**entry, "type": type_name, **({"config": config} if config else {})}
        if name in entries:
            raise UsageError(f"{place}: a second tool named {name!r}; names must be unique")
        issues = tool_field_issues(name, entry)
        if issues:
            raise UsageError(f"{place} ({name}): {issues[0].location.path}: {issues[0].message}")
        entries[name] = entry
    return entries


def as_text(entries: dict[str, dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], int, list[str]]:
    """The entries with every `${` of their imported fields escaped (`--config`, the operator's own,
    is kept), how many were, and the tools that had one."""
    from ..spec.references import escape

    out: dict[str, dict[str, Any]] = {}
    total, names = 0, []
    for name, entry in entries.items():
        text, count = escape({key: value for key, value in entry.items() if key != "config"})
        out[name] = {**text, **({"config": entry["config"]} if "config" in entry else {})}
        total += count
        if count:
            names.append(name)
    return out, total, names


def _tool_list(data: Any, where: str) -> list[Any]:
    if isinstance(data, dict) and isinstance(data.get("result"), dict):
        data = data["result"]  # a JSON-RPC answer to tools/list
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list) or not data:
        raise UsageError(f"{where}: expected a non-empty list of tool definitions (or an object with `tools`)")
    return data


def _entry(item: Any, place: str) -> tuple[str, dict[str, Any]]:
    """One definition, whichever of the three shapes, as (name, entry without type)."""
    from ..lang.schema import schema_problem_details
    from ..spec.models import TOOL_NAME_RE

    if not isinstance(item, dict):
        raise UsageError(f"{place}: expected an object, got {type(item).__name__}")
    if item.get("type") == "function" and isinstance(item.get("function"), dict):
        item = item["function"]  # OpenAI Chat Completions
    schema_keys = [key for key in ("parameters", "input_schema", "inputSchema") if key in item]
    if len(schema_keys) > 1:
        raise UsageError(f"{place}: both {schema_keys[0]!r} and {schema_keys[1]!r}; one shape per tool")
    name = item.get("name")
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise UsageError(f"{place}: the name {name!r} is not a valid tool name: use 1-64 letters, digits, '_' or '-'")
    parameters = item[schema_keys[0]] if schema_keys else EMPTY_PARAMETERS
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise UsageError(f"{place} ({name}): {schema_keys[0] if schema_keys else 'parameters'} must be a JSON Schema "
                         "object with `type: object`")
    problems = schema_problem_details(parameters)
    if problems:
        raise UsageError(f"{place} ({name}): invalid JSON Schema in parameters: {problems[0]}")
    description = item.get("description")
    if not isinstance(description, str) or not description.strip():
        raise UsageError(f"{place} ({name}): no description; the model needs one to choose the tool — add it to the file")
    entry: dict[str, Any] = {"description": description}
    if isinstance(item.get("title"), str) and item["title"]:
        entry["title"] = item["title"]  # MCP's display name
    entry["parameters"] = parameters
    return name, entry


def _read(path: Path) -> Any:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as json_error:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise UsageError(f"{path}: neither JSON ({json_error.msg} at line {json_error.lineno}) nor YAML") from None


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object")
    return value


def _append(target: Path, entries: dict[str, dict[str, Any]], text: str) -> None:
    """Append under tools.yaml's `tools:` keeping the file's own text (comments and all); refused
    when a name is taken or the file's layout would not read back as one mapping with them."""
    import yaml

    if not target.exists():
        target.write_text(text, encoding="utf-8")
        return
    old = target.read_text(encoding="utf-8")
    try:
        current = (yaml.safe_load(old) or {}).get("tools") or {}
    except (yaml.YAMLError, AttributeError):
        raise UsageError(f"{target} does not read as a tools file; fix it first (`skillyard validate`)") from None
    taken = sorted(set(entries) & set(current))
    if taken:
        raise UsageError(f"{target} already has tool(s) {', '.join(taken)}; rename them in the file to import, or remove them")
    body = text.split("\n", 1)[1]  # the entries, indented under `tools:`
    new = old + ("" if old.endswith("\n") else "\n") + ("" if current or "tools:" in old else "tools:\n") + body
    try:
        after = (yaml.safe_load(new) or {}).get("tools") or {}
    except yaml.YAMLError:
        after = {}
    if list(after) != [*current, *entries]:
        raise UsageError(f"cannot append to {target} as it is laid out (`tools:` must be the last, block-style mapping); "
                         "print the entries without --write and paste them")
    target.write_text(new, encoding="utf-8")
