"""The activities of a worker: one step's skill, and writing numbered events to the store.

`run_step` runs the skill exactly as the local executor does (its SkillContext, its timeout,
its output schema), heartbeating meanwhile so that Temporal learns at once when this worker
is gone (the step then runs on another) and can deliver a cancellation. Events the skill
emits are collected, unnumbered, and returned with the outcome: the workflow numbers them.

`record_events` writes numbered events; the store keys them by (run_id, seq), so a retried
batch changes nothing. Events are redacted here (the run's scrubber learns the call's
arguments first), before they leave the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ...executors.workflow import _invalid_output, _step_failure
from ...runtime.context import RunContext, SkillContext
from ...runtime.deadlines import deadline
from ...runtime.events import Event
from ...runtime.run import Run
from ...runtime.timing import PLAIN_TYPES, elapsed_ms, perf_counter_ns
from .protocol import RECORD_ACTIVITY, REVISION_MISMATCH, STEP_ACTIVITY, mismatch_message
from .served import served

if TYPE_CHECKING:
    from ...safety.redaction import RunScrubber
    from ...store import Store

SCRUBBERS_KEPT = 1024  # runs whose redaction state a worker keeps (a run's steps usually come to one worker)


class Activities:
    """The activities of one worker, bound to its store."""

    def __init__(self, store: "Store") -> None:
        self.store = store
        self._scrubbers: OrderedDict[str, RunScrubber] = OrderedDict()

    def all(self) -> list[Any]:
        return [self.run_step, self.record_events]

    @activity.defn(name=STEP_ACTIVITY)
    async def run_step(self, task: dict[str, Any]) -> dict[str, Any]:
        here = _check_revision(task["revision"])
        if task.get("record"):  # the workflow's events before this step (numbered, so a retry rewrites nothing)
            await self.write_rows(task["run_id"], task.get("arguments"), task["record"])
        step = here.project.tools[task["tool"]].executor.steps[task["step"]]
        events: list[list[Any]] = []
        run = Run(task["run_id"], [lambda e: events.append([e.type, e.ts, e.step_id, e.skill, e.data])])
        context = RunContext(task["run_id"], task["tool_call_id"], task["tool"], run, here.project, task.get("model"))
        beating = asyncio.get_running_loop().create_task(_heartbeat(here.config.heartbeat_timeout / 3))
        started = perf_counter_ns()
        try:
            output = await _call_skill(step, task["input"], context, task["attempt"])
        except Exception as exc:  # noqa: BLE001 - a skill's failure is the workflow's to judge (retry or fail)
            failure = _step_failure(step, exc)
            return {"ok": False, "code": failure.code, "message": failure.message, "details": failure.details,
                    "retryable": failure.retryable, "events": events, "duration_ms": elapsed_ms(started)}
        finally:
            beating.cancel()
        return {"ok": True, "output": output, "events": events, "duration_ms": elapsed_ms(started),
                "activity_attempt": activity.info().attempt}

    @activity.defn(name=RECORD_ACTIVITY)
    async def record_events(self, batch: dict[str, Any]) -> int:
        await self.write_rows(batch["run_id"], batch.get("arguments"), batch["events"])
        return len(batch["events"])

    async def write_rows(self, run_id: str, arguments: Any, rows: list[list[Any]]) -> None:
        """Numbered events into the store, committed before returning (a StoreError fails the
        attempt, and Temporal tries again)."""
        scrub = self._scrubber(run_id, arguments)
        listener = self.store.listener
        for seq, kind, ts, call_id, step_id, skill, data in rows:
            listener(Event(kind, run_id, seq, ts, call_id, step_id, skill, scrub(data)))
        await asyncio.to_thread(self.store.flush)

    def _scrubber(self, run_id: str, arguments: Any) -> "RunScrubber":
        """The run's redaction state; a new one first reads the call's arguments (to know their secrets)."""
        scrub = self._scrubbers.get(run_id)
        if scrub is None:
            scrub = self._scrubbers[run_id] = served().project.redactor.for_run()
            scrub(arguments)
            while len(self._scrubbers) > SCRUBBERS_KEPT:
                self._scrubbers.popitem(last=False)
        else:
            self._scrubbers.move_to_end(run_id)
        return scrub


async def _call_skill(step: Any, value: Any, context: RunContext, attempt: int) -> Any:
    """The skill's output, as engine/executors/workflow.py calls it (raises what the skill raises)."""
    skill = step.skill
    ctx = SkillContext(context, step.id, skill.name, attempt) if skill.needs_context else None
    with deadline(step.timeout) if step.timeout is not None else contextlib.nullcontext():
        if skill.kind == "python" and not getattr(skill, "is_async", True):  # off the loop: heartbeats go on
            output = await asyncio.to_thread(skill.call, value, ctx)
        else:
            output = skill.call(value, ctx)
        if type(output) not in PLAIN_TYPES and inspect.isawaitable(output):
            output = await output
    schema = skill.output_schema
    if schema is not None and not schema.is_valid(output):
        raise _invalid_output(skill, schema.check(output))
    return output


async def _heartbeat(every: float) -> None:
    """Tell Temporal this worker still runs the step (and hear of a cancellation)."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)


def _check_revision(asked: str) -> Any:
    here = served()
    if asked != here.revision:
        raise ApplicationError(mismatch_message(asked, here.revision), type=REVISION_MISMATCH, non_retryable=True)
    return here
