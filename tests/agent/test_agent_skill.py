"""The `agent` skill (issue 33 §1): a model working with tools as a workflow step, on a loopback
OpenAI-compatible server driven by the real `openai` SDK — inside `forEach` over three items,
each agent calling a tool, its events nested in the outer call under the step, the outer
result typed; and the load-time checks (unknown tool, limits above the configured ones, a
template variable the input does not declare, a tool that leads back to the agent: a cycle)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine import Engine
from engine.errors import ConfigError
from engine.runtime.events import Event
from fake_llm_servers import WIRES, FakeServer, call, module_server, server  # noqa: F401

WIRE = WIRES["openai"]
MODULE = "agent_skill_steps"

TOOLS = """\
tools:
  companyFacts:
    description: Facts about a company.
    parameters: {type: object, properties: {company: {type: string}}, required: [company]}
    workflow: facts
  researchAll:
    description: Research each company.
    parameters:
      type: object
      properties: {companies: {type: array, items: {type: string}}}
      required: [companies]
    workflow: research
"""

SKILLS = f"""\
skills:
  facts: {{kind: python, function: "{MODULE}:facts"}}
  researchCompany:
    kind: agent
    system: You research companies for interview preparation.
    user: "What should a candidate know about {{{{ company }}}}?"
    tools: [companyFacts]
    limits: {{max_steps: 4, total_timeout: 30s}}
    input: {{type: object, properties: {{company: {{type: string}}}}, required: [company]}}
    output:
      type: object
      properties: {{company: {{type: string}}, employees: {{type: integer}}}}
      required: [company, employees]
  headcount:
    kind: python
    function: "{MODULE}:headcount"
    input:
      type: object
      properties: {{found: {{type: array, items: {{type: object, properties: {{employees: {{type: integer}}}}}}}}}}
      required: [found]
"""

WORKFLOWS = """\
workflows:
  facts: {steps: [{id: facts, skill: facts, input: $toolArgs}]}
  research:
    steps:
      - id: each
        skill: researchCompany
        forEach: $toolArgs.companies
        concurrency: 1
        input: {company: $item}
      - id: total
        skill: headcount
        input: {found: $steps.each.output}
"""

PY = """\
SIZES = {"Acme": 120, "Globex": 4500, "Initech": 30}


def facts(input):
    return {"company": input["company"], "employees": SIZES[input["company"]]}


def headcount(input):
    return {"total": sum(item["employees"] for item in input["found"])}
"""


def write(root: Path, url: str, *, tools: str = TOOLS, skills: str = SKILLS, workflows: str = WORKFLOWS,
          engine_yaml: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{MODULE}.py").write_text(PY)
    (root / "tools.yaml").write_text(tools)
    (root / "skills.yaml").write_text(skills)
    (root / "workflows.yaml").write_text(workflows)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "models.yaml").write_text(json.dumps({"default": "gpt", "models": {"gpt": WIRE.model_entry(url)}}))
    if engine_yaml:
        (root / "config" / "engine.yaml").write_text(engine_yaml)
    return root


@pytest.fixture
def engine(tmp_path: Path, server: FakeServer) -> Iterator[Engine]:
    engine = Engine.from_dir(write(tmp_path / "project", server.url))
    yield engine
    engine.close()


def test_an_agent_step_in_foreach_calls_a_tool_per_item_with_nested_events_and_a_typed_result(
        engine: Engine, server: FakeServer) -> None:
    for index, (company, size) in enumerate([("Acme", 120), ("Globex", 4500), ("Initech", 30)]):
        server.script(WIRE.reply("", [call(f"inner{index}", "companyFacts", {"company": company})]),
                      WIRE.reply(json.dumps({"company": company, "employees": size})))
    events: list[Event] = []
    result = asyncio.run(asyncio.wait_for(
        engine.call_tool("researchAll", {"companies": ["Acme", "Globex", "Initech"]}, on_event=events.append), 20))
    assert result.ok, result.error
    assert result.data == {"total": 4650}  # the agent's typed answers fed the next step

    outer = events[0].tool_call_id
    assert events[0].type == "tool_call_start" and events[0].data["tool"] == "researchAll"
    for kind in ("agent_start", "model_call_start", "model_text_delta", "agent_done"):
        nested = [e for e in events if e.type == kind]
        assert nested and all((e.step_id, e.skill) == ("each", "researchCompany") for e in nested), kind
    assert len([e for e in events if e.type == "agent_start"]) == 3
    starts = [e for e in events if e.type == "agent_start"]
    assert starts[0].data["tools"] == ["companyFacts"] and starts[0].data["limits"]["max_steps"] == 4
    inner = [e for e in events if e.type == "tool_call_start" and e.tool_call_id != outer]
    assert [(e.tool_call_id, e.step_id, e.skill, e.data["tool"]) for e in inner] == [
        (f"inner{i}", "each", "researchCompany", "companyFacts") for i in range(3)]
    inner_results = [e for e in events if e.type == "tool_call_result" and e.tool_call_id != outer]
    assert [e.result.data["employees"] for e in inner_results] == [120, 4500, 30]
    # the inner tool's own step keeps its own step_id
    assert any(e.type == "skill_start" and e.tool_call_id == "inner0" and e.step_id == "facts" for e in events)
    done = [e.data for e in events if e.type == "agent_done"]
    assert [d["data"]["employees"] for d in done] == [120, 4500, 30]
    assert events[-1].type == "tool_call_result" and events[-1].tool_call_id == outer
    assert [e.seq for e in events] == list(range(1, len(events) + 1))

    first = server.bodies[0]
    assert first["messages"][0]["content"].startswith("You research companies for interview preparation.")
    assert first["messages"][1] == {"role": "user", "content": "What should a candidate know about Acme?"}
    assert [t["function"]["name"] for t in first["tools"]] == ["companyFacts"]
    assert first["response_format"]["json_schema"]["strict"] is True
    assert len(server.bodies) == 6


def test_an_agent_step_that_stays_wrong_fails_the_step_with_invalid_output(engine: Engine, server: FakeServer) -> None:
    server.script(*[WIRE.reply('{"company": "Acme"}') for _ in range(3)])
    result = asyncio.run(asyncio.wait_for(engine.call_tool("researchAll", {"companies": ["Acme"]}), 20))
    assert not result.ok
    assert result.error.code == "invalid_output"
    assert "'employees' is a required property" in result.error.message
    assert len(server.bodies) == 3


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_tool_whose_workflow_reaches_the_agent_again_is_a_cycle_refused_at_load(tmp_path: Path) -> None:
    skills = SKILLS.replace("tools: [companyFacts]", "tools: [companyFacts, researchAll]")
    root = write(tmp_path / "p", "http://127.0.0.1:9", skills=skills)
    with pytest.raises(ConfigError) as caught:
        Engine.from_dir(root)
    message = str(caught.value)
    assert f"skills.yaml:{_line(skills, 'tools: [companyFacts, researchAll]')}:" in message
    assert "agent skill 'researchCompany' may call tool 'researchAll', whose workflow reaches agent skill " \
           "'researchCompany' again (a cycle)" in message
    assert "companyFacts" not in message.split("a cycle")[0].split("may call tool")[1]


def test_load_checks_unknown_tool_limits_above_the_configured_and_an_undeclared_template_input(tmp_path: Path) -> None:
    skills = (SKILLS.replace("tools: [companyFacts]", "tools: [companyFact]")
              .replace("max_steps: 4", "max_steps: 40")
              .replace("system: You research companies for interview preparation.",
                       "system: You research companies in {{ country }}."))
    root = write(tmp_path / "p", "http://127.0.0.1:9", skills=skills, engine_yaml="agent:\n  max_steps: 10\n")
    with pytest.raises(ConfigError) as caught:
        Engine.from_dir(root)
    message = str(caught.value)
    assert f"skills.yaml:{_line(skills, 'companyFact]')}:" in message
    assert "agent skill 'researchCompany' lists unknown tool 'companyFact'" in message and "'companyFacts'" in message
    assert "asks for max_steps=40, above the configured max_steps=10" in message
    assert "lower it to 10 or less, or raise agent.max_steps in config/engine.yaml" in message
    assert "uses {{ country }}, which the skill's input schema does not declare" in message


def test_a_recorded_call_with_an_agent_step_keeps_its_own_output(tmp_path: Path, server: FakeServer) -> None:
    import sqlite3

    for index, (company, size) in enumerate([("Acme", 120), ("Globex", 4500)]):
        server.script(WIRE.reply("", [call(f"inner{index}", "companyFacts", {"company": company})]),
                      WIRE.reply(json.dumps({"company": company, "employees": size})))
    engine = Engine.from_dir(write(tmp_path / "project", server.url), store=tmp_path / "runs.db")
    try:
        result = asyncio.run(asyncio.wait_for(engine.call_tool("researchAll", {"companies": ["Acme", "Globex"]}), 20))
    finally:
        engine.close()
    assert result.ok, result.error
    with contextlib.closing(sqlite3.connect(tmp_path / "runs.db")) as db:
        rows = db.execute("SELECT kind, name, status, output FROM runs").fetchall()
    assert rows == [("tool", "researchAll", "ok", '{"total":4620}')]


def test_an_inner_confirm_tool_asks_the_caller_of_the_outer_call(tmp_path: Path, server: FakeServer) -> None:
    tools = TOOLS.replace("    description: Facts about a company.\n", "    description: Facts about a company.\n    confirm: true\n")
    engine = Engine.from_dir(write(tmp_path / "project", server.url, tools=tools))
    asked: list[tuple[str, dict[str, Any], str]] = []

    async def approve(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
        asked.append((tool.name, args, tool_call_id))
        return False

    server.script(WIRE.reply("", [call("ask1", "companyFacts", {"company": "Acme"})]),
                  WIRE.reply('{"company": "Acme", "employees": 0}'))
    events: list[Event] = []
    try:
        result = asyncio.run(asyncio.wait_for(engine.call_tool(
            "researchAll", {"companies": ["Acme"]}, approve=approve, on_event=events.append), 20))
    finally:
        engine.close()
    assert result.ok, result.error
    assert asked == [("companyFacts", {"company": "Acme"}, "ask1")]
    needed = next(e for e in events if e.type == "confirmation_required")
    assert (needed.tool_call_id, needed.step_id, needed.skill) == ("ask1", "each", "researchCompany")
    denied = next(e for e in events if e.type == "tool_call_error" and e.tool_call_id == "ask1")
    assert denied.data["error"]["code"] == "confirmation_denied"
    assert "declined" in server.bodies[1]["messages"][-1]["content"]


def test_cancelling_the_outer_call_cancels_the_agent_and_its_tool(tmp_path: Path, server: FakeServer) -> None:
    engine = Engine.from_dir(write(tmp_path / "project", server.url))
    server.script(WIRE.reply("", [call("slow1", "companyFacts", {"company": "Acme"})], delay=0.0),
                  WIRE.reply('{"company": "Acme", "employees": 1}', delay=5.0))  # the second turn never comes back in time
    events: list[Event] = []

    async def main() -> None:
        task = asyncio.ensure_future(engine.call_tool("researchAll", {"companies": ["Acme"]}, on_event=events.append))
        while not any(e.type == "model_call_start" and e.data["step"] == 2 for e in events) or len(server.bodies) < 2:
            await asyncio.sleep(0.01)  # (the second request sent, not only announced: on a busy machine it lags)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        asyncio.run(asyncio.wait_for(main(), 10))
    finally:
        engine.close()
    done = [e for e in events if e.type == "agent_done"]
    assert [d.data["stop_reason"] for d in done] == ["cancelled"]
    assert done[0].step_id == "each"
    assert len(server.bodies) == 2
