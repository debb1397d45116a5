"""A run's state has one owner, its `Run` (issue 29 §2): the hub's `LiveRun` reads it there and
keeps no copy; a run that ends without saying how (its work raised, or was cancelled before it
opened the run) has that end recorded on its Run, by the runs' one end rule."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.runtime.agent import AgentResult, agent_run_end  # noqa: E402
from engine.runtime.events import Event  # noqa: E402
from engine.runtime.run import wait_for_answer  # noqa: E402
from engine.server.hub import LiveRun, RunHub  # noqa: E402
from engine.store.rows import RUN_START, Batch, Implier  # noqa: E402

ROUTER = Path(__file__).resolve().parents[1] / "projects" / "router"


@pytest.fixture
def engine() -> Engine:
    return Engine.from_dir(ROUTER)


def test_a_live_run_keeps_none_of_its_runs_state() -> None:
    state = {"kind", "name", "principal", "status", "error", "result", "_result", "started_at", "finished_at"}
    assert not state & set(LiveRun.__slots__)


def test_a_run_whose_work_raises_ends_in_error_on_its_run(engine: Engine) -> None:
    async def main() -> tuple[Any, LiveRun]:
        hub = RunHub(engine)
        hub.attach()
        opened: list[Any] = []

        async def work() -> None:
            run, _ = engine.open_run("run_crash", kind="tool", name="t", principal="alice")
            opened.append(run)
            run.emit("tool_progress_delta", {"n": 1})
            raise RuntimeError("the work broke")

        live = hub.start("run_crash", "tool", "t", work, principal="alice")
        await asyncio.gather(live.task, return_exceptions=True)
        await hub.detach()
        return opened[0], live

    run, live = asyncio.run(main())
    assert run.status == "error" and run.error == {"code": "server_error", "message": "RuntimeError: the work broke"}
    summary = live.summary()
    assert live.done and summary["status"] == "error" and summary["error"] == run.error
    assert (summary["started_at"], summary["finished_at"], summary["principal"]) == (run.started_at, run.finished_at, "alice")
    assert live.run is run and live.last_seq == 1


def test_a_run_cancelled_before_it_opens_is_cancelled(engine: Engine) -> None:
    async def main() -> tuple[RunHub, LiveRun]:
        hub = RunHub(engine)
        hub.attach()

        async def work() -> None:
            engine.open_run("run_never", kind="tool", name="t")  # never reached

        live = hub.start("run_never", "agent", "m", work, principal="bob")
        assert live.status == "running" and live.kind == "agent" and live.principal == "bob" and not live.done
        live.task.cancel()
        await asyncio.gather(live.task, return_exceptions=True)
        await hub.detach()
        return hub, live

    hub, live = asyncio.run(main())
    summary = live.summary()
    assert live.done and summary["status"] == "cancelled" and summary["error"]["code"] == "cancelled"
    assert summary["duration_ms"] is not None and summary["principal"] == "bob" and summary["live"] is False
    assert hub.started_live == 0  # its place under the caps is given back


def _store_status(events: list[Event]) -> tuple[str, str | None]:
    """The status and error the store writes for a run of `events` (its RUN_START row)."""
    implier, out = Implier(1, "host"), Batch()
    for index, event in enumerate(events):
        row = (event.run_id, event.seq, event.type, event.ts, event.tool_call_id, event.step_id, event.skill)
        implier.imply(index, row, event.data, out)
    rows = [params for name, _, params in out.each_implied() if name == RUN_START]
    return rows[0][3], rows[0][8]


@pytest.mark.parametrize("stop", ["answer", "cancelled", "max_steps", "timeout", "error"])
def test_the_store_and_the_engine_end_an_agent_run_alike(stop: str) -> None:
    result = AgentResult("run_a", stop, "the answer", [], error=None if stop == "answer" else "why")
    status, _, error = agent_run_end(result)
    start = Event("agent_start", "run_a", 1, 1, data={"model": "m", "input": []})
    done = Event("agent_done", "run_a", 2, 2, data={"stop_reason": stop, "answer": "the answer", "error": result.error})
    stored_status, stored_error = _store_status([start, done])
    assert stored_status == status
    assert (stored_error is None) == (error is None)


@pytest.mark.parametrize("tool, args, cancel", [
    ("echo", {"name": "a"}, False),  # ok
    ("nope", {}, False),  # unknown_tool
    ("slow", {"seconds": 5}, False),  # timeout
    ("dangerous", {"name": "a"}, False),  # confirmation_denied: nobody can approve
    ("dangerous", {"name": "a"}, True),  # cancelled while it waits for an approval
])
def test_the_store_and_the_engine_end_a_tool_run_alike(engine: Engine, tool: str, args: dict[str, Any],
                                                        cancel: bool) -> None:
    async def main() -> LiveRun:
        hub = RunHub(engine)
        hub.attach()
        approver = wait_for_answer if cancel else None
        call = asyncio.ensure_future(engine.call_tool(tool, args, run_id=f"run_{tool}", approve=approver))
        if cancel:
            await asyncio.sleep(0.1)
            call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await hub.detach()
        return hub.runs[f"run_{tool}"]

    live = asyncio.run(main())
    assert live.done and live.status == ("cancelled" if cancel else "ok" if tool == "echo" else "error")
    assert _store_status(live.records)[0] == live.status


def test_the_run_builds_every_field_of_its_events(engine: Engine) -> None:
    """`new_event` takes a ready tuple (one C call): a field added to Event without the Run's
    tuple growing with it would make events one short."""
    async def main() -> Event:
        run, _ = engine.open_run("run_fields", kind="tool", name="t")
        event = run.emit("tool_progress_delta", {"n": 1}, tool_call_id="call_1", step_id="s", skill="k")
        engine.end_run(run, "ok")
        return event

    event = asyncio.run(main())
    assert len(event) == len(Event._fields) and event._asdict()["tool_call_id"] == "call_1"
    assert (event.step_id, event.skill, event.data, event.data_json) == ("s", "k", {"n": 1}, None)


async def _followed(live: LiveRun) -> int:
    return sum([1 async for chunk in live.follow(0, heartbeat=5) if chunk])


def test_a_finished_run_leaves_no_cycle_for_the_collector(engine: Engine) -> None:
    """A Run whose follower waited holds its LiveRun's `arrive`; at its end the LiveRun gives
    it the deque's `append` back, so a retired run is freed at once, not left to the garbage
    collector (which `skillyard serve` runs rarely: the memory it holds costs every call)."""
    import gc

    async def call(n: int) -> None:
        await asyncio.sleep(0)  # the follower waits before the run opens: the Run is given `arrive`
        await engine.call_tool("echo", {"name": "a"}, run_id=f"run_gc_{n}")

    async def calls(hub: RunHub, count: int) -> None:
        for n in range(count):
            live = hub.start(f"run_gc_{n}", "tool", "echo", functools.partial(call, n))
            follower = asyncio.ensure_future(_followed(live))
            await live.task
            assert await follower

    async def main() -> int:
        hub = RunHub(engine, keep_finished=0)
        hub.attach()
        await calls(hub, 5)  # warm-up: first-call caches
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collection finds stays in gc.garbage, to be told apart
        try:
            await calls(hub, 40)
            await asyncio.sleep(0)
            gc.collect()
            found = sum(1 for thing in gc.garbage if _of_the_engine(thing))
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        await hub.detach()
        return found

    found = asyncio.run(main())
    assert found == 0  # no run of this test was left to the collector: no cycle per run


def _of_the_engine(thing: object) -> bool:
    """One of this test's runs (a Run or LiveRun of `run_gc_…`), not garbage a thread of another
    test in this worker (a server, a store's checkpointer) left meanwhile."""
    run_id = getattr(thing, "run_id", None)
    return isinstance(run_id, str) and run_id.startswith("run_gc_") and type(thing).__name__ in ("Run", "LiveRun")
