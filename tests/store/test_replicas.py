"""One service, two replicas: two real `skillyard serve` processes sharing one PostgreSQL store.

Every bullet of "a service of several replicas": follow a run of A on B (SSE, Last-Event-ID
resume, no gap, no duplicate), approve on B a call waiting on A, list A's runs on B, cancel
on B a run executing on A, and `kill -9` of A: its unfinished runs become `interrupted`
within 15 s, their pending approvals close, and no event of a finished run is lost.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from server_helpers import ADMIN_KEY, CALLER_KEY, KEYS_ENV, ServerProcess, iter_sse, write_project  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a process or a server

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
CALLER = {"Authorization": f"Bearer {CALLER_KEY}"}
SSE = {"Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("replicated"))


@pytest.fixture(scope="module")
def replicas(project: Path, pg_url: str, monkeypatch_module: Any) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    monkeypatch_module.setenv("SKILLYARD_STORE_URL", pg_url)
    a = ServerProcess(project, keys=KEYS_ENV, extra=("--approval-timeout", "60"))
    b = ServerProcess(project, keys=KEYS_ENV, extra=("--approval-timeout", "60"))
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def start_background(server: ServerProcess, tool: str, args: dict[str, Any]) -> str:
    """Start a call in the background and leave at once; its run id."""
    with httpx.stream("POST", f"{server.url}/v1/tools/{tool}/call", params={"background": "true"}, json=args,
                      headers={**CALLER, **SSE}, timeout=10) as response:
        assert response.status_code == 200, response.read()
        return response.headers["x-run-id"]


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_run_of_a_is_followed_on_b_without_gaps_or_duplicates(replicas: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = replicas
    run_id = start_background(a, "slow", {"seconds": 1.5})
    seen: list[dict[str, Any]] = []
    with httpx.stream("GET", f"{b.url}/v1/runs/{run_id}/events", headers={**CALLER, **SSE}, timeout=20) as response:
        assert response.status_code == 200
        for frame in iter_sse(response):
            seen.append(frame)
            if len(seen) == 4:
                break  # the client drops: resume below from the last id it saw
    last = int(seen[-1]["id"])
    with httpx.stream("GET", f"{b.url}/v1/runs/{run_id}/events", headers={**CALLER, **SSE, "Last-Event-ID": str(last)},
                      timeout=20) as response:
        seen.extend(iter_sse(response))
    assert [int(f["id"]) for f in seen] == list(range(1, len(seen) + 1))  # no gap, no duplicate
    assert seen[-1]["event"] == "tool_call_result" and seen[-1]["data"]["data"]["data"] == {"slept": 1.5}
    stored = httpx.get(f"{a.url}/v1/runs/{run_id}/events", headers={**CALLER, "Accept": "application/json"}).json()
    assert [e["seq"] for e in stored] == [int(f["id"]) for f in seen]


def test_an_event_written_by_a_reaches_a_follower_on_b_quickly(replicas: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = replicas
    run_id = start_background(a, "slow", {"seconds": 2})
    delays: list[float] = []
    with httpx.stream("GET", f"{b.url}/v1/runs/{run_id}/events", headers={**CALLER, **SSE}, timeout=20) as response:
        for frame in iter_sse(response):
            if frame["event"] == "skill_progress_delta":
                delays.append(time.time() * 1000 - frame["data"]["ts"])
    assert len(delays) >= 10
    assert statistics.median(delays) < 100, f"median event→follower delay {statistics.median(delays):.0f} ms"


def test_a_call_waiting_on_a_is_approved_on_b(replicas: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = replicas
    run_id = start_background(a, "guarded", {"name": "Replica"})
    run = wait_for(lambda: (r := httpx.get(f"{b.url}/v1/runs/{run_id}", headers=CALLER).json()).get("pending_approvals") and r,
                   10, "the approval to be pending on B")
    (call_id,) = run["pending_approvals"]
    assert run["live"] is True and run["status"] == "running"
    answered = httpx.post(f"{b.url}/v1/runs/{run_id}/approvals/{call_id}", json={"approve": True}, headers=CALLER)
    assert answered.status_code == 200, answered.text
    done = wait_for(lambda: (r := httpx.get(f"{b.url}/v1/runs/{run_id}", headers=CALLER).json())["status"] == "ok" and r,
                    10, "the run to finish on A")
    assert done["output"] == {"name": "Replica", "count": 1}
    again = httpx.post(f"{b.url}/v1/runs/{run_id}/approvals/{call_id}", json={"approve": True}, headers=CALLER)
    assert again.status_code == 409


def test_b_lists_a_runs_and_cancels_one(replicas: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = replicas
    run_id = start_background(a, "slow", {"seconds": 10})
    listed = wait_for(lambda: [r for r in httpx.get(f"{b.url}/v1/runs", headers=CALLER).json() if r["id"] == run_id],
                      5, "A's run in B's list")
    assert listed[0]["status"] == "running" and listed[0]["live"] is True
    cancelled = httpx.post(f"{b.url}/v1/runs/{run_id}/cancel", headers=CALLER)
    assert cancelled.status_code == 200, cancelled.text
    wait_for(lambda: httpx.get(f"{a.url}/v1/runs/{run_id}", headers=CALLER).json()["status"] == "cancelled", 10,
             "the run to be cancelled on A")
    assert httpx.post(f"{b.url}/v1/runs/{run_id}/cancel", headers=CALLER).status_code == 409


def test_kill_9_of_a_replica_interrupts_its_runs_and_loses_no_finished_event(
    project: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKILLYARD_STORE_URL", pg_url)
    victim = ServerProcess(project, keys=KEYS_ENV, extra=("--approval-timeout", "60"))
    survivor = ServerProcess(project, keys=KEYS_ENV)
    try:
        finished = httpx.post(f"{victim.url}/v1/tools/echo/call", json={"name": "kept"}, headers=CALLER)
        finished_id = finished.headers["x-run-id"]
        slow_id = start_background(victim, "slow", {"seconds": 20})
        waiting_id = start_background(victim, "guarded", {"name": "left"})
        wait_for(lambda: httpx.get(f"{survivor.url}/v1/runs/{waiting_id}", headers=CALLER).json().get("pending_approvals"),
                 10, "the approval to be pending")
        events_before = httpx.get(f"{survivor.url}/v1/runs/{finished_id}/events",
                                  headers={**CALLER, "Accept": "application/json"}).json()
        os.killpg(victim.process.pid, signal.SIGKILL)
        victim.process.wait(timeout=10)
        killed_at = time.monotonic()
        for run_id in (slow_id, waiting_id):
            run = wait_for(lambda run_id=run_id: (r := httpx.get(f"{survivor.url}/v1/runs/{run_id}", headers=CALLER).json())["status"]
                           == "interrupted" and r, 20, f"{run_id} to be interrupted")
            assert "stopped" in (run["error"] or {}).get("message", "")
        assert time.monotonic() - killed_at < 15
        waiting = httpx.get(f"{survivor.url}/v1/runs/{waiting_id}", headers=CALLER).json()
        assert waiting["pending_approvals"] == []
        refused = httpx.post(f"{survivor.url}/v1/runs/{waiting_id}/approvals/call_x", json={"approve": True}, headers=CALLER)
        assert refused.status_code == 409
        after = httpx.get(f"{survivor.url}/v1/runs/{finished_id}/events", headers={**CALLER, "Accept": "application/json"}).json()
        assert after == events_before and after[-1]["type"] == "tool_call_result"
    finally:
        if victim.process.poll() is None:
            victim.process.kill()
        victim.stop()
        survivor.stop()
