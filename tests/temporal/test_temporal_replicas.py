"""Service replicas on Temporal: what a killed replica leaves behind goes on on the workers.

Real `skillyard serve` processes (replicas, sharing one PostgreSQL store), real `skillyard
worker` processes and a real Temporal dev server: a replica killed with SIGKILL mid-call
leaves a run that still completes (a worker adopts it and writes its end) and is never marked
`interrupted`; a pending approval (an agent run's, or a direct call's) is answered through another
replica as a signal to its workflow, also after every worker and front door restarted; cancellation over HTTP cancels the Temporal execution.
"""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from fake_llm_servers import FakeServer, call  # noqa: E402
from server_helpers import CALLER_KEY, KEYS_ENV, ServerProcess, iter_sse  # noqa: E402
from temporal_server import temporal_address  # noqa: E402,F401 - the session's dev server (a fixture)
from test_temporal import Setup, wait_for, workflow_status  # noqa: E402
from test_temporal_agent import WIRE, guarded_setup  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process or a server

CALLER = {"Authorization": f"Bearer {CALLER_KEY}"}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def setup(tmp_path: Path, pg_url: str, temporal_address: str, server: FakeServer,  # noqa: F811
          monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    made = guarded_setup(tmp_path, pg_url, temporal_address, server)
    for name in ("SKILLYARD_STORE_URL", "SKILLYARD_TEMPORAL_ADDRESS", "SKILLYARD_TEST_COUNTS"):
        monkeypatch.setenv(name, made.env[name])
    try:
        yield made
    finally:
        made.stop()


def replica(setup: Setup) -> ServerProcess:
    return ServerProcess(setup.root, keys=KEYS_ENV, extra=("--backend", "temporal", "--approval-timeout", "120"))


def start_background(service: ServerProcess, tool: str, args: dict[str, Any]) -> str:
    """Start a call that outlives its request, leave at once; its run id."""
    return _leave(service, f"/v1/tools/{tool}/call?background=true", args)


def _leave(service: ServerProcess, path: str, body: dict[str, Any]) -> str:
    with httpx.stream("POST", f"{service.url}{path}", json=body, headers={**CALLER, "Accept": "text/event-stream"},
                      timeout=30) as response:
        assert response.status_code == 200, response.read()
        return response.headers["x-run-id"]


def kill(service: ServerProcess) -> None:
    service.process.send_signal(signal.SIGKILL)
    service.process.wait(10)


@contextlib.contextmanager
def two_replicas(setup: Setup) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    a = replica(setup)
    try:
        b = replica(setup)
        try:
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


def orphaned(setup: Setup, a: ServerProcess, text: str, seconds: float) -> str:
    """A slowPipeline call started on `a`, killed once the call's step 2 sleeps on a worker; its run id."""
    run_id = start_background(a, "slowPipeline", {"text": text, "seconds": seconds})
    wait_for(lambda: setup.counted("sleep", text), 60, "step 2 to start")
    kill(a)
    return run_id


def statuses_until_end(setup: Setup, run_id: str, timeout: float) -> list[str]:
    """Every status the run's row showed, read every 0.2 s until it is no longer running."""
    from engine.store import open_store

    seen: list[str] = []
    deadline = time.monotonic() + timeout
    with open_store(setup.pg_url) as store:
        while time.monotonic() < deadline:
            record = store.run(run_id)
            status = record.status if record is not None else "missing"
            if not seen or seen[-1] != status:
                seen.append(status)
            if status not in ("running", "missing"):
                return seen
            time.sleep(0.2)
    raise AssertionError(f"run {run_id} still running after {timeout}s: {seen}")


def assert_gap_free(setup: Setup, run_id: str) -> list[dict[str, Any]]:
    stored = setup.stored(run_id)
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    return stored


# ─── a replica killed mid-call ───────────────────────────────────────────────────────────


def test_a_run_of_a_killed_replica_completes_on_the_workers_and_is_never_interrupted(setup: Setup) -> None:
    setup.start_worker()
    with two_replicas(setup) as (a, b):
        run_id = orphaned(setup, a, "orphan", 12)
        with httpx.stream("GET", f"{b.url}/v1/runs/{run_id}/events", headers={**CALLER, "Accept": "text/event-stream"},
                          timeout=90) as response:  # B follows the run to its end, across A's death
            assert response.status_code == 200
            frames = list(iter_sse(response))
        seen = statuses_until_end(setup, run_id, 30)
        summary = httpx.get(f"{b.url}/v1/runs/{run_id}", headers=CALLER, timeout=10).json()
    assert seen[-1] == "ok" and "interrupted" not in seen, seen
    assert summary["status"] == "ok" and summary["output"] == {"shout": "ORPHAN!", "slept": "orphan"}
    stored = assert_gap_free(setup, run_id)
    assert [int(f["id"]) for f in frames] == [e["seq"] for e in stored]  # B streamed the whole run
    assert stored[-1]["type"] == "tool_call_result" and stored[-1]["data"]["data"] == summary["output"]
    assert [e["type"] for e in stored].count("tool_call_result") == 1
    assert len(setup.counted("count", "orphan")) == 1 and len(setup.counted("sleep", "orphan")) == 1
    assert workflow_status(setup.address, run_id) == "COMPLETED"


def test_a_direct_call_s_confirmation_survives_kill_9_of_every_worker_and_front_door(setup: Setup) -> None:
    """A direct call's confirmation waits in its workflow: with its front door and every worker
    killed, a new front door lists and answers it, and the call runs once, gap-free, to `ok`."""
    setup.start_worker()
    a = replica(setup)
    try:
        run_id = start_background(a, "guarded", {"text": "later"})
        asked = wait_for(lambda: [e for e in setup.stored(run_id) if e["type"] == "confirmation_required"], 60,
                         "the question")
        call_id = asked[0]["tool_call_id"]
        kill(a)
        setup.workers[0].send_signal(signal.SIGKILL)
        setup.workers[0].wait(30)
        setup.start_worker()
        b = replica(setup)  # a new worker, a new front door
        try:
            time.sleep(10)  # past the store's process timeout: the sweep runs, and must leave the run alone
            assert httpx.get(f"{b.url}/v1/runs/{run_id}", headers=CALLER, timeout=30).json()["pending_approvals"] == [call_id]
            assert setup.counted("count", "later") == []  # nothing ran without a yes
            missing = httpx.post(f"{b.url}/v1/runs/{run_id}/approvals/nope", json={"approve": True}, headers=CALLER)
            assert missing.status_code == 409
            answered = httpx.post(f"{b.url}/v1/runs/{run_id}/approvals/{call_id}", json={"approve": True},
                                  headers=CALLER, timeout=30)
            assert answered.status_code == 200, answered.text
            seen = statuses_until_end(setup, run_id, 60)
            summary = httpx.get(f"{b.url}/v1/runs/{run_id}", headers=CALLER, timeout=10).json()
        finally:
            b.stop()
    finally:
        a.stop()
    assert seen[-1] == "ok" and "interrupted" not in seen, seen
    assert summary["status"] == "ok" and summary["pending_approvals"] == []
    assert len(setup.counted("count", "later")) == 1
    stored = assert_gap_free(setup, run_id)
    types = [e["type"] for e in stored]
    assert types[0] == "tool_call_start" and types[-1] == "tool_call_result"
    assert types.count("confirmation_required") == 1 and types.count("tool_call_result") == 1
    assert types.index("confirmation_required") < types.index("skill_start")
    assert stored[-1]["data"]["ok"] is True and stored[-1]["tool_call_id"] == call_id
    assert workflow_status(setup.address, run_id) == "COMPLETED"


def test_a_direct_call_approved_by_its_own_front_door_streams_what_a_local_call_does(setup: Setup) -> None:
    """`skillyard call --yes`: the CLI's approver answers, its answer goes to the workflow as the
    signal, and the stream (confirmation_required in its place) is the local one."""
    from test_temporal import comparable, events_of

    setup.start_worker()
    remote = setup.call("guarded", "--arg", "text=yes", "--yes", "--output", "events", "--quiet")
    local = setup.call("guarded", "--arg", "text=yes", "--yes", "--output", "events", "--quiet", backend="local")
    assert remote.returncode == 0 == local.returncode, remote.stderr + local.stderr
    remote_events, remote_result = events_of(remote.stdout)
    local_events, _ = events_of(local.stdout)
    assert [comparable(e) for e in remote_events] == [comparable(e) for e in local_events]
    assert [e["type"] for e in remote_events].count("confirmation_required") == 1
    assert [comparable(e) for e in assert_gap_free(setup, remote_result["run_id"])] == [comparable(e) for e in remote_events]
    assert signals_of(setup, remote_result["run_id"]) == [("approve", [remote_result["tool_call_id"], True])]


def signals_of(setup: Setup, workflow_id: str) -> list[tuple[str, list[Any]]]:
    """The signals the execution received: (name, arguments)."""
    import asyncio
    import json

    from temporalio.client import Client

    async def read() -> list[tuple[str, list[Any]]]:
        history = await (await Client.connect(setup.address)).get_workflow_handle(workflow_id).fetch_history()
        return [(event.workflow_execution_signaled_event_attributes.signal_name,
                 [json.loads(p.data) for p in event.workflow_execution_signaled_event_attributes.input.payloads])
                for event in history.events if event.HasField("workflow_execution_signaled_event_attributes")]

    return asyncio.run(read())


def test_a_direct_call_s_confirmation_denied_through_another_replica(setup: Setup) -> None:
    """The replica that started the call is alive; another answers no: the call ends as locally."""
    setup.start_worker()
    with two_replicas(setup) as (a, b):
        run_id = start_background(a, "guarded", {"text": "no"})
        asked = wait_for(lambda: [e for e in setup.stored(run_id) if e["type"] == "confirmation_required"], 60,
                         "the question")
        call_id = asked[0]["tool_call_id"]
        assert httpx.get(f"{a.url}/v1/runs/{run_id}", headers=CALLER, timeout=30).json()["pending_approvals"] == [call_id]
        denied = httpx.post(f"{b.url}/v1/runs/{run_id}/approvals/{call_id}", json={"approve": False},
                            headers=CALLER, timeout=30)
        assert denied.status_code == 200, denied.text
        seen = statuses_until_end(setup, run_id, 60)
    assert seen[-1] == "error"
    assert setup.counted("count", "no") == []
    stored = assert_gap_free(setup, run_id)
    assert [e["type"] for e in stored].count("tool_call_error") == 1
    assert stored[-1]["type"] == "tool_call_error" and stored[-1]["data"]["error"]["code"] == "confirmation_denied"
    assert workflow_status(setup.address, run_id) == "FAILED"  # the question was its execution's, not A's alone


# ─── approvals and cancellation through another replica ──────────────────────────────────


def test_an_agent_run_s_approval_reaches_its_workflow_through_another_replica_after_a_restart(
        setup: Setup, server: FakeServer) -> None:
    server.script(WIRE.reply(calls=[call("g5", "guarded", {"text": "via-b"})]), WIRE.reply("Approved elsewhere."))
    setup.start_worker()
    a = replica(setup)
    try:
        run_id = _leave(a, "/v1/agent", {"messages": "go", "background": True})
        wait_for(lambda: any(e["type"] == "confirmation_required" for e in setup.stored(run_id)), 60, "the question")
        kill(a)
        b = replica(setup)  # a replica started after A died
        try:
            assert httpx.get(f"{b.url}/v1/runs/{run_id}", headers=CALLER, timeout=10).json()["pending_approvals"] == ["g5"]
            time.sleep(10)  # past the store's process timeout: the sweep runs, and must leave the run alone
            missing = httpx.post(f"{b.url}/v1/runs/{run_id}/approvals/nope", json={"approve": True}, headers=CALLER)
            assert missing.status_code == 409
            answered = httpx.post(f"{b.url}/v1/runs/{run_id}/approvals/g5", json={"approve": True}, headers=CALLER,
                                  timeout=30)
            assert answered.status_code == 200, answered.text
            seen = statuses_until_end(setup, run_id, 60)
        finally:
            b.stop()
    finally:
        a.stop()
    assert seen[-1] == "ok" and "interrupted" not in seen, seen
    assert len(setup.counted("count", "via-b")) == 1 and len(server.requests) == 2
    stored = assert_gap_free(setup, run_id)
    assert stored[-1]["type"] == "agent_done" and stored[-1]["data"]["answer"] == "Approved elsewhere."


def test_cancel_over_http_cancels_the_temporal_execution_on_the_replica_that_runs_it_and_on_another(
        setup: Setup) -> None:
    setup.start_worker()
    with two_replicas(setup) as (a, b):
        here = start_background(a, "slowPipeline", {"text": "c-here", "seconds": 60})
        there = start_background(a, "slowPipeline", {"text": "c-there", "seconds": 60})
        wait_for(lambda: setup.counted("sleep", "c-here") and setup.counted("sleep", "c-there"), 60, "both steps 2")
        assert httpx.post(f"{a.url}/v1/runs/{here}/cancel", headers=CALLER, timeout=30).status_code == 200
        assert httpx.post(f"{b.url}/v1/runs/{there}/cancel", headers=CALLER, timeout=30).status_code == 200
        ends = [statuses_until_end(setup, run_id, 40)[-1] for run_id in (here, there)]
        again = httpx.post(f"{b.url}/v1/runs/{here}/cancel", headers=CALLER, timeout=30)
    assert ends == ["cancelled", "cancelled"]
    assert again.status_code == 409
    for run_id, text in ((here, "c-here"), (there, "c-there")):
        wait_for(lambda run_id=run_id: workflow_status(setup.address, run_id) == "CANCELED", 30, "the execution to be cancelled")
        assert setup.counted("sleep-cancelled", text)  # the running step was cancelled on the worker
        stored = assert_gap_free(setup, run_id)
        assert stored[-1]["type"] == "tool_call_error" and stored[-1]["data"]["error"]["code"] == "cancelled"


def test_cancel_through_another_replica_of_a_run_whose_replica_died(setup: Setup) -> None:
    setup.start_worker()
    with two_replicas(setup) as (a, b):
        run_id = orphaned(setup, a, "c-dead", 60)
        assert httpx.post(f"{b.url}/v1/runs/{run_id}/cancel", headers=CALLER, timeout=30).status_code == 200
        seen = statuses_until_end(setup, run_id, 40)
    assert seen[-1] == "cancelled", seen
    assert workflow_status(setup.address, run_id) == "CANCELED"
    stored = assert_gap_free(setup, run_id)
    assert stored[-1]["type"] == "tool_call_error" and stored[-1]["data"]["error"]["code"] == "cancelled"


# ─── the MCP front door ──────────────────────────────────────────────────────────────────


def test_skillyard_mcp_on_temporal_runs_calls_on_the_workers_with_their_progress(setup: Setup) -> None:
    import asyncio
    import json
    import os

    pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters

    from mcp import Client
    from test_mcp_stdio import _mcp_command

    worker = setup.start_worker()
    command = _mcp_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "--dir", str(setup.root), "--backend", "temporal"],
                                   env={**setup.env, "PYTHONUNBUFFERED": "1"}, cwd=str(setup.root))
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def main() -> tuple[Any, Any]:
        async with Client(params, mode="legacy") as client:
            done = await client.call_tool("slowPipeline", {"text": "mcp", "seconds": 0.2}, progress_callback=on_progress)
            bad = await client.call_tool("slowPipeline", {"text": ""})
            return done, bad

    done, bad = asyncio.run(main())
    assert done.is_error is False and json.loads(done.content[0].text) == {"shout": "MCP!", "slept": "mcp"}
    assert setup.counted("count", "mcp") == [worker.pid] and setup.counted("sleep", "mcp") == [worker.pid]
    assert any("step 2 of 3 started" in m for m in progress), progress  # the workers' events, relayed
    assert bad.is_error is True and "invalid_arguments" in bad.content[0].text
    assert os.getpid() not in setup.counted("count", "mcp")
    from engine.store import open_store

    with open_store(setup.pg_url) as store:
        runs = store.runs(tool="slowPipeline", limit=20)
    ours = [r for r in runs if r.input == {"text": "mcp", "seconds": 0.2}]
    assert len(ours) == 1 and ours[0].status == "ok"
    assert workflow_status(setup.address, ours[0].id) == "COMPLETED"  # workflow id = the run id
