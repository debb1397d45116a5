"""Many calls on one Engine at once, a reload in the middle, and the ways to call it.

tests/projects/concurrency: an async python step that sleeps, a mock prompt step that
streams, and a template step whose text says which version of the project ran it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from engine import ConfigError, Engine, Event, ToolResult, UsageError

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "concurrency"
CALLS = 200


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def check_run(events: list[Event], result: ToolResult) -> None:
    """One run's events: gap-free, its own ids only, start first and result last."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.run_id for e in events} == {result.run_id}
    assert {e.tool_call_id for e in events} == {result.tool_call_id}
    assert events[0].type == "tool_call_start"
    assert events[-1].type == "tool_call_result" and events[-1].result is result
    assert [e.type for e in events].count("tool_call_result") == 1
    stamps = [e.ts for e in events]
    assert stamps == sorted(stamps)


def test_200_concurrent_calls_with_a_reload_in_the_middle(project_dir: Path) -> None:
    engine = Engine.from_dir(project_dir)
    everything: list[Event] = []
    engine.subscribe(everything.append)
    old_project = engine.project

    async def scenario() -> tuple[list[tuple[int, ToolResult, list[Event]]], object]:
        async def one(i: int) -> tuple[int, ToolResult, list[Event]]:
            own: list[Event] = []
            delay = (i % 7) / 1000
            result = await engine.call_tool(
                "pipeline", {"text": f"call {i} about Kubernetes", "delay": delay}, on_event=own.append
            )
            return i, result, own

        first = [asyncio.create_task(one(i)) for i in range(CALLS // 2)]
        await asyncio.sleep(0.002)  # every first-half call has started and pinned its project
        report = project_dir / "skills.yaml"
        report.write_text(report.read_text().replace("version=v1", "version=v2"))
        new_project = engine.reload()
        second = [asyncio.create_task(one(i)) for i in range(CALLS // 2, CALLS)]
        return list(await asyncio.gather(*first, *second)), new_project

    outcomes, new_project = asyncio.run(scenario())
    assert new_project is engine.project and new_project is not old_project

    by_run: dict[str, list[Event]] = defaultdict(list)
    for event in everything:
        by_run[event.run_id].append(event)
    assert len(by_run) == CALLS
    assert len({result.tool_call_id for _, result, _ in outcomes}) == CALLS

    for i, result, own in outcomes:
        assert result.ok, result.error
        check_run(own, result)
        assert by_run[result.run_id] == own  # the engine-wide listener saw the same, in order
        version = "v1" if i < CALLS // 2 else "v2"  # in-flight calls finish on the old project
        assert result.data.startswith(f"version={version} text=call {i} about Kubernetes ")
        steps = [e.step_id for e in own if e.type == "skill_result"]
        assert steps == ["wait", "summarize", "report"]
        progress = [e for e in own if e.type == "skill_progress_delta" and e.step_id == "wait"]
        assert [p.data["message"] for p in progress] == ["waiting", "waited"]


def test_a_broken_reload_keeps_the_current_project(project_dir: Path) -> None:
    engine = Engine.from_dir(project_dir)
    before = engine.project
    (project_dir / "workflows.yaml").write_text("workflows:\n  pipeline:\n    steps: []\n")
    with pytest.raises(ConfigError):
        engine.reload()
    assert engine.project is before
    assert engine.call_tool_sync("pipeline", {"text": "still works", "delay": 0}).ok


def test_stream_tool_yields_every_event_and_ends_with_the_result() -> None:
    engine = Engine.from_dir(PROJECT)

    async def collect() -> list[Event]:
        return [event async for event in engine.stream_tool("pipeline", {"text": "streamed", "delay": 0})]

    events = asyncio.run(collect())
    result = events[-1].result
    assert result is not None and result.ok and "text=streamed" in result.data
    check_run(events, result)
    assert all(e.result is None for e in events[:-1])
    assert any(e.type == "skill_progress_delta" and e.data.get("stage") == "streaming" for e in events)


def test_stream_tool_of_a_bad_call_ends_with_the_error_result() -> None:
    engine = Engine.from_dir(PROJECT)

    async def collect() -> list[Event]:
        return [event async for event in engine.stream_tool("pipeline", {"text": ""})]

    events = asyncio.run(collect())
    assert [e.type for e in events] == ["tool_call_start", "tool_call_error"]
    assert events[-1].result is not None and events[-1].result.error.code == "invalid_arguments"


def test_many_concurrent_streams() -> None:
    engine = Engine.from_dir(PROJECT)

    async def collect(i: int) -> list[Event]:
        return [event async for event in engine.stream_tool("pipeline", {"text": f"stream {i}", "delay": 0.001})]

    async def scenario() -> list[list[Event]]:
        return list(await asyncio.gather(*(collect(i) for i in range(20))))

    for i, events in enumerate(asyncio.run(scenario())):
        result = events[-1].result
        assert result is not None and f"text=stream {i} " in result.data
        check_run(events, result)


def test_leaving_a_stream_early_cancels_the_call() -> None:
    engine = Engine.from_dir(PROJECT)
    everything: list[Event] = []
    engine.subscribe(everything.append)

    async def scenario() -> list[Event]:
        seen: list[Event] = []
        stream = engine.stream_tool("pipeline", {"text": "abandoned", "delay": 5})
        async for event in stream:
            seen.append(event)
            if event.type == "skill_start":
                break
        await asyncio.wait_for(stream.aclose(), 1)  # does not wait for the 5 s step
        return seen

    seen = asyncio.run(scenario())
    assert seen[-1].type == "skill_start"
    last = everything[-1]  # other listeners learn how the call ended
    assert last.type == "tool_call_error" and last.data["error"]["code"] == "cancelled"
    assert [e.seq for e in everything] == list(range(1, len(everything) + 1))


def test_call_tool_sync_outside_a_loop() -> None:
    engine = Engine.from_dir(PROJECT)
    events: list[Event] = []
    result = engine.call_tool_sync("pipeline", {"text": "sync", "delay": 0}, on_event=events.append)
    assert result.ok and "text=sync" in result.data
    check_run(events, result)


def test_call_tool_sync_inside_a_loop_raises_usage_error() -> None:
    engine = Engine.from_dir(PROJECT)

    async def inside() -> None:
        with pytest.raises(UsageError, match="await engine.call_tool"):
            engine.call_tool_sync("pipeline", {"text": "x"})
        result = await engine.call_tool("pipeline", {"text": "x", "delay": 0})  # the loop still works
        assert result.ok

    asyncio.run(inside())
