"""OpenAI strict mode on the wire (issue 33 §3): a loopback chat-completions server, driven by the
real `openai` SDK, records what the engine sends — tool definitions with `strict: true` in
their strict form, `response_format` `json_schema` with `strict: true` — and the nulls strict
mode lets a model send for optional properties reach neither the tool nor the skill."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import textwrap
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.errors import ConfigError
from engine.runtime.events import Event
from fake_llm_servers import WIRES, FakeServer, call

WIRE = WIRES["openai"]
MODULE = "strict_mode_skills"

TOOLS = """\
tools:
  search:
    description: Search the catalogue.
    parameters:
      type: object
      properties:
        query: {type: string, description: What to look for}
        limit: {type: integer, minimum: 1, default: 5}
        lang: {type: string, enum: [en, de]}
      required: [query]
    workflow: echo
  loose:
    description: Sent as written.
    strict: false
    parameters:
      type: object
      properties: {q: {type: string}}
    workflow: echo
  extract:
    description: A person from a text.
    parameters:
      type: object
      properties: {text: {type: string}}
      required: [text]
    workflow: extract
"""

# What `search` is sent as: docs/configuration.md shows this very definition.
SEARCH_SENT = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the catalogue.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "limit": {"type": ["integer", "null"], "minimum": 1},
                "lang": {"type": ["string", "null"], "enum": ["en", "de", None]},
            },
            "required": ["query", "limit", "lang"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
LOOSE_SENT = {"type": "function", "function": {"name": "loose", "description": "Sent as written.",
                                               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


def write(root: Path, url: str, tools: str = TOOLS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{MODULE}.py").write_text("def echo(input):\n    return dict(input)\n")
    (root / "tools.yaml").write_text(tools)
    (root / "skills.yaml").write_text(textwrap.dedent(f"""\
        skills:
          echo: {{kind: python, function: "{MODULE}:echo"}}
          person:
            kind: prompt
            user: "Who is in {{{{ text }}}}?"
            input: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
            output:
              type: object
              properties: {{name: {{type: string}}, age: {{type: integer}}}}
              required: [name]
        """))
    (root / "workflows.yaml").write_text(textwrap.dedent("""\
        workflows:
          echo: {steps: [{id: echo, skill: echo, input: $toolArgs}]}
          extract: {steps: [{id: person, skill: person, input: {text: $toolArgs.text}}]}
        """))
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "models.yaml").write_text(json.dumps({"default": "gpt", "models": {"gpt": WIRE.model_entry(url)}}))
    return root


@pytest.fixture(scope="module")
def module_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def server(module_server: FakeServer) -> FakeServer:
    module_server.reset()
    return module_server


@pytest.fixture
def engine(tmp_path: Path, server: FakeServer) -> Iterator[Engine]:
    engine = Engine.from_dir(write(tmp_path / "project", server.url))
    yield engine
    engine.close()


def agent_run(engine: Engine, tools: list[str]) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    agent = engine.agent("gpt", tools=tools)
    result = asyncio.run(asyncio.wait_for(agent.run("go", on_event=events.append), 10))
    return result, events


def test_tool_definitions_are_sent_strict_exactly_as_documented_and_listed(engine: Engine, server: FakeServer, tmp_path: Path) -> None:
    server.script(WIRE.reply("nothing to do"))
    result, _ = agent_run(engine, ["search", "loose"])
    assert result.stop_reason == "answer", result.error
    sent = server.bodies[0]["tools"]
    assert sent == [LOOSE_SENT, SEARCH_SENT]  # lists follow `order`, then the name

    # `skillyard tools --json --format openai` and GET /v1/tools?format=openai show exactly that.
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["tools", "--dir", str(tmp_path / "project"), "--json", "--format", "openai"]) == 0
    listed = {t["function"]["name"]: t for t in json.loads(out.getvalue())}
    assert [listed["loose"], listed["search"]] == sent
    from engine.server import create_app

    async def get() -> Any:
        transport = httpx.ASGITransport(app=create_app(engine, api_keys="", mcp=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return (await client.get("/v1/tools?format=openai")).json()

    served = {t["function"]["name"]: t for t in asyncio.run(get())}
    assert [served["loose"], served["search"]] == sent


def test_a_null_optional_argument_is_accepted_and_dropped_before_the_tool(engine: Engine, server: FakeServer) -> None:
    server.script(
        WIRE.reply("", [call("c1", "search", {"query": "chairs", "limit": None, "lang": None})]),
        WIRE.reply("", [call("c2", "search", {"query": "desks", "limit": 2, "lang": "de"})]),
        WIRE.reply("", [call("c3", "search", {"query": None, "limit": None})]),  # null for a required one: refused
        WIRE.reply("done"),
    )
    result, events = agent_run(engine, ["search"])
    assert result.stop_reason == "answer", result.error
    first, second, third = result.tool_results
    assert first.ok and first.data == {"query": "chairs", "limit": 5}  # as without strict mode: the default applies
    assert second.ok and second.data == {"query": "desks", "limit": 2, "lang": "de"}
    assert not third.ok and third.error.code == "invalid_arguments"
    assert [e["pointer"] for e in third.error.details["errors"]] == ["/query"]  # the dropped null is not reported
    start = next(e for e in events if e.type == "tool_call_start" and e.tool_call_id == "c1")
    assert start.data["arguments"] == {"query": "chairs", "limit": None, "lang": None}  # as the model sent them


def test_a_prompt_skill_asks_for_a_strict_json_schema_and_its_null_is_dropped(engine: Engine, server: FakeServer) -> None:
    server.script(WIRE.reply('{"name": "Ada", "age": null}'))
    result = asyncio.run(engine.call_tool("extract", {"text": "Ada spoke."}))
    assert result.ok, result.error
    assert result.data == {"name": "Ada"}
    assert server.bodies[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "output",
            "schema": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
                       "required": ["name", "age"], "additionalProperties": False},
            "strict": True,
        },
    }
    assert len(server.bodies) == 1  # valid at once: no repair turn


def test_forced_strict_on_a_schema_that_cannot_be_strict_is_a_load_error_at_the_keyword(tmp_path: Path) -> None:
    tools = TOOLS.replace("    description: Search the catalogue.\n", "    description: Search the catalogue.\n    strict: true\n")
    tools = tools.replace("query: {type: string, description: What to look for}", "query: {type: string, minLength: 2}")
    root = write(tmp_path / "project", "http://127.0.0.1:9", tools)
    with pytest.raises(ConfigError) as caught:
        Engine.from_dir(root)
    line = next(i for i, text in enumerate(tools.splitlines(), 1) if "minLength" in text)
    message = str(caught.value)
    assert f"tools.yaml:{line}:" in message
    assert "tool 'search' has strict: true" in message
    assert "'minLength' at /properties/query/minLength" in message
    assert "set strict: false" in message


def test_strict_false_and_unqualifying_schemas_load_and_are_sent_as_written(tmp_path: Path) -> None:
    tools = TOOLS.replace("query: {type: string, description: What to look for}", "query: {type: string, minLength: 2}")
    engine = Engine.from_dir(write(tmp_path / "project", "http://127.0.0.1:9", tools))
    try:
        by_name = {t["function"]["name"]: t["function"] for t in engine.tool_schemas("openai")}
        assert "strict" not in by_name["search"] and by_name["search"]["parameters"]["required"] == ["query"]
        assert "strict" not in by_name["loose"]
        assert by_name["extract"]["strict"] is True
    finally:
        engine.close()
