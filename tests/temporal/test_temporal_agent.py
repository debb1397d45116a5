"""The agent loop on Temporal, against a real dev server, a real PostgreSQL and the real
`openai` client talking to a loopback OpenAI-compatible server (tests/fake_llm_servers.py).

Front doors are real `skillyard chat` processes (or a real embedding script), workers real
`skillyard worker` processes, killed with SIGKILL; what ran how often is counted in files
by the project's skills, and what the model was asked is what the fake server recorded.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from fake_llm_servers import FakeServer, OpenAIWire, call, write_models
from temporal_server import temporal_address  # noqa: F401 - the session's dev server (a fixture)
from test_temporal import PROJECT, Setup, wait_for, workflow_status

pytestmark = pytest.mark.slow  # every test here starts a process or a server

WIRE = OpenAIWire()

GUARDED_TOOL = """
  guarded:
    description: Count the text, once a person said yes.
    confirm: true
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    workflow: counted
"""
COUNTED_WORKFLOW = """
  counted:
    steps:
      - {id: count, skill: count, input: {text: $toolArgs.text}}
"""


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


def guarded_setup(tmp_path: Path, pg_url: str, address: str, server: FakeServer) -> Setup:
    """The test project with a `confirm: true` tool and the fake model server as model `fake`."""
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / "tools.yaml", "a") as out:
        out.write(GUARDED_TOOL)
    with open(root / "workflows.yaml", "a") as out:
        out.write(COUNTED_WORKFLOW)
    made = Setup(root, pg_url, address)
    write_models(root, {"fake": WIRE.model_entry(server.url)})
    return made


@pytest.fixture
def setup(tmp_path: Path, pg_url: str, temporal_address: str, server: FakeServer) -> Iterator[Setup]:  # noqa: F811
    made = guarded_setup(tmp_path, pg_url, temporal_address, server)
    try:
        yield made
    finally:
        made.stop()


def chat(setup: Setup, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*setup.command("chat", "go", *args), "--backend", "temporal", "--output", "events",
                             "--quiet"], env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def slow(call_id: str, text: str, seconds: float) -> Any:
    return call(call_id, "slowPipeline", {"text": text, "seconds": seconds})


def kill_the_worker_running(setup: Setup, text: str, nth: int = 1) -> tuple[int, int]:
    """SIGKILL the worker whose step sleeps for `text` (the `nth` such sleep); (victim pid, survivor pid)."""
    sleeping = wait_for(lambda: (found := setup.counted("sleep", text)) and len(found) >= nth and found, 90,
                        f"step {nth} sleeping for {text!r}")
    victim = next(w for w in setup.workers if w.pid == sleeping[nth - 1])
    victim.send_signal(signal.SIGKILL)
    survivor = next(w for w in setup.workers if w is not victim)
    return victim.pid, survivor.pid


def followed(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def assert_stored_once_in_order(setup: Setup, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The store holds the followed stream: every seq once, gap-free, the same types."""
    run_id = events[0]["run_id"]
    stored = setup.stored(run_id)
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert [(e["seq"], e["type"]) for e in stored] == [(e["seq"], e["type"]) for e in events]
    return stored


# ─── a worker killed mid-run ─────────────────────────────────────────────────────────────


def test_kill_9_after_the_second_model_request_and_each_request_is_sent_once(setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply(calls=[slow("c1", "a1", 0)]), WIRE.reply(calls=[slow("c2", "a2", 4)]),
                  WIRE.reply("All done.", split_at=4))
    setup.start_worker(), setup.start_worker()
    front = chat(setup, "--yes")
    victim, survivor = kill_the_worker_running(setup, "a2")  # the second model request was answered
    stdout, stderr = front.communicate(timeout=180)
    assert front.returncode == 0, stderr
    events = followed(stdout)
    done = events[-1]
    assert done["type"] == "agent_done" and done["data"]["stop_reason"] == "answer"
    assert done["data"]["answer"] == "All done." and done["data"]["steps"] == 3
    assert len(server.requests) == 3  # the recorded answers were reused after the crash, never asked again
    third = server.requests[2].body
    assert set(WIRE.tool_results(third)) == {"c1", "c2"}
    assert setup.counted("count", "a1") == [setup.counted("count", "a1")[0]]  # the first tool call ran once
    assert setup.counted("sleep", "a2") == [victim, survivor]  # the interrupted one ran again, elsewhere
    stored = assert_stored_once_in_order(setup, events)
    assert [e["type"] for e in stored].count("model_call_start") == 3
    assert "".join(e["data"]["text"] for e in stored if e["type"] == "model_text_delta") == "All done."
    assert workflow_status(setup.address, events[0]["run_id"]) == "COMPLETED"


@pytest.mark.parametrize("max_steps, script, killed, stop", [
    # max_steps=3: the third model request is the last one, even though a worker died at the second
    ("3", [slow("m1", "m1", 0), slow("m2", "m2", 3), slow("m3", "m3", 0), None], ("m2", 1), "max_steps"),
    # the same call a third time in a row is not run: the first two were remembered across the crash
    ("8", [slow("r1", "rep", 2), slow("r2", "rep", 2), slow("r3", "rep", 2), None], ("rep", 2), "repeated_call"),
])
def test_the_limits_hold_across_a_worker_crash(setup: Setup, server: FakeServer, max_steps: str,
                                               script: list[Any], killed: tuple[str, int], stop: str) -> None:
    server.script(*(WIRE.reply(calls=[c]) if c else WIRE.reply("never asked") for c in script))
    setup.start_worker(), setup.start_worker()
    front = chat(setup, "--yes", "--max-steps", max_steps)
    kill_the_worker_running(setup, *killed)
    stdout, stderr = front.communicate(timeout=180)
    assert front.returncode == 1 and f"stopped: {stop}" in stderr, stderr
    events = followed(stdout)
    assert events[-1]["data"]["stop_reason"] == stop and events[-1]["data"]["steps"] == 3
    assert len(server.requests) == 3
    tool_calls = [e for e in events if e["type"] == "tool_call_start"]
    assert len(tool_calls) == (3 if stop == "max_steps" else 2)
    assert_stored_once_in_order(setup, events)


EMBEDDED = textwrap.dedent("""
    import asyncio, json, sys
    from engine import Engine
    from engine.backends import attach_backend
    from engine.backends.temporal.agent_client import agent_for
    from engine.runtime.agent import AgentLimits

    engine = Engine.from_dir(sys.argv[1], store=True)
    attach_backend(engine, "temporal")
    agent = agent_for(engine, engine.agent(limits=AgentLimits(**json.loads(sys.argv[2]))))
    print(json.dumps(asyncio.run(agent.run("go")).to_dict()))
""")


@pytest.mark.parametrize("limits, script, killed, stop, requests", [
    # 15 tokens a request: the third one passes a budget of 40, counted over the answers recorded before the crash
    ({"token_budget": 40}, [slow("b1", "b1", 0), slow("b2", "b2", 3), slow("b3", "b3", 0), None], ("b2", 1),
     "token_budget", 3),
    # the total timeout is a Temporal timer: the tool that runs again after the crash does not get a fresh clock
    ({"total_timeout": 12}, [slow("t1", "t1", 60), None], ("t1", 1), "timeout", 1),
])
def test_the_token_budget_and_total_timeout_hold_across_a_worker_crash(
        setup: Setup, server: FakeServer, limits: dict[str, Any], script: list[Any], killed: tuple[str, int],
        stop: str, requests: int) -> None:
    server.script(*(WIRE.reply(calls=[c]) if c else WIRE.reply("never asked") for c in script))
    setup.start_worker(), setup.start_worker()
    started = time.monotonic()
    front = subprocess.Popen([sys.executable, "-c", EMBEDDED, str(setup.root), json.dumps(limits)], env=setup.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kill_the_worker_running(setup, *killed)
    stdout, stderr = front.communicate(timeout=120)
    assert front.returncode == 0, stderr
    result = json.loads(stdout)
    assert result["stop_reason"] == stop and len(server.requests) == requests
    if stop == "timeout":
        assert time.monotonic() - started < 40  # not the 60 s the tool would take, nor 12 s more after the crash
        assert result["steps"] == 1
    else:
        assert result["usage"] == {"input_tokens": 30, "output_tokens": 15} and result["steps"] == 3


# ─── an approval that waits through a restart of everything ──────────────────────────────

FRONT_DOOR = textwrap.dedent("""
    import asyncio, sys
    from engine import Engine
    from engine.backends import attach_backend
    from engine.backends.temporal.agent_client import agent_for

    engine = Engine.from_dir(sys.argv[1], store=True)
    attach_backend(engine, "temporal")
    agent = agent_for(engine, engine.agent())  # nobody here to ask: the call waits for any front door's answer
    result = asyncio.run(agent.run("go", run_id=sys.argv[2]))
    print(result.stop_reason, result.answer)
""")


def test_a_pending_approval_survives_a_restart_of_every_worker_and_the_front_door(setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply(calls=[call("g1", "guarded", {"text": "ap"})]), WIRE.reply("Counted."))
    run_id = "run_approval_" + setup.queue
    setup.start_worker()
    front = subprocess.Popen([sys.executable, "-c", FRONT_DOOR, str(setup.root), run_id], env=setup.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    asked = wait_for(lambda: [e for e in setup.stored(run_id) if e["type"] == "confirmation_required"], 90,
                     "the confirmation to be stored")
    assert asked[0]["tool_call_id"] == "g1" and asked[0]["data"]["tool"] == "guarded"
    assert _pending(setup, run_id) == ["g1"]
    front.send_signal(signal.SIGKILL)
    front.communicate(timeout=30)
    setup.workers[0].send_signal(signal.SIGKILL)
    setup.workers[0].wait(30)
    assert setup.counted("count", "ap") == []  # nothing ran without a yes
    setup.start_worker()  # a new worker, a new front door: the question is still there
    assert _pending(setup, run_id) == ["g1"]
    _approve(setup, run_id, "g1")
    wait_for(lambda: workflow_status(setup.address, run_id) == "COMPLETED", 90, "the run to complete")
    assert len(setup.counted("count", "ap")) == 1
    assert len(server.requests) == 2 and WIRE.tool_results(server.requests[1].body)["g1"]
    stored = setup.stored(run_id)
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    types = [e["type"] for e in stored]
    assert types.count("confirmation_required") == 1 and types.count("tool_call_start") == 1
    assert types[-1] == "agent_done" and stored[-1]["data"]["stop_reason"] == "answer"
    assert stored[-1]["data"]["answer"] == "Counted."
    from engine.store import open_store

    with open_store(setup.pg_url) as store:
        record = store.run(run_id)
    assert record is not None and record.kind == "agent" and record.status == "ok"


def _pending(setup: Setup, run_id: str) -> list[str]:
    from engine.backends.temporal.agent_client import pending_approvals

    return asyncio.run(_with_client(setup, lambda client: pending_approvals(client, run_id)))


def _approve(setup: Setup, run_id: str, tool_call_id: str) -> None:
    from engine.backends.temporal.agent_client import send_approval

    asyncio.run(_with_client(setup, lambda client: send_approval(client, run_id, tool_call_id, True)))


async def _with_client(setup: Setup, use: Any) -> Any:
    from temporalio.client import Client

    return await use(await Client.connect(setup.address))


# ─── cancellation, secrets ───────────────────────────────────────────────────────────────


def test_ctrl_c_on_the_front_door_cancels_the_agent_execution_and_its_running_tool(setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply(calls=[slow("x1", "cx", 60)]), WIRE.reply("never asked"))
    setup.start_worker()
    front = chat(setup, "--yes")
    wait_for(lambda: setup.counted("sleep", "cx"), 90, "the tool's step to start")
    front.send_signal(signal.SIGINT)
    stdout, stderr = front.communicate(timeout=60)
    assert front.returncode == 130, stderr
    run_id = followed(stdout)[0]["run_id"]
    wait_for(lambda: setup.counted("sleep-cancelled", "cx"), 30, "the running step to be cancelled")
    wait_for(lambda: workflow_status(setup.address, run_id) == "CANCELED", 30, "the execution to be cancelled")
    stored = wait_for(lambda: (s := setup.stored(run_id)) and s[-1]["type"] == "agent_done" and s, 30, "agent_done")
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert stored[-1]["data"]["stop_reason"] == "cancelled"
    assert stored[-2]["type"] == "tool_call_error" and stored[-2]["data"]["error"]["code"] == "cancelled"
    assert len(server.requests) == 1


def test_a_secret_in_the_model_s_tool_arguments_reaches_no_sink(setup: Setup, server: FakeServer) -> None:
    planted = "PLANTED-" + setup.queue
    server.script(WIRE.reply(calls=[call("s1", "flaky", {"text": planted, "api_key": planted})]), WIRE.reply("Done."))
    worker = setup.start_worker()
    front = chat(setup, "--yes")
    stdout, stderr = front.communicate(timeout=120)
    assert front.returncode == 0, stderr
    events = followed(stdout)
    assert any(e["type"] == "tool_call_result" for e in events)
    stored = assert_stored_once_in_order(setup, events)
    assert planted not in stdout and planted not in stderr and planted not in json.dumps(stored)
    assert planted not in Path(worker.log.name).read_text()  # type: ignore[attr-defined]


def test_an_agent_run_for_another_revision_is_refused_naming_both(setup: Setup, server: FakeServer, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(setup.root, other)
    with open(other / "tools.yaml", "a") as out:
        out.write("# a new revision\n")
    setup.start_worker(other)
    front = chat(setup, "--yes")
    stdout, stderr = front.communicate(timeout=120)
    assert front.returncode == 1 and "Traceback" not in stderr
    assert "stopped: error: this task was started for project revision sha256:" in stderr
    assert "but this worker serves revision sha256:" in stderr
    assert server.requests == []  # nothing ran


# ─── the service ─────────────────────────────────────────────────────────────────────────


def test_post_v1_agent_on_a_temporal_service_runs_on_the_workers_and_takes_the_approval(
        setup: Setup, server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from server_helpers import CALLER_KEY, KEYS_ENV, ServerProcess, iter_sse

    server.script(WIRE.reply(calls=[call("g9", "guarded", {"text": "sv"})]), WIRE.reply("Served."))
    for name in ("SKILLYARD_STORE_URL", "SKILLYARD_TEMPORAL_ADDRESS", "SKILLYARD_TEST_COUNTS"):
        monkeypatch.setenv(name, setup.env[name])
    setup.start_worker()
    service = ServerProcess(setup.root, keys=KEYS_ENV)
    caller = {"Authorization": f"Bearer {CALLER_KEY}"}
    try:
        frames = []
        with httpx.stream("POST", f"{service.url}/v1/agent", json={"messages": "go"},
                          headers={**caller, "Accept": "text/event-stream"}, timeout=120) as response:
            assert response.status_code == 200, response.read()
            run_id = response.headers["x-run-id"]
            for frame in iter_sse(response):
                frames.append(frame)
                if frame["event"] == "confirmation_required":
                    assert setup.counted("count", "sv") == []
                    answered = httpx.post(f"{service.url}/v1/runs/{run_id}/approvals/g9", json={"approve": True},
                                          headers=caller)
                    assert answered.status_code == 200, answered.text
                if frame["event"] == "agent_done":
                    break
    finally:
        service.stop()
    done = frames[-1]["data"]["data"]
    assert done["stop_reason"] == "answer" and done["answer"] == "Served."
    assert len(setup.counted("count", "sv")) == 1 and len(server.requests) == 2
    assert workflow_status(setup.address, run_id) == "COMPLETED"
    stored = setup.stored(run_id)
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1)) == [int(f["id"]) for f in frames]


def test_a_model_key_missing_on_the_worker_stops_the_run_with_a_clear_error(setup: Setup, server: FakeServer) -> None:
    write_models(setup.root, {"fake": WIRE.model_entry(server.url, api_key="${SKILLYARD_TEST_UNSET_KEY}")})
    setup.start_worker()
    front = chat(setup, "--yes")
    stdout, stderr = front.communicate(timeout=120)
    assert front.returncode == 1 and "Traceback" not in stderr
    assert "stopped: error: model 'fake' failed:" in stderr and "SKILLYARD_TEST_UNSET_KEY" in stderr, stderr
    assert "StepFailure" not in stderr  # the engine's message, not an exception's class name
    assert followed(stdout)[-1]["data"]["stop_reason"] == "error" and server.requests == []


STREAMED = textwrap.dedent("""
    import asyncio, json, sys
    from engine import Engine
    from engine.backends import attach_backend
    from engine.backends.temporal.agent_client import agent_for

    async def main():
        engine = Engine.from_dir(sys.argv[1], store=True)
        attach_backend(engine, "temporal")
        async for event in agent_for(engine, engine.agent()).stream("hello"):
            print(json.dumps([event.seq, event.type]))

    asyncio.run(main())
""")


def test_an_embedder_streams_an_agent_run_on_temporal_as_a_local_one(setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply("Hi there.", split_at=3))
    setup.start_worker()
    done = subprocess.run([sys.executable, "-c", STREAMED, str(setup.root)], env=setup.env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
    types = [kind for _, kind in events]
    assert types[:2] == ["agent_start", "model_call_start"] and types[-2:] == ["final_answer_delta", "agent_done"]
    assert types.count("model_text_delta") >= 1 and len(server.requests) == 1


def test_no_temporal_server_at_the_address_is_a_clear_error(setup: Setup, server: FakeServer) -> None:
    from temporal_server import _free_port

    env = {**setup.env, "SKILLYARD_TEMPORAL_ADDRESS": f"127.0.0.1:{_free_port()}"}
    done = subprocess.run([*setup.command("chat", "go", "--yes", "--quiet"), "--backend", "temporal"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "stopped: error: cannot reach the Temporal server at 127.0.0.1:" in done.stderr
    assert "SKILLYARD_TEMPORAL_ADDRESS" in done.stderr and server.requests == []
