"""The activities of a worker: one step's skill, and writing numbered events to the store.

`run_step` runs one attempt of a step exactly as the local executor does
(`LinkedStep.attempt`: its SkillContext, its timeout, its output schema; a sync python skill
off the event loop), heartbeating meanwhile so that Temporal learns at once when this worker
is gone (the step then runs on another) and can deliver a cancellation. Events the skill
emits are collected, unnumbered, and returned with the outcome: the workflow's Run numbers
and redacts them.

`write_rows` writes numbered events; the store keys them by (run_id, seq), so a retried
batch changes nothing. Every row was emitted by a workflow's Run, which redacted it (as a
local run's events are, once, in `Run.emit`): it is written as it comes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from temporalio import activity

from ...executors.workflow import WorkflowExecutor
from ...runtime.context import CallContext, SkillContext
from ...runtime.events import Event
from ...runtime.run import Run
from ...runtime.timing import elapsed_ms, perf_counter_ns
from .protocol import RECORD_ACTIVITY, STEP_ACTIVITY
from .served import check_revision

if TYPE_CHECKING:
    from ...runtime.contracts import Skill
    from ...store.shared import SharedStore


class Activities:
    """The activities of one worker, bound to its store."""

    def __init__(self, store: "SharedStore") -> None:
        self.store = store

    def all(self) -> list[Any]:
        return [self.run_step, self.record_events]

    @activity.defn(name=STEP_ACTIVITY)
    async def run_step(self, task: dict[str, Any]) -> dict[str, Any]:
        here = check_revision(task["revision"])
        if task.get("record"):  # the workflow's events before this step (numbered, so a retry rewrites nothing)
            await self.write_rows(task["run_id"], task["record"])
        executor = here.project.tools[task["tool"]].executor
        assert isinstance(executor, WorkflowExecutor)  # a step activity runs a step of a workflow tool
        step = executor.steps[task["step"]]
        skill = step.skill
        events: list[list[Any]] = []
        run = Run(task["run_id"], [lambda e: events.append([e.type, e.ts, e.step_id, e.skill, e.data])])
        context = CallContext(task["run_id"], task["tool_call_id"], task["tool"], run, here.project, task.get("model"))
        ctx = SkillContext(context, step.event_id, skill.name, task["attempt"]) if skill.needs_context else None
        beating = asyncio.get_running_loop().create_task(heartbeat(here.config.heartbeat_timeout / 3))
        started = perf_counter_ns()
        try:
            output = await step.attempt(task["input"], ctx, off_the_loop(skill))
        except Exception as exc:  # noqa: BLE001 - a skill's failure is the workflow's to judge (retry or fail)
            failure = step.failure(exc)
            return {"ok": False, "code": failure.code, "message": failure.message, "details": failure.details,
                    "retryable": failure.retryable, "events": events, "duration_ms": elapsed_ms(started)}
        finally:
            beating.cancel()
        return {"ok": True, "output": output, "events": events, "duration_ms": elapsed_ms(started),
                "activity_attempt": activity.info().attempt}

    @activity.defn(name=RECORD_ACTIVITY)
    async def record_events(self, batch: dict[str, Any]) -> int:
        await self.write_rows(batch["run_id"], batch["events"])
        return len(batch["events"])

    async def write_rows(self, run_id: str, rows: list[list[Any]]) -> None:
        """Numbered, redacted events into the store, committed before returning (a StoreError
        fails the attempt, and Temporal tries again)."""
        listener = self.store.listener
        for seq, kind, ts, call_id, step_id, skill, data in rows:
            listener(Event(kind, run_id, seq, ts, call_id, step_id, skill, data))
        await asyncio.to_thread(self.store.flush)


def off_the_loop(skill: "Skill") -> Callable[[Any, Any], Any]:
    """How a worker calls the skill: a sync python function in a thread, so that heartbeats go on."""
    if skill.kind == "python" and not getattr(skill, "is_async", True):
        return lambda value, ctx: asyncio.to_thread(skill.call, value, ctx)
    return skill.call


async def heartbeat(every: float) -> None:
    """Tell Temporal this worker still runs the activity (and hear of a cancellation), every
    `every` seconds from `every` on: a step shorter than that sends none (each heartbeat is a
    call to the server, which records it), and a worker lost before its first one is found out
    by the heartbeat timeout all the same."""
    while True:
        await asyncio.sleep(every)
        activity.heartbeat()

