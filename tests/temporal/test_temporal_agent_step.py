"""A `kind: agent` step of a tool's workflow on Temporal (issue 33 §1): it runs durably, as a
child workflow whose model requests are activities, against a real dev server, a real
PostgreSQL, real `skillyard worker` processes (killed with SIGKILL) and the real `openai`
client talking to a loopback OpenAI-compatible server that records every request.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from fake_llm_servers import FakeServer, OpenAIWire, call, write_models
from temporal_server import temporal_address  # noqa: F401 - the session's dev server (a fixture)
from test_temporal import PROJECT, Setup, events_of, wait_for, workflow_status

pytestmark = pytest.mark.slow  # every test here starts a process or a server

WIRE = OpenAIWire()

RESEARCH_TOOL = """
  research:
    description: Research a text with an agent that may run slowPipeline.
    parameters: {type: object, properties: {topic: {type: string}}, required: [topic]}
    workflow: research
  guarded:
    description: Count the text, once a person said yes.
    confirm: true
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    workflow: counted
"""
RESEARCH_SKILL = """
  researcher:
    kind: agent
    model: fake
    system: You research things.
    user: "Research {{ topic }}."
    tools: [slowPipeline, guarded]
    limits: {max_steps: 5}
    input: {type: object, properties: {topic: {type: string}}, required: [topic]}
    output: {type: object, properties: {verdict: {type: string}}, required: [verdict], additionalProperties: false}
"""
RESEARCH_WORKFLOW = """
  research:
    steps:
      - {id: ask, skill: researcher, input: {topic: $toolArgs.topic}}
    output: {verdict: $steps.ask.output.verdict}
  counted:
    steps:
      - {id: count, skill: count, input: {text: $toolArgs.text}}
"""


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def setup(tmp_path: Path, pg_url: str, temporal_address: str, server: FakeServer) -> Iterator[Setup]:  # noqa: F811
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in (("tools.yaml", RESEARCH_TOOL), ("skills.yaml", RESEARCH_SKILL), ("workflows.yaml", RESEARCH_WORKFLOW)):
        with open(root / name, "a") as out:
            out.write(text)
    made = Setup(root, pg_url, temporal_address)
    write_models(root, {"fake": WIRE.model_entry(server.url)})
    try:
        yield made
    finally:
        made.stop()


def script(server: FakeServer, seconds: float) -> None:
    """A tool call, an answer that is not JSON (one repair turn), then the typed answer."""
    server.script(WIRE.reply(calls=[call("c1", "slowPipeline", {"text": "a1", "seconds": seconds})]),
                  WIRE.reply("I think it is fine."), WIRE.reply('{"verdict": "fine"}'))


def shape(event: dict[str, Any]) -> tuple[Any, ...]:
    """What must be equal between a local and a Temporal run of the step (not ids, times, texts)."""
    return event["seq"], event["type"], event.get("step_id"), event.get("skill")


def assert_gap_free_and_stored(setup: Setup, events: list[dict[str, Any]], run_id: str) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["run_id"] == run_id for e in events)
    stored = setup.stored(run_id)
    assert [shape(e) for e in stored] == [shape(e) for e in events]  # each seq once, in the streamed order


def test_an_agent_step_on_temporal_streams_and_stores_what_a_local_call_does(setup: Setup, server: FakeServer) -> None:
    setup.start_worker()
    script(server, 0)
    remote = setup.call("research", "--arg", "topic=tea", "--output", "events", "--quiet")
    assert remote.returncode == 0, remote.stderr
    assert len(server.requests) == 3
    script(server, 0)
    local = setup.call("research", "--arg", "topic=tea", "--output", "events", "--quiet", backend="local")
    assert local.returncode == 0, local.stderr
    remote_events, remote_result = events_of(remote.stdout)
    local_events, local_result = events_of(local.stdout)
    assert remote_result["data"] == local_result["data"] == {"verdict": "fine"}  # typed, after one repair
    assert [shape(e) for e in remote_events] == [shape(e) for e in local_events]
    agent_events = [e for e in remote_events if e["type"] in ("agent_start", "model_call_start", "agent_done")]
    assert [e["type"] for e in agent_events] == ["agent_start"] + ["model_call_start"] * 3 + ["agent_done"]
    assert all((e["step_id"], e["skill"]) == ("ask", "researcher") for e in agent_events)
    assert_gap_free_and_stored(setup, remote_events, remote_result["run_id"])
    assert "json_schema" in json.dumps(server.requests[-1].body.get("response_format"))  # the answer's schema was sent
    assert workflow_status(setup.address, remote_result["run_id"]) == "COMPLETED"
    assert workflow_status(setup.address, f"{remote_result['run_id']}:ask:1") == "COMPLETED"  # the step's own workflow


def test_kill_9_after_the_first_model_request_and_a_new_worker_finishes_without_asking_it_again(
        setup: Setup, server: FakeServer) -> None:
    first = setup.start_worker()
    script(server, 6)
    front = subprocess.Popen([*setup.command("call", "research", "--arg", "topic=tea", "--output", "events", "--quiet"),
                              "--backend", "temporal"], env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    wait_for(lambda: setup.counted("sleep", "a1"), 90, "the agent's tool call sleeping")  # request 1 was answered
    assert len(server.requests) == 1
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    survivor = setup.start_worker()
    stdout, stderr = front.communicate(timeout=180)
    assert front.returncode == 0, stderr
    events, result = events_of(stdout)
    assert result["data"] == {"verdict": "fine"}
    bodies = [json.dumps(r.body, sort_keys=True) for r in server.requests]
    assert len(bodies) == 3 and bodies.count(bodies[0]) == 1  # the first request was sent exactly once
    assert setup.counted("sleep", "a1") == [first.pid, survivor.pid]  # the interrupted tool call ran again, elsewhere
    assert_gap_free_and_stored(setup, events, result["run_id"])
    assert [e["type"] for e in events].count("model_call_start") == 3
    assert workflow_status(setup.address, result["run_id"]) == "COMPLETED"


def test_chat_with_an_output_schema_on_temporal_gets_a_typed_answer_after_a_repair(
        setup: Setup, server: FakeServer, tmp_path: Path) -> None:
    setup.start_worker()
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"verdict": {"type": "string"}},
                                  "required": ["verdict"], "additionalProperties": False}))
    server.script(WIRE.reply("I think it is fine."), WIRE.reply('{"verdict": "fine"}'))
    done = subprocess.run([*setup.command("chat", "go", "--model", "fake", "--output-schema", str(schema)),
                           "--backend", "temporal", "--output", "events", "--quiet"],
                          env=setup.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # refused with exit 2 before typed answers worked on Temporal
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [e["type"] for e in events].count("answer_invalid") == 1
    assert events[-1]["type"] == "agent_done" and events[-1]["data"]["data"] == {"verdict": "fine"}
    assert len(server.requests) == 2
    assert "json_schema" in json.dumps(server.requests[0].body.get("response_format"))  # sent from the worker


def test_an_inner_confirm_tool_of_the_agent_step_asks_the_caller_of_the_outer_call(setup: Setup, server: FakeServer) -> None:
    setup.start_worker()
    for backend in ("temporal", "local"):
        server.script(WIRE.reply(calls=[call("g1", "guarded", {"text": "g1"})]), WIRE.reply('{"verdict": "fine"}'))
        done = setup.call("research", "--arg", "topic=tea", "--yes", "--output", "events", "--quiet", backend=backend)
        assert done.returncode == 0, done.stderr
        events, result = events_of(done.stdout)
        assert result["data"] == {"verdict": "fine"}
        asked = [e for e in events if e["type"] == "confirmation_required"]
        assert [(e["step_id"], e["skill"]) for e in asked] == [("ask", "researcher")]
        assert "confirmation_denied" not in json.dumps(events)
        if backend == "temporal":
            remote = events
    assert [shape(e) for e in remote] == [shape(e) for e in events]
    assert len(setup.counted("count", "g1")) == 2  # the guarded tool ran once on each backend
