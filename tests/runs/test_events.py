"""Events: the envelope, the names and stages, and listeners that misbehave."""

from __future__ import annotations

import asyncio
import json
import time
import typing
from pathlib import Path

from engine import Engine, Event, EventType

ROOT = Path(__file__).resolve().parents[2]
JD = (ROOT / "examples" / "jd.txt").read_text()
CONCURRENCY = Path(__file__).resolve().parents[1] / "projects" / "concurrency"
ROUTER = Path(__file__).resolve().parents[1] / "projects" / "router"
KNOWN_TYPES = set(typing.get_args(EventType))


def test_envelope_of_every_event() -> None:
    engine = Engine.from_dir(ROOT)
    events: list[Event] = []
    before = time.time() * 1000
    result = engine.call_tool_sync("analyzeJobAndGeneratePlan", {"jdText": JD}, on_event=events.append)
    after = time.time() * 1000
    assert result.ok, result.error
    for event in events:
        assert event.type in KNOWN_TYPES
        out = event.to_dict()
        assert list(out)[:4] == ["type", "run_id", "seq", "ts"] and "data" in out
        assert out["run_id"] == result.run_id and out["tool_call_id"] == result.tool_call_id
        assert before - 1 <= out["ts"] <= after + 1 and isinstance(out["ts"], int)
        json.dumps(out)
        if event.type.startswith("skill_"):
            assert event.step_id in ("extract-requirements", "generate-plan")
            assert event.skill in ("extractJobRequirements", "generateSevenDayPlan")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_event_names_and_stages_of_a_workflow_run() -> None:
    engine = Engine.from_dir(ROOT)
    events: list[Event] = []
    engine.call_tool_sync("analyzeJobAndGeneratePlan", {"jdText": JD}, on_event=events.append)
    types = [e.type for e in events]
    assert types[0] == "tool_call_start" and types[-1] == "tool_call_result"
    assert types.count("skill_start") == types.count("skill_result") == 2
    tool_stages = [e.data["stage"] for e in events if e.type == "tool_progress_delta"]
    assert tool_stages == ["matched", "prepared", "step_started", "step_finished", "step_started", "step_finished", "done"]
    started = [e.data for e in events if e.type == "tool_progress_delta" and e.data["stage"] == "step_started"]
    assert [(d["step"], d["of"], d["step_id"]) for d in started] == [
        (1, 2, "extract-requirements"),
        (2, 2, "generate-plan"),
    ]
    assert "step 1 of 2" in started[0]["message"]
    finished = [e.data for e in events if e.type == "tool_progress_delta" and e.data["stage"] == "step_finished"]
    assert all(d["duration_ms"] >= 0 for d in finished)
    stages = [e.data.get("stage") for e in events if e.type == "skill_progress_delta" and e.step_id == "generate-plan"]
    assert stages[:2] == ["rendered", "model_call"] and stages[-2:] == ["answered", "validated"]
    assert "streaming" in stages
    streaming = [e.data for e in events if e.type == "skill_progress_delta" and e.data.get("stage") == "streaming"]
    assert all(d["chars"] > 0 and d["chunks"] >= 1 for d in streaming)
    answered = [e.data for e in events if e.type == "skill_progress_delta" and e.data.get("stage") == "answered"]
    assert all(d["output_tokens"] > 0 for d in answered)
    results = [e for e in events if e.type == "skill_result"]
    assert events[-1].result is not None and results[1].data["output"] == events[-1].result.data
    assert all(r.data["duration_ms"] >= 0 for r in results)


def test_failure_events() -> None:
    engine = Engine.from_dir(ROUTER)
    events: list[Event] = []
    result = engine.call_tool_sync("boom", {"why": "x"}, on_event=events.append)
    [error] = [e for e in events if e.type == "skill_error"]
    assert error.data["code"] == "execution_error" and "kaboom" in error.data["message"]
    assert error.step_id == "boom" and error.skill == "boom"
    last = events[-1]
    assert last.type == "tool_call_error" and last.result is result
    assert last.data["error"] == result.error.to_dict()


def test_subscribe_and_unsubscribe() -> None:
    engine = Engine.from_dir(CONCURRENCY)
    seen: list[Event] = []
    unsubscribe = engine.subscribe(seen.append)
    engine.call_tool_sync("pipeline", {"text": "one", "delay": 0})
    count = len(seen)
    assert count > 5
    unsubscribe()
    engine.call_tool_sync("pipeline", {"text": "two", "delay": 0})
    assert len(seen) == count


def test_a_raising_listener_breaks_neither_the_call_nor_the_others() -> None:
    engine = Engine.from_dir(CONCURRENCY)
    calls_to_bad: list[str] = []

    def bad(event: Event) -> None:
        calls_to_bad.append(event.type)
        raise RuntimeError("listener bug")

    before: list[Event] = []
    after: list[Event] = []
    engine.subscribe(before.append)
    engine.subscribe(bad)
    engine.subscribe(after.append)
    own: list[Event] = []
    result = engine.call_tool_sync("pipeline", {"text": "robust", "delay": 0}, on_event=own.append)
    assert result.ok, result.error
    assert before == after == own
    assert own[-1].type == "tool_call_result"
    assert len(calls_to_bad) == len(own)  # it keeps receiving after raising


def test_a_raising_async_listener_breaks_neither_the_call_nor_the_others() -> None:
    engine = Engine.from_dir(CONCURRENCY)
    calls_to_bad: list[str] = []

    async def bad(event: Event) -> None:
        calls_to_bad.append(event.type)
        raise ValueError("async listener bug")

    seen: list[Event] = []
    engine.subscribe(bad)
    engine.subscribe(seen.append)
    result = engine.call_tool_sync("pipeline", {"text": "robust", "delay": 0})
    assert result.ok, result.error
    assert seen[-1].type == "tool_call_result"
    assert len(calls_to_bad) == len(seen)  # it keeps receiving after raising


def test_a_slow_async_listener_still_receives_every_event() -> None:
    engine = Engine.from_dir(CONCURRENCY)
    slow: list[Event] = []
    fast: list[Event] = []

    async def slow_listener(event: Event) -> None:
        await asyncio.sleep(0.002)
        slow.append(event)

    class AsyncCallable:
        def __init__(self) -> None:
            self.seen: list[Event] = []

        async def __call__(self, event: Event) -> None:
            await asyncio.sleep(0)
            self.seen.append(event)

    other = AsyncCallable()
    engine.subscribe(slow_listener)
    engine.subscribe(other)

    async def scenario() -> list:
        return await asyncio.gather(
            *(engine.call_tool("pipeline", {"text": f"slow {i}", "delay": 0}, on_event=fast.append) for i in range(5))
        )

    results = asyncio.run(scenario())
    assert all(r.ok for r in results)
    for events in (slow, other.seen):
        assert len(events) == len(fast)
        for r in results:
            run = [e for e in events if e.run_id == r.run_id]
            assert [e.seq for e in run] == list(range(1, len(run) + 1))
            assert run[-1].type == "tool_call_result"


def test_fast_listeners_are_not_held_up_by_a_slow_one() -> None:
    engine = Engine.from_dir(CONCURRENCY)
    arrival: dict[str, float] = {}

    async def slow_listener(event: Event) -> None:
        await asyncio.sleep(0.01)

    def fast(event: Event) -> None:
        arrival.setdefault(event.type, time.perf_counter())

    engine.subscribe(slow_listener)
    started = time.perf_counter()
    engine.call_tool_sync("pipeline", {"text": "x", "delay": 0}, on_event=fast)
    # The fast listener got the final event long before the slow one could have drained ~30 events.
    assert arrival["tool_call_result"] - started < 0.2
