"""The Run: one place for a run's state, answered and cancelled from any front door."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine import Engine, Event
from engine.errors import AgentSetupError

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "router"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.from_dir(PROJECT)


async def _never(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
    """An approver that asks somebody who never answers (a terminal nobody watches)."""
    await asyncio.Event().wait()
    return False


async def _pending_run(engine: Engine, task: asyncio.Task[Any], run_id: str) -> Any:
    for _ in range(200):
        run = engine.runs.get(run_id)
        if run is not None and run.pending_approvals:
            return run
        await asyncio.sleep(0.005)
    raise AssertionError(f"run {run_id} never asked for approval")


def test_a_pending_approval_is_answered_through_the_run_from_another_door(engine: Engine) -> None:
    async def go() -> tuple[Any, Any]:
        task = asyncio.ensure_future(engine.call_tool("dangerous", {"name": "x"}, run_id="run_door", approve=_never))
        run = await _pending_run(engine, task, "run_door")
        (call_id,) = run.pending_approvals
        assert run.status == "running" and not run.done
        assert not run.answer("call_other", True)  # only the pending call takes an answer
        assert run.answer(call_id, True)
        assert not run.answer(call_id, False)  # answered already
        return await task, run

    result, run = asyncio.run(go())
    assert result.ok and result.data == {"name": "x"}
    assert run.status == "ok" and run.done and run.result.data == {"name": "x"}
    assert "run_door" not in engine.runs  # no longer live


def test_a_run_is_cancelled_through_the_run(engine: Engine) -> None:
    async def go() -> tuple[Any, Any]:
        task = asyncio.ensure_future(engine.call_tool("dangerous", {"name": "x"}, run_id="run_cancel", approve=_never))
        run = await _pending_run(engine, task, "run_cancel")
        assert run.cancel()
        return await asyncio.gather(task, return_exceptions=True), run

    (outcome,), run = asyncio.run(go())
    assert isinstance(outcome, asyncio.CancelledError) or (outcome.error and outcome.error.code == "cancelled")
    assert run.status == "cancelled" and run.error["code"] == "cancelled" and not run.cancel()


def test_without_an_approver_a_confirmation_is_denied_at_once(engine: Engine) -> None:
    result = engine.call_tool_sync("dangerous", {"name": "x"})
    assert result.error is not None and result.error.code == "confirmation_denied"


def test_the_run_records_its_end_and_its_events_are_gap_free(engine: Engine) -> None:
    seen: list[Event] = []
    ended: list[str] = []

    def listener(event: Event) -> None:
        seen.append(event)
        run = engine.runs.get(event.run_id)
        if event.seq == 1 and run is not None:
            run.on_end(lambda r: ended.append(r.status))

    result = engine.call_tool_sync("echo", {"name": "Ada"}, on_event=listener)
    assert result.ok and ended == ["ok"]
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    failed = engine.call_tool_sync("echo", {"name": 5}, on_event=listener)
    assert failed.error.code == "invalid_arguments" and ended == ["ok", "error"]


def test_engine_agent_checks_model_tools_and_tool_choice_for_every_front_door(engine: Engine) -> None:
    for kwargs, code, field in [
        ({"model": "nope"}, "unknown_model", "model"),
        ({"tools": ["ghost"]}, "unknown_tool", "tools"),
        ({"tool_choice": "sometimes"}, "invalid_request", "tool_choice"),
    ]:
        with pytest.raises(AgentSetupError) as caught:
            engine.agent(**kwargs)
        assert caught.value.code == code and caught.value.field == field
