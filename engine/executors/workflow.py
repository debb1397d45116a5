"""The workflow executor: run steps in order, mapping inputs from arguments and earlier outputs."""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import dataclass
from typing import Any

from ..context import RunContext, SkillContext
from ..errors import StepFailure
from ..mapping import MISSING, MappingError, Resolver
from ..skills.base import Skill


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})


@dataclass(frozen=True, slots=True)
class LinkedStep:
    id: str
    skill: Skill
    resolve_input: Resolver
    timeout: float | None
    retries: int
    retry_delay: float


class WorkflowExecutor:
    kind = "workflow"

    def __init__(self, name: str, steps: list[LinkedStep], resolve_output: Resolver | None):
        self.name = name
        self.steps = steps
        self.resolve_output = resolve_output
        # Progress payloads are the same for every call: built once here, never per call.
        # (Event data is read-only for listeners, so sharing these dicts is safe.)
        total = len(steps)
        self._prepared = {"stage": "prepared", "message": f"workflow {name!r} prepared: {total} steps", "workflow": name, "steps": total}
        self._done = {"stage": "done", "message": f"workflow {name!r} done", "workflow": name}
        self._started = [
            {"stage": "step_started", "message": f"step {k} of {total} started: {step.id}", "step": k, "of": total, "step_id": step.id}
            for k, step in enumerate(steps, 1)
        ]
        self._finished = [f"step {k} of {total} finished: {step.id}" for k, step in enumerate(steps, 1)]

    async def execute(self, args: dict[str, Any], run: RunContext) -> Any:
        emit = run.events.emit
        call_id = run.tool_call_id
        total = len(self.steps)
        emit("tool_progress_delta", self._prepared, tool_call_id=call_id)
        outputs: dict[str, Any] = {}
        output: Any = None
        for index, step in enumerate(self.steps):
            started = time.perf_counter()
            emit("tool_progress_delta", self._started[index], tool_call_id=call_id)
            output = await self._run_step(step, args, outputs, run)
            outputs[step.id] = output
            emit(
                "tool_progress_delta",
                {
                    "stage": "step_finished",
                    "message": self._finished[index],
                    "step": index + 1,
                    "of": total,
                    "step_id": step.id,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                },
                tool_call_id=call_id,
            )
        if self.resolve_output is not None:
            try:
                output = self.resolve_output(args, outputs)
            except MappingError as exc:
                raise StepFailure("execution_error", f"workflow output: {exc}") from None
            if output is MISSING:
                output = None
        emit("tool_progress_delta", self._done, tool_call_id=call_id)
        return output

    async def _run_step(self, step: LinkedStep, args: dict[str, Any], outputs: dict[str, Any], run: RunContext) -> Any:
        skill = step.skill
        emit = run.events.emit
        try:
            value = step.resolve_input(args, outputs)
        except MappingError as exc:
            failure = StepFailure("execution_error", f"step {step.id!r} input: {exc}")
            emit("skill_error", {"code": failure.code, "message": failure.message, "attempt": 1},
                 tool_call_id=run.tool_call_id, step_id=step.id, skill=skill.name)
            raise failure from None
        if value is MISSING:
            value = {}
        violations = [] if skill.input_schema.is_valid(value) else skill.input_schema.check(value)
        if violations:
            failure = StepFailure(
                "execution_error",
                f"step {step.id!r} gave skill {skill.name!r} an invalid input: "
                + "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:5]),
                {"step_id": step.id, "errors": [v.as_dict() for v in violations]},
            )
            emit("skill_error", {"code": failure.code, "message": failure.message, "attempt": 1},
                 tool_call_id=run.tool_call_id, step_id=step.id, skill=skill.name)
            raise failure
        if skill.input_schema.has_defaults:
            value = skill.input_schema.with_defaults(value)
        attempt = 1
        delay = step.retry_delay
        while True:
            started = time.perf_counter()
            emit("skill_start", {"input": value, "attempt": attempt, "kind": skill.kind},
                 tool_call_id=run.tool_call_id, step_id=step.id, skill=skill.name, clean=skill.input_clean)
            try:
                output = await self._invoke(step, value, SkillContext(run, step.id, skill.name, attempt))
            except StepFailure as failure:
                error = failure
            except (TimeoutError, asyncio.TimeoutError):
                limit = f"longer than {step.timeout:g}s" if step.timeout is not None else "too long (the skill raised TimeoutError)"
                error = StepFailure("timeout", f"step {step.id!r} took {limit}", retryable=True)
            except Exception as exc:  # noqa: BLE001 - a skill's bug becomes an error event, not a crash
                error = StepFailure("execution_error", f"skill {skill.name!r} raised {type(exc).__name__}: {exc}", retryable=True)
            else:
                emit("skill_result", {"output": output, "duration_ms": round((time.perf_counter() - started) * 1000, 2)},
                     tool_call_id=run.tool_call_id, step_id=step.id, skill=skill.name, clean=skill.output_clean)
                return output
            will_retry = attempt <= step.retries and error.retryable
            emit("skill_error",
                 {"code": error.code, "message": error.message, "attempt": attempt, "will_retry": will_retry,
                  "duration_ms": round((time.perf_counter() - started) * 1000, 2)},
                 tool_call_id=run.tool_call_id, step_id=step.id, skill=skill.name)
            if not will_retry:
                raise error
            await asyncio.sleep(delay)
            delay *= 2
            attempt += 1

    @staticmethod
    async def _invoke(step: LinkedStep, value: dict[str, Any], ctx: SkillContext) -> Any:
        skill = step.skill
        call_sync = skill.call_sync
        if step.timeout is None:
            if call_sync is not None:  # a plain function: no coroutine frame per step
                output = call_sync(value, ctx)
                if type(output) not in _PLAIN and inspect.isawaitable(output):
                    output = await output
            else:
                output = await skill.run(value, ctx)
        else:
            async with asyncio.timeout(step.timeout):
                output = await skill.run(value, ctx)
        schema = skill.output_schema
        if schema is not None and not schema.is_valid(output):
            violations = schema.check(output)
            raise StepFailure(
                "execution_error",
                f"skill {skill.name!r} returned output that does not match its output schema: "
                + "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:5]),
                {"errors": [v.as_dict() for v in violations]},
            )
        return output
