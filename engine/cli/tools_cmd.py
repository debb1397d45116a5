"""`skillyard tools …`: list tools, and change their settings in the run store."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ToolAdminError, UsageError
from .tools_import import add_import_parser

if TYPE_CHECKING:  # building the parser (`--help`) loads none of what a command runs
    from .._engine import Engine


def add_tools_parser(commands: Any, on_config_error: Any) -> None:
    tools = commands.add_parser("tools", help="list tools; add, remove, enable, disable or set them; import definitions")
    tools.add_argument("--dir", default=".", help="project directory")
    tools.add_argument("--json", action="store_true", help="print JSON")
    tools.add_argument("--format", choices=("openai", "anthropic", "mcp"), help="with --json: tool schemas for a model API")
    tools.set_defaults(handler=lambda ns: cmd_list(ns, on_config_error))
    actions = tools.add_subparsers(dest="action", metavar="ACTION")

    add = actions.add_parser("add", help="create a tool of a registered type in the store")
    add.add_argument("name")
    add.add_argument("--type", required=True, help="a registered tool type, e.g. fetch")
    add.add_argument("--config", default="{}", help="the type's config as JSON")
    add.add_argument("--description", help="what the model reads (default: from the type)")
    add.add_argument("--disabled", action="store_true", help="create it switched off")

    remove = actions.add_parser("remove", help="remove a tool created with `tools add`")
    remove.add_argument("name")
    enable = actions.add_parser("enable", help="switch a tool on (stored override)")
    enable.add_argument("name")
    disable = actions.add_parser("disable", help="switch a tool off (stored override)")
    disable.add_argument("name")
    set_ = actions.add_parser("set", help="override config keys: skillyard tools set NAME key=value …")
    set_.add_argument("name")
    set_.add_argument("pairs", nargs="+", metavar="KEY=VALUE", help="VALUE is parsed as JSON when it parses")
    for parser in (add, remove, enable, disable, set_):
        parser.add_argument("--dir", default=".", help="project directory")
        parser.set_defaults(handler=lambda ns: cmd_change(ns, on_config_error))
    add_import_parser(actions)


def _open(ns: argparse.Namespace, *, create_store: bool) -> Engine:
    """With the store when it exists (listing) or always (changes, which live in it)."""
    from .._engine import Engine
    from ..link.linker import load_project
    from ..store import StoreError, store_url
    from ..store.urls import store_exists

    project = load_project(ns.dir)
    try:
        url = store_url(project.root, project.settings.store)
        return Engine.from_project(project, store=url if create_store or store_exists(url) else False)
    except StoreError as exc:
        raise UsageError(str(exc)) from None


def cmd_list(ns: argparse.Namespace, on_config_error: Any) -> int:
    from ..tool_admin import ToolAdmin

    if ns.format and not ns.json:
        raise UsageError(f"--format {ns.format} applies to JSON output only: write `skillyard tools --json --format {ns.format}`")
    try:
        engine = _open(ns, create_store=False)
    except ConfigError as exc:
        return int(on_config_error(exc))
    try:
        project = engine.project
        if ns.json and ns.format:
            print(json.dumps(project.tool_schemas(ns.format), ensure_ascii=False, indent=2))
            return 0
        views = ToolAdmin(engine).views()
        if ns.json:
            print(json.dumps(views, ensure_ascii=False, indent=2))
            return 0
        for view in views:
            state = "enabled" if view["enabled"] else "disabled"
            if not project.policy.permits(view["name"]):
                state += ", denied by router policy"
            origin = view["source"] + (f", stored overrides: {json.dumps(view['overrides'])}" if view["overrides"] else "")
            title = f" — {view['title']}" if view.get("title") else ""
            print(f"{view['name']}{title}  [{view['type']}, {state}; from {origin}]")
            print(f"    {view['description']}")
            _print_parameters(view["parameters"])
        return 0
    finally:
        engine.close()


def _print_parameters(parameters: dict[str, Any]) -> None:
    required = set(parameters.get("required") or [])
    for name, schema in (parameters.get("properties") or {}).items():
        schema = schema if isinstance(schema, dict) else {}
        marks = " (required)" if name in required else ""
        if "default" in schema:
            marks += f" (default {json.dumps(schema['default'])})"
        about = f" — {schema['description']}" if schema.get("description") else ""
        print(f"    --arg {name}=<{schema.get('type', 'any')}>{marks}{about}")


def cmd_change(ns: argparse.Namespace, on_config_error: Any) -> int:
    from ..tool_admin import ToolAdmin

    try:
        engine = _open(ns, create_store=True)
    except ConfigError as exc:
        return int(on_config_error(exc))
    admin = ToolAdmin(engine)
    try:
        if ns.action == "add":
            try:
                config = json.loads(ns.config)
            except json.JSONDecodeError as exc:
                raise UsageError(f"--config is not valid JSON: {exc.msg}") from None
            if not isinstance(config, dict):
                raise UsageError("--config must be a JSON object")
            view = admin.create(ns.name, type=ns.type, description=ns.description or "", config=config, enabled=not ns.disabled)
        elif ns.action == "remove":
            admin.delete(ns.name)
            print(f"removed {ns.name}")
            return 0
        elif ns.action in ("enable", "disable"):
            view = admin.update(ns.name, enabled=ns.action == "enable")
        else:
            view = admin.update(ns.name, config=dict(_pair(p) for p in ns.pairs))
        print(f"{view['name']}: {'enabled' if view['enabled'] else 'disabled'}, from {view['source']}"
              + (f", stored overrides {json.dumps(view['overrides'])}" if view["overrides"] else ""))
        return 0
    except ToolAdminError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    finally:
        engine.close()


def _pair(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise UsageError(f"{text!r}: write key=value")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw
