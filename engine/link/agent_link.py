"""Link agent skills (`kind: agent`, skills/agent.py): their tools, limits and call cycles.

Checked at load, each at its `file:line` with a fix: a tool the project does not declare;
a limit above the configured `agent:` one (a skill may only lower them); and a cycle — a tool
the agent may call whose workflow reaches, through its steps, sub-workflows and other agent
skills' tools, this very agent skill again (it would call itself without end). The templates
and the model are checked as a prompt skill's are (linker.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..errors import IssueCollector
from ..spec.loader import Entry, LoadedSpecs
from ..spec.models import AgentSkillSpec
from .closure import tool_closure
from .data_flow import suggest

if TYPE_CHECKING:
    from ..skills.agent import AgentSkill


def agent_skill(entry: Entry[AgentSkillSpec], specs: LoadedSpecs, issues: IssueCollector, ok: bool,
                where: Callable[[str, int], Any]) -> AgentSkill | None:
    """The linked skill, or None when something about it is wrong (each problem reported)."""
    from ..runtime.agent import AgentLimits  # the agent loop loads with a project that has an agent skill
    from ..skills.agent import AgentSkill

    spec = entry.spec
    for index, tool in enumerate(spec.tools):
        if tool not in specs.tools and not specs.reported("tools", tool):
            issues.add(entry.loc("tools", index), f"agent skill {entry.name!r} lists unknown tool {tool!r}",
                       f"declare it in tools.yaml or remove it; {suggest(tool, specs.tools)}")
            ok = False
    configured = AgentLimits.from_settings(specs.settings.agent)
    asked = {name: value for name, value in spec.limits if value is not None}
    for name, value in asked.items():
        mine = getattr(configured, name)
        if mine is not None and value > mine:
            issues.add(entry.loc("limits", name), f"agent skill {entry.name!r} asks for {name}={value:g}, above the "
                       f"configured {name}={mine:g}", f"lower it to {mine:g} or less, or raise agent.{name} in config/engine.yaml")
            ok = False
    if not ok:
        return None
    return AgentSkill(entry.name, model=spec.model, system=spec.system, user=spec.user, tools=spec.tools,
                      limits=AgentLimits.from_settings(specs.settings.agent, **asked), input_schema=spec.input,
                      output_schema=spec.output, repairs=spec.repairs, where=where)


def check_agent_cycles(specs: LoadedSpecs, issues: IssueCollector) -> None:
    """Report each agent skill's tool that leads back to that skill."""
    agents = {name: entry for name, entry in specs.skills.items() if isinstance(entry.spec, AgentSkillSpec)}
    if not agents:
        return
    reach: dict[str, set[str]] = {}  # tool → the agent skills its calls may reach
    for name, entry in agents.items():
        for index, tool in enumerate(entry.spec.tools):
            if tool in specs.tools and name in _agents_reached(specs, tool, agents, reach):
                issues.add(entry.loc("tools", index), f"agent skill {entry.name!r} may call tool {tool!r}, whose "
                           f"workflow reaches agent skill {name!r} again (a cycle)",
                           f"remove {tool!r} from the tools of {name!r}, or stop its workflow from using {name!r}")


def _agents_reached(specs: LoadedSpecs, tool: str, agents: dict[str, Entry[Any]], memo: dict[str, set[str]]) -> set[str]:
    """The agent skills a call of `tool` may run, through the tools those agents may call in turn."""
    found = memo.get(tool)
    if found is not None:
        return found
    found = memo[tool] = set()  # a cycle back here adds nothing new
    pending = [tool]
    seen = {tool}
    while pending:
        for part in tool_closure(specs, pending.pop()):
            kind, _, name = part.partition(".")
            if kind != "skills" or name not in agents or name in found:
                continue
            found.add(name)
            for inner in agents[name].spec.tools:
                if inner in specs.tools and inner not in seen:
                    seen.add(inner)
                    pending.append(inner)
    return found
