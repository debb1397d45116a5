"""config/mcp.yaml's servers → LinkedTools, at each link (load or reload).

A server is connected once per process and kept across reloads while its entry stays the
same. A server that cannot start, or that died, makes only its own tools broken (its last
listed tools, or `<prefix>*` when it never listed any), with the reason as their problem.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigIssue, Location
from ...lang.schema import CompiledSchema, schema_problem_details
from ...runtime.project import LinkedTool
from ...spec.mcp_config import McpServerSpec
from ...spec.models import TOOL_NAME_RE
from . import registry
from .budgets import MAX_DESCRIPTION_BYTES, tool_size_problem
from .connection import McpConnection
from .executor import McpToolExecutor

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class McpLink:
    """What the servers add to a project: tools, and the problems of the ones that cannot run."""

    tools: dict[str, LinkedTool] = field(default_factory=dict)
    problems: list[ConfigIssue] = field(default_factory=list)
    broken: dict[str, list[ConfigIssue]] = field(default_factory=dict)
    tool_problems: dict[str, dict[str, str]] = field(default_factory=dict)  # server → its tool's name → problem


def _connection(root: Path, name: str, spec: McpServerSpec) -> McpConnection:
    """The server's connection: the one it has while its spec is unchanged, else a new one."""
    return registry.swap(root, name, lambda: McpConnection(name, spec, root, lambda: registry.tool_sources_changed(root)),
                         lambda current: current.spec == spec)


def link_mcp_servers(root: Path, servers: list[tuple[str, McpServerSpec, Any]], taken: set[str], default_timeout: float) -> McpLink:
    """Connect (or reuse) each enabled server and link its tools; names in `taken` are the project's own."""
    out = McpLink()
    enabled = [(name, spec, source) for name, spec, source in servers if spec.enabled]
    registry.close_others(root, {name for name, _, _ in enabled})
    conns = [(_connection(root, name, spec), source) for name, spec, source in enabled]
    for conn, _ in conns:
        if conn.state == "starting":
            conn.wait_first_outcome()  # each within its startup_timeout; they start at once
    for conn, source in conns:
        where = source.locate(("mcpServers", conn.name), key=True)
        if conn.state != "ready":
            _broken_server(conn, where, out)
            continue
        for tool in conn.tools:
            _link_tool(conn, tool, where, taken, default_timeout, out)
        conn.tool_problems = out.tool_problems.get(conn.name, {})
    return out


def _broken_server(conn: McpConnection, where: Location, out: McpLink) -> None:
    issue = ConfigIssue(where, f"MCP server {conn.name!r} is not available: {conn.reason or conn.state}",
                        "check its command/url and its log lines; it is restarted with backoff")
    out.problems.append(issue)
    names = [tool_name(conn, t.name) for t in conn.tools if _wanted(conn.spec, t.name)]
    for name in names or [f"{conn.spec.tool_prefix(conn.name)}*"]:
        out.broken[name] = [issue]


def tool_name(conn: McpConnection, name: str) -> str:
    return conn.spec.tool_prefix(conn.name) + _UNSAFE.sub("_", name)


def _wanted(spec: McpServerSpec, name: str) -> bool:
    included = not spec.include or any(fnmatch.fnmatchcase(name, g) for g in spec.include)
    return included and not any(fnmatch.fnmatchcase(name, g) for g in spec.exclude)


def _link_tool(conn: McpConnection, tool: Any, where: Location, taken: set[str], default_timeout: float, out: McpLink) -> None:
    """One listed tool → a LinkedTool, or a problem of that tool alone (the server's other tools still link).

    A name already taken (a local tool's, or another server's) stays theirs: the problem is
    recorded under `<server>:<tool>`, and the tool that holds the name is not broken.
    """
    if not _wanted(conn.spec, tool.name):
        return
    name = tool_name(conn, tool.name)
    parameters = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    shown = f"tool {tool.name[:80]!r} of MCP server {conn.name!r}"
    if name in taken or name in out.tools:
        _problem(conn, tool, ConfigIssue(where, f"{conn.name}:{tool.name[:80]}: {shown} becomes {name!r}, a name already used; "
                                         "the tool that has it keeps it", "set a `prefix`, or leave it out with `exclude`"), out)
        return
    problem = None
    if not TOOL_NAME_RE.match(name):
        problem = f"{shown} becomes {name[:80]!r}, longer than 64 characters", "set a shorter `prefix`, or leave it out with `exclude`"
    elif (too_big := tool_size_problem(tool.description, tool.title, tool.input_schema)) is not None:
        problem = f"{shown}: {too_big}", "leave it out with `exclude` (or ask its author for a shorter one)"
    elif schema_problem_details(parameters) or parameters.get("type") != "object":
        problem = f"{shown} has an inputSchema that is not a valid object schema", "leave it out with `exclude`"
    if problem is not None:
        issue = ConfigIssue(where, *problem)
        _problem(conn, tool, issue, out)
        out.broken.setdefault(name[:64], []).append(issue)
        return
    confirm = any(fnmatch.fnmatchcase(tool.name, g) for g in conn.spec.confirm)
    description = tool.description or tool.title or f"{tool.name} (MCP server {conn.name})"
    out.tools[name] = LinkedTool(name, description, parameters, CompiledSchema(parameters), True,
                                 conn.spec.timeout or default_timeout, confirm, McpToolExecutor(conn, tool.name),
                                 str(where), {"server": conn.name, "tool": tool.name})


def _problem(conn: McpConnection, tool: Any, issue: ConfigIssue, out: McpLink) -> None:
    out.problems.append(issue)
    out.tool_problems.setdefault(conn.name, {})[tool.name] = issue.message


def server_views(root: Path) -> list[dict[str, Any]]:
    """Each connected server of `root`: its state, the reason when not ready, its tools (each
    with its problem, None when it links)."""
    return [{"server": name, "state": conn.state, "reason": conn.reason,
             "transport": "http" if conn.spec.url else "stdio",
             "tools": [{"name": tool_name(conn, t.name)[:80], "server_name": t.name[:80],
                        "description": (t.description or "")[:MAX_DESCRIPTION_BYTES], "problem": conn.tool_problems.get(t.name)}
                       for t in conn.tools if _wanted(conn.spec, t.name)]}
            for name, conn in sorted(registry.connections(root).items())]
