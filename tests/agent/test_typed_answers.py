"""Typed answers (issue 33 §2): an agent's final answer held to a JSON Schema, on the wire of a
loopback OpenAI-compatible server (and an Anthropic one) driven by the real SDKs — the native
`response_format` beside the tools, one repair turn for a wrong answer, `invalid_output` with
the last answer once the repairs run out, through `engine.agent`, POST /v1/agent and `skillyard chat`."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.runtime.events import Event
from fake_llm_servers import WIRES, FakeServer, call, module_server, server, write_project  # noqa: F401

OPENAI, ANTHROPIC = WIRES["openai"], WIRES["anthropic"]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"]}
STRICT_SENT = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
               "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture
def engine(tmp_path: Path, server: FakeServer) -> Iterator[Engine]:
    root = write_project(tmp_path / "p", {"gpt": OPENAI.model_entry(server.url), "claude": ANTHROPIC.model_entry(server.url)})
    engine = Engine.from_dir(root)
    yield engine
    engine.close()


def run(engine: Engine, model: str = "gpt", **options: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    agent = engine.agent(model, tools=["echo"], output_schema=SCHEMA, **options)
    result = asyncio.run(asyncio.wait_for(agent.run("who?", on_event=events.append), 10))
    return result, events


def test_the_answer_schema_goes_natively_beside_the_tools_and_the_parsed_answer_is_data(engine: Engine, server: FakeServer) -> None:
    server.script(OPENAI.reply("", [call("c1", "echo", {"name": "Ada"})]), OPENAI.reply('{"name": "Ada", "age": null}'))
    result, events = run(engine)
    assert result.stop_reason == "answer", result.error
    assert result.data == {"name": "Ada"}  # the null strict mode made the model write is dropped
    assert result.to_dict()["data"] == {"name": "Ada"}
    for body in server.bodies:  # every turn: the tools and the strict response_format
        assert body["response_format"] == {"type": "json_schema",
                                           "json_schema": {"name": "output", "schema": STRICT_SENT, "strict": True}}
        assert [t["function"]["name"] for t in body["tools"]] == ["echo"]
        assert "matching this JSON Schema" in body["messages"][0]["content"]  # the instruction for any server
    assert next(e for e in events if e.type == "agent_done").data["data"] == {"name": "Ada"}


def test_a_wrong_answer_is_repaired_once(engine: Engine, server: FakeServer) -> None:
    server.script(OPENAI.reply('{"name": 7}'), OPENAI.reply('```json\n{"name": "Ada", "age": 36}\n```'))
    result, events = run(engine)
    assert result.stop_reason == "answer", result.error
    assert result.data == {"name": "Ada", "age": 36}
    assert len(server.bodies) == 2
    repair = server.bodies[1]["messages"][-1]
    assert repair["role"] == "user" and "/name: 7 is not of type 'string'" in repair["content"]
    assert server.bodies[1]["messages"][-2] == {"role": "assistant", "content": '{"name": 7}'}
    invalid = [e.data for e in events if e.type == "answer_invalid"]
    assert invalid == [{"step": 1, "errors": ["/name: 7 is not of type 'string'"], "repairs_left": 1}]


def test_an_answer_still_wrong_after_the_repairs_is_invalid_output_with_the_last_answer(engine: Engine, server: FakeServer) -> None:
    server.script(OPENAI.reply("no JSON here"), OPENAI.reply('{"age": 3}'), OPENAI.reply('{"name": 1}'))
    result, events = run(engine)
    assert result.stop_reason == "invalid_output"
    assert len(server.bodies) == 3  # the first answer and the two repairs a prompt skill gets too
    assert "does not match the output schema after 3 attempt(s): /name: 1 is not of type 'string'" in result.error
    assert result.error_details["output"] == '{"name": 1}'
    assert result.data is None
    done = next(e for e in events if e.type == "agent_done")
    assert done.data["stop_reason"] == "invalid_output"
    assert [e.data["code"] for e in events if e.type == "agent_error"] == ["invalid_output"]


def test_post_v1_agent_takes_an_output_schema(engine: Engine, server: FakeServer) -> None:
    from engine.server import create_app

    server.script(OPENAI.reply('{"name": 1}'), OPENAI.reply('{"name": 2}'), OPENAI.reply('{"name": 3}'))

    async def post(body: dict[str, Any]) -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(engine, api_keys="", mcp=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return await client.post("/v1/agent", json=body, headers={"Accept": "application/json"}, timeout=10)

    bad = asyncio.run(post({"messages": "who?", "output_schema": {"type": "nonsense"}}))
    assert bad.status_code == 422 and "output_schema" in bad.json()["error"]["message"]
    answer = asyncio.run(post({"messages": "who?", "tools": ["echo"], "output_schema": SCHEMA}))
    assert answer.status_code == 200
    result = answer.json()
    assert result["stop_reason"] == "invalid_output"
    assert result["details"]["output"] == '{"name": 3}'
    assert server.bodies[0]["response_format"]["json_schema"]["strict"] is True


def test_skillyard_chat_output_schema(tmp_path: Path, server: FakeServer) -> None:
    root = write_project(tmp_path / "p", {"gpt": OPENAI.model_entry(server.url)})
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps(SCHEMA))
    server.script(OPENAI.reply('{"name": "Ada"}'))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["chat", "who?", "--dir", str(root), "--quiet", "--no-store", "--output-schema", str(schema)])
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue()) == {"name": "Ada"}
    assert server.bodies[0]["response_format"]["json_schema"]["schema"] == STRICT_SENT

    (tmp_path / "broken.json").write_text("{nope")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["chat", "who?", "--dir", str(root), "--no-store", "--output-schema", str(tmp_path / "broken.json")])
    assert code == 2
    assert "--output-schema" in err.getvalue() and "not JSON" in err.getvalue()


def test_anthropic_answers_through_a_forced_tool_beside_the_agents_tools(engine: Engine, server: FakeServer) -> None:
    server.script(ANTHROPIC.reply("", [call("t1", "echo", {"name": "Ada"})]),
                  ANTHROPIC.reply("", [call("t2", "json_output", {"name": "Ada", "age": 36})]))
    result, _ = run(engine, "claude")
    assert result.stop_reason == "answer", result.error
    assert result.data == {"name": "Ada", "age": 36}
    assert [t.tool for t in result.tool_results] == ["echo"]  # the answer is no tool call
    first = server.bodies[0]
    assert [t["name"] for t in first["tools"]] == ["echo", "json_output"]
    assert first["tools"][1]["input_schema"] == SCHEMA
    assert first["tool_choice"] == {"type": "any"}
