"""The Temporal backend against a real Temporal dev server and a real PostgreSQL.

Front doors are real `skillyard call` processes, workers real `skillyard worker` processes;
what ran how often is counted in files by the test project's skills (tests/projects/temporal).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

import child_processes
from temporal_server import temporal_address  # noqa: F401 - the session's dev server (a fixture)

pytestmark = pytest.mark.slow  # every test here starts a process or a server

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "temporal"
HEARTBEAT = "1s"  # a killed worker's step runs elsewhere after this (plus Temporal's retry delay)


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Setup:
    """A project copy with its own task queue, the environment of its processes, its workers."""

    def __init__(self, root: Path, pg_url: str, address: str) -> None:
        self.root = root
        self.counts = root.parent / "counts"
        self.queue = f"q-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, "SKILLYARD_STORE_URL": pg_url, "SKILLYARD_TEMPORAL_ADDRESS": address,
                    "SKILLYARD_TEST_COUNTS": str(self.counts), "PYTHONUNBUFFERED": "1"}
        self.pg_url = pg_url
        self.address = address
        self.workers: list[subprocess.Popen[str]] = []
        write_config(root, self.queue)

    def command(self, *args: str, root: Path | None = None) -> list[str]:
        return [sys.executable, "-m", "engine.cli.main", *args, "--dir", str(root or self.root)]

    def start_worker(self, root: Path | None = None) -> subprocess.Popen[str]:
        log = open(self.root.parent / f"worker{len(self.workers)}.log", "w+")
        worker = child_processes.start(self.command("worker", root=root), env=self.env, stdout=log, stderr=log, text=True)
        worker.log = log  # type: ignore[attr-defined]
        self.workers.append(worker)
        wait_for(lambda: "revision" in Path(log.name).read_text(), 60, "the worker's start line")
        return worker

    def call(self, tool: str, *args: str, backend: str = "temporal", root: Path | None = None,
             timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.command("call", tool, *args, root=root), "--backend", backend], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def counted(self, name: str, text: str) -> list[int]:
        """The pids of the processes that ran skill `name` for `text`, one per execution."""
        path = self.counts / name
        lines = path.read_text().splitlines() if path.exists() else []
        return [int(line.rsplit(" ", 1)[1]) for line in lines if line.rsplit(" ", 1)[0] == text]

    def stored(self, run_id: str) -> list[dict[str, Any]]:
        from engine.store import open_store

        with open_store(self.pg_url) as store:
            return store.events(run_id)

    def stop(self) -> None:
        for worker in self.workers:  # all asked at once: each finishes its step while the others do
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                child_processes.stop(worker, signal.SIGTERM, grace=30)
            finally:
                worker.log.close()  # type: ignore[attr-defined]


def write_config(root: Path, queue: str, extra: str = "") -> None:
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "engine.yaml").write_text(
        f"execution:\n  backend: temporal\n  temporal:\n    task_queue: {queue}\n    heartbeat_timeout: {HEARTBEAT}\n"
        f"logging:\n  level: error\n{extra}")


@pytest.fixture
def setup(tmp_path: Path, pg_url: str, temporal_address: str) -> Iterator[Setup]:  # noqa: F811
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    made = Setup(root, pg_url, temporal_address)
    try:
        yield made
    finally:
        made.stop()


def events_of(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`--output events`: the events, and the ToolResult on the last line."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return lines[:-1], lines[-1]


def comparable(event: dict[str, Any]) -> tuple[Any, ...]:
    """What must be equal between a local and a Temporal run (not ids, times, durations)."""
    data = {k: v for k, v in event["data"].items() if k not in ("duration_ms", "metadata", "activity_attempt")}
    return event["seq"], event["type"], event.get("step_id"), event.get("skill"), json.dumps(data, sort_keys=True)


def workflow_status(address: str, workflow_id: str) -> str | None:
    """The Temporal execution's status name, or None when there is no such execution."""
    import asyncio

    from temporalio.client import Client
    from temporalio.service import RPCError

    async def describe() -> str | None:
        client = await Client.connect(address)
        try:
            description = await client.get_workflow_handle(workflow_id).describe()
        except RPCError:
            return None
        return description.status.name if description.status is not None else None

    return asyncio.run(describe())


# ─── a call runs on a worker, as it runs locally ─────────────────────────────────────────


def test_a_call_on_temporal_streams_and_stores_what_a_local_call_does(setup: Setup) -> None:
    setup.start_worker()
    remote = setup.call("slowPipeline", "--arg", "text=same", "--output", "events", "--quiet")
    local = setup.call("slowPipeline", "--arg", "text=same", "--output", "events", "--quiet", backend="local")
    assert remote.returncode == 0 == local.returncode, remote.stderr + local.stderr
    remote_events, remote_result = events_of(remote.stdout)
    local_events, local_result = events_of(local.stdout)
    assert remote_result["data"] == local_result["data"] == {"shout": "SAME!", "slept": "same"}
    assert [comparable(e) for e in remote_events] == [comparable(e) for e in local_events]
    stored = setup.stored(remote_result["run_id"])
    assert [e["seq"] for e in stored] == list(range(1, len(remote_events) + 1))  # gap-free, each seq once
    assert [comparable(e) for e in stored] == [comparable(e) for e in remote_events]
    assert workflow_status(setup.address, remote_result["run_id"]) == "COMPLETED"  # workflow id = run id


def test_a_call_is_one_activity_per_step_and_its_last_events_come_with_its_end(setup: Setup) -> None:
    """As many activities as steps (a hand-written workflow's count): the events after the last
    step travel with the execution's result and the front door stores them, once, in order."""
    setup.start_worker()
    done = setup.call("slowPipeline", "--arg", "text=acts", "--arg", "seconds=0", "--output", "events", "--quiet")
    assert done.returncode == 0, done.stderr
    events, result = events_of(done.stdout)
    assert activities_of(setup.address, result["run_id"]) == ["skillyard.step"] * 3
    stored = setup.stored(result["run_id"])
    assert [e["seq"] for e in stored] == list(range(1, len(events) + 1))
    assert [comparable(e) for e in stored] == [comparable(e) for e in events]
    last_start = max(i for i, e in enumerate(stored) if e["type"] == "skill_start")
    assert [e["type"] for e in stored[last_start:]][-1] == "tool_call_result" and len(stored) - last_start > 2


def activities_of(address: str, workflow_id: str) -> list[str]:
    """The activity types the execution scheduled, in order."""
    import asyncio

    from temporalio.client import Client

    async def read() -> list[str]:
        history = await (await Client.connect(address)).get_workflow_handle(workflow_id).fetch_history()
        return [event.activity_task_scheduled_event_attributes.activity_type.name for event in history.events
                if event.HasField("activity_task_scheduled_event_attributes")]

    return asyncio.run(read())


def test_a_step_retry_keeps_the_local_semantics(setup: Setup) -> None:
    setup.start_worker()
    done = setup.call("flaky", "--arg", "text=f1", "--output", "events", "--quiet")
    assert done.returncode == 0, done.stderr
    events, result = events_of(done.stdout)
    assert result["data"] == {"ok": "f1"}
    attempts = [(e["type"], e["data"].get("attempt"), e["data"].get("will_retry")) for e in events
                if e["type"] in ("skill_start", "skill_error")]
    assert attempts == [("skill_start", 1, None), ("skill_error", 1, True), ("skill_start", 2, None),
                        ("skill_error", 2, True), ("skill_start", 3, None)]
    assert len(setup.counted("flake", "f1")) == 3


# ─── a worker killed mid-step ────────────────────────────────────────────────────────────


def test_kill_9_of_the_worker_running_step_2_and_the_other_finishes_the_run(setup: Setup) -> None:
    first, second = setup.start_worker(), setup.start_worker()
    call = subprocess.Popen([*setup.command("call", "slowPipeline", "--arg", "text=k9", "--arg", "seconds=4",
                                            "--output", "events", "--quiet"), "--backend", "temporal"],
                            env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sleeping = wait_for(lambda: setup.counted("sleep", "k9"), 60, "step 2 to start")
    victim = {first.pid: first, second.pid: second}[sleeping[0]]
    victim.send_signal(signal.SIGKILL)
    stdout, stderr = call.communicate(timeout=120)
    assert call.returncode == 0, stderr
    events, result = events_of(stdout)
    assert result["data"] == {"shout": "K9!", "slept": "k9"}
    assert setup.counted("count", "k9") == [sleeping[0]]  # step 1 ran exactly once
    survivor = second if victim is first else first
    assert setup.counted("sleep", "k9") == [victim.pid, survivor.pid]  # step 2 ran again, on the other worker
    stored = setup.stored(result["run_id"])
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1)) and len(stored) == len(events)
    assert [e["type"] for e in stored].count("skill_start") == 3  # the lost attempt left no event behind
    step2 = next(e for e in stored if e["type"] == "skill_result" and e["step_id"] == "sleep")
    assert step2["data"]["activity_attempt"] == 2
    clean = setup.call("slowPipeline", "--arg", "text=k9", "--arg", "seconds=0", backend="local")
    assert json.loads(clean.stdout) == result["data"]


# ─── refusals ────────────────────────────────────────────────────────────────────────────


def test_a_worker_of_another_revision_refuses_the_task_naming_both(setup: Setup, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(setup.root, other)
    with open(other / "tools.yaml", "a") as out:
        out.write("# a new revision\n")
    worker = setup.start_worker(other)
    served = wait_for(lambda: _revision_in(Path(worker.log.name).read_text()), 5, "the revision line")  # type: ignore[attr-defined]
    done = setup.call("slowPipeline", "--arg", "text=rev", "--quiet")
    assert done.returncode == 1
    asked = _revision_in(done.stderr)
    assert asked and asked != served
    assert f"started for project revision {asked}" in done.stderr and f"serves revision {served}" in done.stderr
    assert setup.counted("count", "rev") == []  # nothing ran


def _revision_in(text: str) -> str | None:
    import re

    found = re.search(r"revision (sha256:[0-9a-f]{16})", text)
    return found.group(1) if found else None


@pytest.mark.parametrize("args, code", [
    (["nope", "--arg", "text=x"], "unknown_tool"),
    (["slowPipeline", "--arg", "text="], "invalid_arguments"),
    (["slowPipeline", "--arg", "bogus=1", "--arg", "text=x"], "invalid_arguments"),
    (["hidden", "--arg", "text=x"], "tool_disabled"),
])
def test_the_router_refuses_a_bad_call_as_locally_and_starts_no_execution(setup: Setup, args: list[str], code: str) -> None:
    remote = setup.call(*args, "--output", "result", "--quiet")
    local = setup.call(*args, "--output", "result", "--quiet", backend="local")
    assert remote.returncode == local.returncode == 2
    remote_result, local_result = json.loads(remote.stdout), json.loads(local.stdout)
    assert remote_result["error"]["code"] == local_result["error"]["code"] == code
    assert remote_result["error"] == local_result["error"]
    assert remote.stderr == local.stderr
    assert workflow_status(setup.address, remote_result["run_id"]) is None  # no execution was created


def test_the_temporal_backend_needs_a_postgresql_store(setup: Setup) -> None:
    env = {**setup.env, "SKILLYARD_STORE_URL": f"sqlite:///{setup.root.parent / 'runs.db'}"}
    done = subprocess.run([*setup.command("call", "slowPipeline", "--arg", "text=x"), "--backend", "temporal"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "needs a postgresql:// run store" in done.stderr and "Traceback" not in done.stderr
    worker = subprocess.run(setup.command("worker"), env=env, capture_output=True, text=True, timeout=60)
    assert worker.returncode == 2 and "needs a postgresql:// run store" in worker.stderr


# ─── cancellation ────────────────────────────────────────────────────────────────────────


def test_ctrl_c_cancels_the_execution_and_its_running_step(setup: Setup) -> None:
    setup.start_worker()
    call = subprocess.Popen([*setup.command("call", "slowPipeline", "--arg", "text=cx", "--arg", "seconds=60",
                                            "--output", "events", "--quiet"), "--backend", "temporal"],
                            env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: setup.counted("sleep", "cx"), 60, "step 2 to start")
    time.sleep(0.5)
    call.send_signal(signal.SIGINT)
    stdout, stderr = call.communicate(timeout=60)
    assert call.returncode == 130, stderr
    wait_for(lambda: setup.counted("sleep-cancelled", "cx"), 20, "the running step to be cancelled")
    run_id = json.loads(stdout.splitlines()[0])["run_id"]
    assert workflow_status(setup.address, run_id) == "CANCELED"
    stored = wait_for(lambda: (s := setup.stored(run_id)) and s[-1]["type"] == "tool_call_error" and s, 10, "the end")
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert stored[-1]["data"]["error"]["code"] == "cancelled"


# ─── the worker itself ───────────────────────────────────────────────────────────────────


def test_the_worker_says_what_it_serves_and_stops_on_sigterm(setup: Setup) -> None:
    worker = setup.start_worker()
    log = Path(worker.log.name).read_text()  # type: ignore[attr-defined]
    assert f"task queue {setup.queue}" in log and "slowPipeline" in log and _revision_in(log)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert "stopped" in Path(worker.log.name).read_text()  # type: ignore[attr-defined]


# ─── secrets ─────────────────────────────────────────────────────────────────────────────


def test_a_secret_of_the_arguments_reaches_no_sink_of_the_worker(setup: Setup) -> None:
    worker = setup.start_worker()
    planted = "PLANTED-" + uuid.uuid4().hex
    done = setup.call("flaky", "--args-json", json.dumps({"text": planted, "api_key": planted}), "--output", "events")
    assert done.returncode == 0, done.stderr
    events, result = events_of(done.stdout)
    assert result["data"] == {"ok": "[REDACTED]"}  # given under a sensitive key: a secret of the run on every door
    assert planted not in json.dumps(events) and planted not in done.stderr
    stored = setup.stored(result["run_id"])
    assert len(stored) == len(events) and planted not in json.dumps(stored)
    assert any(e["type"] == "skill_start" for e in stored)  # the worker's events, redacted by the worker
    assert planted not in Path(worker.log.name).read_text()  # type: ignore[attr-defined]


KEYED_TOOL = """
  keyed:
    description: A step returns a key, a later one echoes it under a harmless name.
    parameters:
      type: object
      properties: {text: {type: string}, seconds: {type: number}}
      required: [text, seconds]
    workflow: keyed
"""
KEYED_WORKFLOW = """
  keyed:
    steps:
      - {id: issue, skill: issueKey, input: {text: $toolArgs.text}}
      - {id: sleep, skill: sleep, input: {text: $toolArgs.text, seconds: $toolArgs.seconds}}
      - {id: echo, skill: echoKey, input: {value: $steps.issue.output.api_key}}
    output: $steps.sleep.output
"""
KEYED_SKILLS = """
  issueKey:
    kind: python
    function: temporal_keys:issue
    input: {type: object, properties: {text: {type: string}}, required: [text]}
  echoKey:
    kind: python
    function: temporal_keys:echo
    input: {type: object, properties: {value: {type: string}}, required: [value]}
"""
KEYED_CODE = '''
def issue(input):
    return {"api_key": "KEY-" + input["text"]}


def echo(input):
    return {"note": input["value"]}
'''


def test_a_key_a_step_returned_stays_hidden_in_events_another_worker_writes(setup: Setup) -> None:
    """The run's redaction state is its workflow's (rebuilt by replay on any worker), not a cache
    of the worker that happens to write a batch: step 1's events are written by the first worker,
    which then stops; step 3's, where the key appears under a harmless name, by the second."""
    for name, extra in (("tools.yaml", KEYED_TOOL), ("workflows.yaml", KEYED_WORKFLOW), ("skills.yaml", KEYED_SKILLS)):
        with open(setup.root / name, "a") as out:
            out.write(extra)
    (setup.root / "temporal_keys.py").write_text(KEYED_CODE)
    first = setup.start_worker()
    text = uuid.uuid4().hex
    call = subprocess.Popen([*setup.command("call", "keyed", "--args-json", json.dumps({"text": text, "seconds": 2}),
                                            "--output", "events", "--quiet"), "--backend", "temporal"],
                            env=setup.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: setup.counted("sleep", text), 60, "step 2 to start")
    first.send_signal(signal.SIGTERM)  # it finishes step 2 (a graceful stop) and takes no further task
    assert first.wait(60) == 0
    setup.start_worker()  # replays the execution, runs step 3 and writes its events
    stdout, stderr = call.communicate(timeout=120)
    assert call.returncode == 0, stderr
    events, result = events_of(stdout)
    assert result["data"] == {"text": text}
    stored = setup.stored(result["run_id"])
    echoed = [e for e in stored if e.get("step_id") == "echo" and e["type"] in ("skill_start", "skill_result")]
    assert [e["type"] for e in echoed] == ["skill_start", "skill_result"]
    assert echoed[1]["data"]["output"] == {"note": "[REDACTED]"}
    assert "KEY-" + text not in json.dumps(stored) and "KEY-" + text not in stdout


# ─── tools that are not workflows: one activity on a worker ──────────────────────────────

OTHER_TOOLS = """
  whereRuns:
    type: python
    description: Say which process ran the call.
    config: {function: "temporal_tools:where"}
  refuses:
    type: python
    description: Always fails with its own code.
    config: {function: "temporal_tools:refuse"}
  readPage:
    type: fetch
    description: Read a page.
    config: {allowPrivateNetworks: ["127.0.0.1/32"]}
"""
OTHER_CODE = '''
import os

from engine import StepFailure
from engine.runtime.context import CallContext


def where(text: str, run: CallContext) -> dict:
    run.tool_progress("looking", f"looking for {text}", text=text)
    return {"text": text, "pid": os.getpid()}


def refuse(text: str) -> dict:
    raise StepFailure("not_today", f"no {text} today")
'''


@pytest.fixture
def other_tools(setup: Setup) -> Setup:
    with open(setup.root / "tools.yaml", "a") as out:
        out.write(OTHER_TOOLS)
    (setup.root / "temporal_tools.py").write_text(OTHER_CODE)
    return setup


def test_a_python_tool_runs_as_one_activity_on_a_worker_as_it_runs_locally(other_tools: Setup) -> None:
    setup = other_tools
    worker = setup.start_worker()
    remote = setup.call("whereRuns", "--arg", "text=py", "--output", "events", "--quiet")
    local = setup.call("whereRuns", "--arg", "text=py", "--output", "events", "--quiet", backend="local")
    assert remote.returncode == 0 == local.returncode, remote.stderr + local.stderr
    remote_events, remote_result = events_of(remote.stdout)
    local_events, local_result = events_of(local.stdout)
    assert remote_result["data"] == {"text": "py", "pid": worker.pid}  # ran on the worker
    assert local_result["data"]["pid"] not in (worker.pid, os.getpid())
    strip = lambda e: comparable({**e, "data": {k: v for k, v in e["data"].items() if k != "data"}})  # noqa: E731
    assert [strip(e) for e in remote_events] == [strip(e) for e in local_events]
    assert any(e["type"] == "tool_progress_delta" and e["data"].get("text") == "py" for e in remote_events)
    stored = setup.stored(remote_result["run_id"])
    assert [e["seq"] for e in stored] == list(range(1, len(remote_events) + 1))
    assert workflow_status(setup.address, remote_result["run_id"]) == "COMPLETED"

    refused = setup.call("refuses", "--arg", "text=x", "--output", "result", "--quiet")
    refused_locally = setup.call("refuses", "--arg", "text=x", "--output", "result", "--quiet", backend="local")
    assert refused.returncode == refused_locally.returncode != 0
    remote_error, local_error = json.loads(refused.stdout)["error"], json.loads(refused_locally.stdout)["error"]
    assert remote_error == local_error and remote_error["code"] == "not_today"
    assert workflow_status(setup.address, json.loads(refused.stdout)["run_id"]) == "FAILED"


def test_a_fetch_tool_runs_as_one_activity_on_a_worker_against_a_real_http_server(other_tools: Setup) -> None:
    from fetch_support import LoopbackServer, send

    setup = other_tools
    setup.start_worker()
    page = LoopbackServer().start()
    try:
        page.routes["/page"] = lambda h: send(h, 200, b"hello from the loopback", "text/plain")
        remote = setup.call("readPage", "--arg", f"url={page.url('/page')}", "--output", "events", "--quiet")
        local = setup.call("readPage", "--arg", f"url={page.url('/page')}", "--output", "events", "--quiet",
                           backend="local")
    finally:
        page.stop()
    assert remote.returncode == 0 == local.returncode, remote.stderr + local.stderr
    remote_events, remote_result = events_of(remote.stdout)
    local_events, local_result = events_of(local.stdout)
    assert remote_result["data"]["content"] == "hello from the loopback" == local_result["data"]["content"]
    assert remote_result["data"]["status_code"] == 200
    assert {k: v for k, v in remote_result["metadata"].items() if k != "duration_ms"} == \
        {k: v for k, v in local_result["metadata"].items() if k != "duration_ms"}  # status, bytes, URL, as locally
    assert [e["type"] for e in remote_events] == [e["type"] for e in local_events]
    assert [s.path for s in page.seen] == ["/page", "/page"]  # once per call: never twice for the remote one
    stored = setup.stored(remote_result["run_id"])
    assert [e["seq"] for e in stored] == list(range(1, len(remote_events) + 1))
    assert workflow_status(setup.address, remote_result["run_id"]) == "COMPLETED"
