"""`Engine.call_tool(announce_start=True)`: a streamed call's first event is out before its
tool runs, so under a burst every stream hears its call began before any call's work."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine import Engine

REPO = Path(__file__).resolve().parents[2]
ARGS = {"text": "The quick brown fox jumps over the lazy dog."}


def _calls(announce: bool) -> list[tuple[str, str]]:
    engine = Engine.from_dir(REPO)
    order: list[tuple[str, str]] = []

    async def burst() -> None:
        calls = [engine.call_tool("textReport", ARGS, run_id=f"run_{i}", announce_start=announce,
                                  on_event=lambda e: order.append((e.run_id, e.type))) for i in range(3)]
        results = await asyncio.gather(*calls)
        assert all(r.ok for r in results)

    asyncio.run(burst())
    return [(run, kind) for run, kind in order if kind in ("tool_call_start", "tool_call_result")]


def test_every_start_before_any_work() -> None:
    assert _calls(True) == [("run_0", "tool_call_start"), ("run_1", "tool_call_start"), ("run_2", "tool_call_start"),
                            ("run_0", "tool_call_result"), ("run_1", "tool_call_result"), ("run_2", "tool_call_result")]


def test_without_it_a_call_runs_through() -> None:
    assert _calls(False) == [("run_0", "tool_call_start"), ("run_0", "tool_call_result"),
                             ("run_1", "tool_call_start"), ("run_1", "tool_call_result"),
                             ("run_2", "tool_call_start"), ("run_2", "tool_call_result")]


def test_cancelled_while_announcing_still_ends() -> None:
    engine = Engine.from_dir(REPO)
    events: list[str] = []

    async def cancel_at_once() -> None:
        task = asyncio.ensure_future(engine.call_tool("textReport", ARGS, announce_start=True,
                                                      on_event=lambda e: events.append(e.type)))
        await asyncio.sleep(0)  # the call has announced itself and yielded
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(cancel_at_once())
    assert events[0] == "tool_call_start"
    assert events[-1] == "tool_call_error"
    assert "skill_start" not in events
