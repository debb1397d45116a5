"""Whose problem is it: the parts of a project each tool depends on, and the problems that
belong to each tool.

A tool's closure is the tool itself, the workflow it runs, every workflow that one calls, the
skills of their steps and the models of those skills. A problem belongs to every tool whose
closure holds the part its YAML path names (`workflows.textReport.steps[0]…`). A problem that
names no such part (config/engine.yaml, a file that could not be parsed, the default model)
belongs to the whole project: nothing can run safely past it.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigIssue
from ..spec.loader import LoadedSpecs
from .data_flow import leaves

_KINDS = ("tools", "skills", "workflows", "models")


def part_of(issue: ConfigIssue) -> str | None:
    """`kind.name` of the project part a problem is about, or None for a project-wide problem."""
    path = issue.location.path
    kind, _, rest = path.partition(".")
    if kind not in _KINDS or not rest:
        return None
    name = rest.split(".", 1)[0].split("[", 1)[0]
    return f"{kind}.{name}"


def tool_closure(specs: LoadedSpecs, tool: str) -> set[str]:
    """Every `kind.name` the tool depends on (names that are not defined are included too)."""
    parts = {f"tools.{tool}"}
    entry = specs.tools.get(tool)
    pending = [entry.spec.workflow] if entry is not None and entry.spec.workflow else []
    while pending:
        name = pending.pop()
        if f"workflows.{name}" in parts:
            continue
        parts.add(f"workflows.{name}")
        workflow = specs.workflows.get(name)
        if workflow is None:
            continue
        for leaf in leaves(workflow.spec):
            inner = getattr(leaf.spec, "workflow", None)
            if inner:
                pending.append(inner)
            skill = getattr(leaf.spec, "skill", None)
            if skill:
                parts.add(f"skills.{skill}")
                parts.update(_skill_models(specs, skill))
    return parts


def _skill_models(specs: LoadedSpecs, skill: str) -> set[str]:
    entry = specs.skills.get(skill)
    spec: Any = entry.spec if entry is not None else None
    if spec is None or getattr(spec, "kind", None) not in ("prompt", "agent"):
        return set()
    return {f"models.{spec.model or specs.default_model}"}


def problems_by_tool(specs: LoadedSpecs, issues: list[ConfigIssue], declared: list[str],
                     linked: set[str]) -> dict[str, list[ConfigIssue]]:
    """The broken tools, each with the problems in its closure (never empty).

    A tool is broken when it did not link, and also when it linked but a problem sits in its
    closure (a template reading a variable its schema does not declare): whatever
    `skillyard validate` reports about a tool's parts stops that tool's calls, everywhere.
    """
    by_part: dict[str, list[ConfigIssue]] = {}
    for issue in issues:
        part = part_of(issue)
        if part is not None:
            by_part.setdefault(part, []).append(issue)
    found = {}
    for tool in declared:
        if tool not in specs.tools:  # its own entry is invalid: what it depends on is unknown, so all of it
            found[tool] = list(issues)
            continue
        own = list(dict.fromkeys(issue for part in sorted(tool_closure(specs, tool)) for issue in by_part.get(part, ())))
        if own or tool not in linked:
            found[tool] = own or [ConfigIssue(
                specs.tools[tool].loc(key=True), f"tool {tool!r} depends on a part of the project that did not load",
                "run `skillyard validate` to see every problem")]
    return found


def project_wide(issues: list[ConfigIssue]) -> list[ConfigIssue]:
    """The problems that belong to no tool, skill, workflow or model: they stop the whole project."""
    return [issue for issue in issues if part_of(issue) is None]
