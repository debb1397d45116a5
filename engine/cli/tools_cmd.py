"""`skillyard tools …`: list tools, and change their settings in the run store."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import EXIT_USAGE, ConfigError, ToolAdminError, UsageError
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
    """With the store when it exists (listing) or always (changes, which live in it). A tool
    broken by a problem in its own parts is set aside (`project.broken`), as `serve` and
    `run-workflow` do: the others are listed and changed."""
    from .._engine import Engine
    from ..link.linker import load_project
    from ..store import StoreError, store_url
    from ..store.urls import store_exists

    project = load_project(ns.dir, isolate_broken_tools=True)
    try:
        url = store_url(project.root, project.settings.store)
        return Engine.from_project(project, store=url if create_store or store_exists(url) else False)
    except StoreError as exc:
        raise UsageError(str(exc)) from None


def cmd_list(ns: argparse.Namespace, on_config_error: Any) -> int:
    """The healthy tools, then the broken ones with their problems (exit 2 when there are any:
    the project has problems to fix, though everything else runs)."""
    from ..tool_admin import ToolAdmin

    if ns.format and not ns.json:
        raise UsageError(f"--format {ns.format} applies to JSON output only: write `skillyard tools --json --format {ns.format}`")
    try:
        engine = _open(ns, create_store=False)
    except ConfigError as exc:
        return int(on_config_error(exc, "no tool is listed"))
    try:
        project = engine.project
        broken = {name: [str(issue) for issue in issues] for name, issues in sorted(project.broken.items())}
        if ns.json and ns.format:
            print(json.dumps(project.tool_schemas(ns.format), ensure_ascii=False, indent=2))
            _print_broken(broken, sys.stderr)
        elif ns.json:
            views = ToolAdmin(engine).views() + [{"name": name, "broken": True, "problems": problems}
                                                 for name, problems in broken.items()]
            print(json.dumps(views, ensure_ascii=False, indent=2))
        else:
            for view in ToolAdmin(engine).views():
                _print_view(view, project.policy.permits(view["name"]))
            _print_broken(broken, sys.stdout)
        return EXIT_USAGE if broken else 0
    finally:
        engine.close()


def _print_view(view: dict[str, Any], permitted: bool) -> None:
    state = "enabled" if view["enabled"] else "disabled"
    if not permitted:
        state += ", denied by router policy"
    origin = view["source"] + (f", stored overrides: {json.dumps(view['overrides'])}" if view["overrides"] else "")
    title = f" — {view['title']}" if view.get("title") else ""
    print(f"{view['name']}{title}  [{view['type']}, {state}; from {origin}]")
    print(f"    {view['description']}")
    _print_parameters(view["parameters"])


def _print_broken(broken: dict[str, list[str]], out: TextIO) -> None:
    """Each broken tool and its problems (`file:line:col: what — fix`): it does not run, the others do."""
    if not broken:
        return
    count = len(broken)
    print(f"\n{count} broken tool{'s' if count != 1 else ''} (not callable until fixed; the tools above run):", file=out)
    for name, problems in broken.items():
        print(f"{name}  [broken]", file=out)
        for problem in problems:
            print(f"    {problem}", file=out)


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
        return int(on_config_error(exc, "nothing was changed"))
    admin = ToolAdmin(engine, operator=True)  # the host's owner: no admin-key limits
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
