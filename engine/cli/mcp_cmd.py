"""`skillyard mcp list`: the MCP servers of config/mcp.yaml, each with its state and its tools
(a tool that cannot be used shows its problem instead of its description).

(`skillyard mcp` without an action serves the project's tools over stdio, as before.)
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_mcp_list_parser(mcp: argparse.ArgumentParser, on_config_error: Any) -> None:
    actions = mcp.add_subparsers(dest="mcp_action", metavar="ACTION")
    listing = actions.add_parser("list", help="show each MCP server of config/mcp.yaml: its state and its tools")
    listing.add_argument("--dir", default=".", help="project directory (default: current directory)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=lambda ns: cmd_mcp_list(ns, on_config_error))


def cmd_mcp_list(ns: argparse.Namespace, on_config_error: Any) -> int:
    from ..errors import ConfigError
    from ..executors.mcp_client.link import server_views
    from ..link.linker import load_project

    try:
        project = load_project(ns.dir, isolate_broken_tools=True)
    except ConfigError as exc:
        return int(on_config_error(exc))
    views = server_views(project.root)
    if ns.json:
        print(json.dumps(views, ensure_ascii=False, indent=2))
        return 0
    if not views:
        print("no MCP servers (add them to config/mcp.yaml)")
    for view in views:
        reason = f": {view['reason']}" if view["reason"] else ""
        print(f"{view['server']}  [{view['transport']}, {view['state']}{reason}]  {len(view['tools'])} tools")
        for tool in view["tools"]:
            line = f"PROBLEM: {tool['problem']}" if tool["problem"] else (tool["description"].splitlines() or [""])[0]
            print(f"    {tool['name']} — {line}")
    return 0 if all(view["state"] == "ready" and not any(t["problem"] for t in view["tools"]) for view in views) else 1
